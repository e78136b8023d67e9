"""`distil export RUN_DIR [--int8]`: a run's student as ONNX, checked against PyTorch on the run's test split.

Writes model.onnx (and with --int8 model.int8.onnx, ONNX Runtime's int8 quantisation) into the run's
student folder, student/ or every student-<lang>/ of a D0 run, beside model.safetensors. Each file is
then served by ONNX Runtime on the run's whole test split, read as the run read it, and compared
with the saved student in PyTorch: the largest logit difference, how many predictions agree, the
test score in the task's own metric, and examples per second. What it measured goes to the student
folder's export.json, which the model card (rendered again last) lists for each served form.
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
from distil.serve.routing import run_students

EXAMPLES = """\
examples:
  distil export outputs/runs/<date>/<time>            # -> student/model.onnx
  distil export outputs/runs/<date>/<time> --int8     # and student/model.int8.onnx
  distil export outputs/runs/<date>/<time>/student    # the student folder of a run names its run too
"""
INT8_TOLERANCE = 0.5  # points of the test score int8 may lose before the command warns
# points the saved student, served, may be from the test score its run recorded before the command warns:
# the same weights on the same split, so only float rounding on a near tie, unless serving reads its
# inputs otherwise than training did (a bug to report)
RECORDED_TOLERANCE = 0.5
TIMED_SECONDS = 1.0  # a model's speed: its fastest pass over the test split, passes repeated for this long (at most 5)


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil export", __doc__.splitlines()[0], EXAMPLES)
    parser.add_argument("run_dir", type=Path, help="a run directory written by `distil` (or its student/ folder)")
    parser.add_argument("--int8", action="store_true",
                        help="also write model.int8.onnx (int8 weights) and score it on the test split")
    return parser


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
        run_dir, folders = run_students(args.run_dir)
        # torch, transformers and the data: only once the input is checked
        from distil.run.data import RecordedRun
        from distil.serve.card import write_cards

        run = RecordedRun.read(run_dir)
        print(f"reading the test split of {run.cfg.dataset.name}, as the run did", flush=True)
        for language, folder in folders.items():
            export_student(run_dir, folder, language, run, args.int8)
        try:  # the cards list the files just written, with their sizes
            cards = write_cards(run_dir)
        except DistilError as error:  # a run that did not finish has no card to render
            print(f"the model card was not rendered again: {error}", flush=True)
        else:
            print(f"rendered the model card{'s' if len(cards) > 1 else ''} again, with the files' sizes: "
                  f"{', '.join(map(str, cards))}", flush=True)
    return 0


def export_student(run_dir: Path, folder: Path, language: str | None, run, int8: bool) -> None:
    """`folder`'s student exported and checked on the test split of `run` (a distil.run.data.RecordedRun)."""
    from distil.serve.export import (
        agreement,
        encoded_batches,
        export_onnx,
        measured,
        onnx_forward,
        quantise_int8,
        run_pass,
        score,
        torch_forward,
        write_export_record,
    )
    from distil.serve.onnx_session import EXPORT_RECORD, ONNX_FILES
    from distil.serve.student import SavedStudent

    student = SavedStudent(folder, device="cpu")
    task, names = run.task, run.data.label_names
    split, texts = run.test_split(student, language, name=folder.name)
    print(f"{folder}: exporting the {student.cfg.name} student", flush=True)
    (folder / EXPORT_RECORD).unlink(missing_ok=True)  # it measured the files about to be replaced
    started = time.perf_counter()
    fp32 = folder / ONNX_FILES["onnx"]
    export_onnx(student, fp32)
    print(f"  wrote {fp32} ({megabytes(fp32)}) in {time.perf_counter() - started:.1f} s", flush=True)

    print(f"  serving the {len(texts)} test examples with PyTorch and with ONNX Runtime", flush=True)
    batches = encoded_batches(student, texts)
    reference = run_pass(torch_forward(student), batches, TIMED_SECONDS)
    exported = run_pass(onnx_forward(fp32), batches, TIMED_SECONDS)
    metric = task.metric
    fp32_scores, torch_scores = score(task, exported, split, names), score(task, reference, split, names)
    fp32_score, torch_score = fp32_scores[metric], torch_scores[metric]
    forms = {"eager": measured(reference, len(texts), torch_scores),
             "onnx": measured(exported, len(texts), fp32_scores, reference)}
    print(f"  ONNX Runtime against PyTorch: {compared(agreement(reference, exported))}")
    recorded = recorded_score(run_dir, metric, language)
    print(f"  test {metric}: ONNX {points(fp32_score)}, PyTorch {points(torch_score)}"
          + (f" (the run recorded {points(recorded)})" if recorded is not None else "")
          + f"; {rate(exported, texts)} examples/s (PyTorch {rate(reference, texts)}, batches of 32)", flush=True)
    if recorded is not None and 100 * abs(torch_score - recorded) > RECORDED_TOLERANCE:
        print(f"warning: {folder.name}, served, scores {points(torch_score)} test {metric} where its run recorded "
              f"{points(recorded)}: serving reads the inputs otherwise than training did; please report it with "
              f"this run's .hydra/config.yaml", file=sys.stderr, flush=True)
    if not int8:
        write_export_record(folder, forms, metric, len(texts))
        return
    started = time.perf_counter()
    path = folder / ONNX_FILES["onnx-int8"]
    quantise_int8(fp32, path)
    print(f"  wrote {path} ({megabytes(path)}, {path.stat().st_size / fp32.stat().st_size:.2f}x the fp32 file) in "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    quantised = run_pass(onnx_forward(path), batches, TIMED_SECONDS)
    int8_scores = score(task, quantised, split, names)
    int8_score = int8_scores[metric]
    forms["int8"] = measured(quantised, len(texts), int8_scores, reference)
    write_export_record(folder, forms, metric, len(texts))
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
