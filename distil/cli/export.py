"""`distil export RUN_DIR [--int8]`: a run's student as ONNX, checked against PyTorch on the run's test split.

Writes model.onnx (and with --int8 model.int8.onnx, ONNX Runtime's int8 quantisation) into the run's
student folder, student/ or every student-<lang>/ of a D0 run, beside model.safetensors. Each file is
then served by ONNX Runtime on the run's whole test split, read as the run read it, and compared
with the saved student in PyTorch: the largest logit difference, how many predictions agree, the
test score in the task's own metric, and examples per second.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from distil.cli.parsing import Parser
from distil.common.console import console_command
from distil.errors import DistilError

EXAMPLES = """\
examples:
  distil export outputs/runs/<date>/<time>            # -> student/model.onnx
  distil export outputs/runs/<date>/<time> --int8     # and student/model.int8.onnx
  distil export outputs/runs/<date>/<time>/student    # the student folder of a run names its run too
"""
INT8_TOLERANCE = 0.5  # points of the test score int8 may lose before the command warns
TIMED_SECONDS = 1.0  # a model's speed: its fastest pass over the test split, passes repeated for this long (at most 5)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil export", __doc__.splitlines()[0], EXAMPLES)
    parser.add_argument("run_dir", type=Path, help="a run directory written by `distil` (or its student/ folder)")
    parser.add_argument("--int8", action="store_true",
                        help="also write model.int8.onnx (int8 weights) and score it on the test split")
    return parser


def student_folders(path: Path) -> tuple[Path, list[Path]]:
    """(the run directory, its student folders: student/, or every student-<lang>/ of a D0 run)."""
    if not path.is_dir():
        raise DistilError(f"{path} is not a directory; pass a run directory written by `distil` "
                          f"(outputs/runs/<date>/<time>)")
    if (path / "config.json").is_file() and (path.parent / ".hydra").is_dir():  # a run's student folder
        return path.parent, [path]
    if not (path / ".hydra" / "config.yaml").is_file():
        raise DistilError(f"{path} is not a run directory (it has no .hydra/config.yaml, the run's configuration); "
                          f"pass one written by `distil`, e.g. outputs/runs/<date>/<time>")
    folders = sorted(folder for folder in [path / "student", *path.glob("student-*")] if folder.is_dir())
    if not folders:
        raise DistilError(f"{path} holds no saved student (student/ or student-<lang>/): the run did not finish "
                          f"(see the status in its metrics.json); rerun it, then export")
    return path, folders


def check_not_peer(folder: Path) -> None:
    """A peer's folder (student=peer-*) holds another tool's model, which has no graph to export."""
    try:
        student = json.loads((folder / "config.json").read_text())["student"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # SavedStudent says what is wrong with the folder
    if isinstance(student, dict) and student.get("kind") == "peer":
        raise DistilError(f"{folder} holds a peer (student={student.get('name')}), another tool's model, not a "
                          f"distil student; export a run of a distil student (bilstm, static, transformer, ...)")


def recorded_score(run_dir: Path, metric: str, language: str | None) -> float | None:
    """The student's test score the run wrote in metrics.json (a D0 student's, its language's), if any."""
    try:
        test = json.loads((run_dir / "metrics.json").read_text())["student"]["test"]
        return test["per_language"][language] if language else test[metric]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def main(argv: list[str] | None = None, prog: str = "distil export") -> int:
    args = build_parser(prog).parse_args(sys.argv[1:] if argv is None else argv)
    with console_command(prog):
        run_dir, folders = student_folders(args.run_dir)
        for folder in folders:
            check_not_peer(folder)
        # torch, transformers and the data: only once the input is checked
        from omegaconf import OmegaConf

        from distil.common.libraries import quiet_libraries
        from distil.config.schema import register_configs
        from distil.run.data import task_data
        from distil.tasks import make_task

        register_configs()  # the resolvers the run's configuration may name
        quiet_libraries()
        cfg = OmegaConf.load(run_dir / ".hydra" / "config.yaml")
        task = make_task(cfg.dataset)
        print(f"reading the test split of {cfg.dataset.name}, as the run did", flush=True)
        data = task_data(cfg, task=task)
        for folder in folders:
            export_student(run_dir, folder, task, data, args.int8)
    return 0


def export_student(run_dir: Path, folder: Path, task, data, int8: bool) -> None:
    from distil.serve.export import (
        agreement,
        encoded_batches,
        export_onnx,
        onnx_forward,
        quantise_int8,
        run_pass,
        score,
        split_texts,
        torch_forward,
    )
    from distil.serve.onnx_session import ONNX_FILES
    from distil.serve.student import SavedStudent

    student = SavedStudent(folder, device="cpu")
    split = task.prepare("test", student.tokenizer, data.splits["test"], student.config["max_length"],
                         data.label_names)
    language = folder.name.removeprefix("student-") if folder.name.startswith("student-") else None
    if language is not None:  # D0: a student per language, scored on its language's examples
        split = split.language(language)
    texts = split_texts(split, task.inputs)
    if not texts:
        raise DistilError(f"the run's test split has no example for {folder.name} to be checked on; give the "
                          f"dataset a test split")
    print(f"{folder}: exporting the {student.cfg.name} student", flush=True)
    started = time.perf_counter()
    fp32 = folder / ONNX_FILES["onnx"]
    export_onnx(student, fp32)
    print(f"  wrote {fp32} ({megabytes(fp32)}) in {time.perf_counter() - started:.1f} s", flush=True)

    print(f"  serving the {len(texts)} test examples with PyTorch and with ONNX Runtime", flush=True)
    batches = encoded_batches(student, texts)
    reference = run_pass(torch_forward(student), batches, TIMED_SECONDS)
    exported = run_pass(onnx_forward(fp32), batches, TIMED_SECONDS)
    metric, names = task.metric, data.label_names
    fp32_score = score(task, exported, split, names)[metric]
    torch_score = score(task, reference, split, names)[metric]
    print(f"  ONNX Runtime against PyTorch: {compared(agreement(reference, exported))}")
    recorded = recorded_score(run_dir, metric, language)
    print(f"  test {metric}: ONNX {points(fp32_score)}, PyTorch {points(torch_score)}"
          + (f" (the run recorded {points(recorded)})" if recorded is not None else "")
          + f"; {rate(exported, texts)} examples/s (PyTorch {rate(reference, texts)}, batches of 32)", flush=True)
    if not int8:
        return
    started = time.perf_counter()
    path = folder / ONNX_FILES["onnx-int8"]
    quantise_int8(fp32, path)
    print(f"  wrote {path} ({megabytes(path)}, {path.stat().st_size / fp32.stat().st_size:.2f}x the fp32 file) in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    quantised = run_pass(onnx_forward(path), batches, TIMED_SECONDS)
    int8_score = score(task, quantised, split, names)[metric]
    change = 100 * (int8_score - fp32_score)
    speedup = exported.seconds / max(quantised.seconds, 1e-9)
    print(f"  int8: test {metric} {points(int8_score)} ({change:+.2f} against fp32, "
          f"{100 * (int8_score - torch_score):+.2f} against PyTorch); {rate(quantised, texts)} examples/s "
          f"({speedup:.1f}x fp32)")
    print(f"  int8 against PyTorch: {compared(agreement(reference, quantised))}", flush=True)
    problems = ([f"slower than fp32 ({rate(quantised, texts)} against {rate(exported, texts)} examples/s)"]
                if speedup < 1 else [])
    problems += [f"{-change:.2f} points worse than fp32 on test {metric}"] if change < -INT8_TOLERANCE else []
    if problems:
        print(f"warning: {folder.name}'s int8 model is {' and '.join(problems)}; serve model.onnx instead",
              file=sys.stderr, flush=True)


def compared(result) -> str:
    """The largest logit difference, and the predictions that agree (all of them: 100%, never rounded up to it)."""
    line = f"largest logit difference {result.max_difference:.1e}"
    if result.agreeing is None:  # a regression: its logit is its prediction
        return line
    share = "100%" if result.agreeing == result.compared else f"{min(100 * result.share, 99.99):.2f}%"
    return f"{line}, predictions agree {share} ({result.agreeing} of {result.compared} {result.unit})"


def points(value: float) -> str:
    return f"{100 * value:.2f}"


def rate(outputs, texts: list[str]) -> str:
    return f"{len(texts) / max(outputs.seconds, 1e-9):,.0f}"


def megabytes(path: Path) -> str:
    size = path.stat().st_size
    return f"{size / 1e6:.1f} MB" if size >= 1e5 else f"{size / 1e3:.0f} kB"
