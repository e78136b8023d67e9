"""Time a table's saved students and the teacher they learned from, in one run (frontier tables).

Each student is a finished table cell's `student/` folder, timed on the test texts of its dataset
with the same threads as the teacher:
  batch32_ex_per_s        end to end: texts in, logits out (tokenisation, vocabulary mapping, padding,
                          the model), 32 texts per call, as distil.serve.student serves the student (the
                          static student: bags of wordpieces, unpadded)
  model_batch32_ex_per_s  the model alone, on inputs encoded before the clock starts
  single_ms               end to end, one text per call (serving one request at a time)
  model_single_ms         the model alone, one example per call
and, against the teacher, the same four as ratios (speedup, model_speedup, single_speedup,
model_single_speedup). As in distil-bench, the models take turns within each pass on the same
texts (order reversed every other pass), and a ratio is the median of its per-pass ratios, kept
with its min-max, so a neighbour's burst moves it little. `disk_mb` is the size of the student's
weights and vocabulary files (its tokenizer is the teacher's). The result goes to
`<cell>/timing.json`, which a table reads as `timing.<field>`.

What gets deployed is timed in the same passes: each distil student's ONNX export and its int8 copy
(distil.serve.export, as `distil export --int8` writes them: model.onnx and model.int8.onnx in the
student folder, exported the first time a timing needs them and kept there), served as
`distil predict --backend onnx` / `onnx-int8` serves them (the student's own tokenisation and
vocabulary, encode_batch(..., one_request=False), then ONNX Runtime on the same threads). Each is a
dict in timing.json, `onnx` (fp32) and `int8`, with
  batch32_ex_per_s, model_batch32_ex_per_s, single_ms, model_single_ms and their four ratios to the
                 teacher (speedup, ...), as the eager student's: end to end against model alone is
                 what tokenisation costs, reported apart
  test           the exported model's scores on the test split, by the task's own scoring as the run
                 scored its student (accuracy, f1, ...): fp32 gives the eager student's, int8 its own
  disk_mb        the graph file and the vocabulary (the same rule as the eager disk_mb)
  seconds        per pass, as the eager `seconds`
read as `timing.onnx.single_ms`, `timing.int8.test.accuracy`, ... A peer (distil.peers: another
tool's model, no graph to export) records `onnx` and `int8` as null: a table shows nothing there.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from distil.bench.harness import interleaved_seconds, pass_ratios, split_passes, spread
from distil.config.overrides import CONFIG_DIR_ENV
from distil.config.schema import reading_length
from distil.data.batching import pad
from distil.errors import DistilError
from distil.serve.onnx_session import EXPORT_RECORD, EXPORT_VERSION, ONNX_FILES, OnnxLogits, export_version
from distil.serve.speed import torch_threads
from distil.serve.student import SavedStudent
from distil.tables.cells import TIMING_FILE
from distil.tasks import Task, make_task
from distil.tasks.text import PAIR_SEPARATOR

# What was timed: bumped whenever serving changes (distil.serve.student, the students' serving paths), so
# a table re-times its students instead of showing numbers of code that no longer runs.
# 2: the static student serves bags of wordpieces (StaticStudent.forward_bags), unpadded.
# 3: ...and one request as one gather and mean, its layers as functions of their parameters.
# 4: a folded word-level student serves one request from its rows by word, in Python (predict.WordRows).
# 5: ...and a static text student answers one request in numpy (students/static.OneRequest).
# 6: each student's ONNX export and int8 copy timed and scored beside it (timing.onnx, timing.int8).
# 7: a Transformer pair student served with its second segment (served and exported students had read every
#    position as segment 0), and a bag student's ONNX mean without index_add (onnx_session.EXPORT_VERSION 2).
SERVING_VERSION = 7
BATCH = 32
SINGLES = 64  # texts timed one at a time
PASSES = 8
DISK_FILES = ("model.safetensors", "vocab.json")
# timing.json's key for each deployed form -> its serving backend (distil.serve.backends; its file: ONNX_FILES)
DEPLOYED = {"onnx": "onnx", "int8": "onnx-int8"}
# (rate or latency field, its ratio to the teacher): rates are examples/s, latencies ms per example
MEASURES = {"batch32_ex_per_s": "speedup", "model_batch32_ex_per_s": "model_speedup",
            "single_ms": "single_speedup", "model_single_ms": "model_single_speedup"}


@dataclass
class Timed:
    """A model as served: `encode` turns texts into its inputs, `forward` runs it on them."""

    encode: Callable[[list[str]], tuple]
    forward: Callable[..., object]


@dataclass
class TimedStudent:
    """A cell's student as timed: as it trained (eager), and, for a distil student, as it is deployed:
    DEPLOYED key -> (its ONNX file, the file served by ONNX Runtime)."""

    eager: Timed
    saved: SavedStudent | None = None  # None: a peer
    deployed: dict[str, tuple[Path, OnnxLogits]] = dataclasses.field(default_factory=dict)

    def models(self, key: str) -> dict[str, Timed]:
        """Every form to time, by name: `key` for the eager student, `key/onnx` and `key/int8`."""
        def batched(texts: list[str]) -> tuple:
            return self.saved.encode_batch(texts, one_request=False)  # what an exported graph reads

        def forward(session: OnnxLogits) -> Callable[..., object]:
            return lambda *inputs: session(inputs)["logits"]

        return {key: self.eager, **{f"{key}/{form}": Timed(batched, forward(session))
                                    for form, (_, session) in self.deployed.items()}}


def student_timed(directory: Path, threads: int | None = None) -> TimedStudent:
    """A saved student and its deployed forms (exported here the first time: `exported`); a peer
    (distil.peers) featurises inside its model, so its inputs are the texts, and it has no graph."""
    config = json.loads((directory / "config.json").read_text())
    if config["student"]["kind"] == "peer":
        from distil.peers import load_peer

        peer, _ = load_peer(directory)
        return TimedStudent(Timed(lambda texts: (texts,), peer.predict_proba))
    student = SavedStudent(directory, device="cpu")
    deployed = {form: (path, OnnxLogits(path, threads)) for form, path in exported(student, directory).items()}
    return TimedStudent(Timed(student.encode_batch, lambda *inputs: student.logits(inputs)), student, deployed)


def exported(student: SavedStudent, directory: Path) -> dict[str, Path]:
    """The student folder's model.onnx and model.int8.onnx (DEPLOYED key -> file), written as `distil
    export --int8` writes them where they are not there yet: once, and kept with the cell. A graph older
    than the weights (the cell ran again) or of another export version (onnx_session.EXPORT_VERSION) is
    exported again, and an int8 copy is quantised again whenever its fp32 graph is."""
    from distil.serve.export import export_onnx, quantise_int8

    files = {form: directory / ONNX_FILES[backend] for form, backend in DEPLOYED.items()}
    fresh = (not files["onnx"].is_file()
             or files["onnx"].stat().st_mtime_ns < (directory / DISK_FILES[0]).stat().st_mtime_ns
             or any(export_version(files[form]) != EXPORT_VERSION for form in files if files[form].is_file()))
    try:
        if fresh:
            # `distil export`'s record measured the files being replaced: the card must not show it for these
            (directory / EXPORT_RECORD).unlink(missing_ok=True)
            export_onnx(student, files["onnx"])
        if fresh or not files["int8"].is_file():
            quantise_int8(files["onnx"], files["int8"])
    except Exception as error:  # the exporter's and the quantiser's own errors have no common base
        cause = " ".join(str(error).split())[:200]
        raise DistilError(f"{directory}: exporting the student to ONNX failed ({type(error).__name__}: {cause}); "
                          f"`distil export {directory.parent} --int8` shows it whole") from error
    return files


def deployed_scores(student: TimedStudent, task: Task, test, names: list[str]) -> dict[str, dict]:
    """Each deployed form's scores on the test split (`test`: the dataset's test split as it was read),
    by the task's own scoring of the student's logits, as the run scored its student and `distil export`
    checks an export."""
    from distil.serve.export import encoded_batches, run_pass, score, split_texts

    if not student.deployed:
        return {}
    saved = student.saved
    split = task.prepare("test", saved.tokenizer, test, saved.config["max_length"], names)
    batches = encoded_batches(saved, split_texts(split, task.inputs), BATCH)
    return {form: score(task, run_pass(lambda inputs, s=session: s(inputs)["logits"], batches), split, names)
            for form, (_, session) in student.deployed.items()}


def teacher_timed(directory: Path, task: Task, max_length: int) -> Timed:
    from distil.teacher.load import load_finetuned

    model, tokenizer = load_finetuned(directory, task)

    def encode(texts: list[str]) -> tuple:
        return pad(task.encode_texts(tokenizer, texts, max_length, apart=False), tokenizer.pad_token_id)

    @torch.inference_mode()
    def forward(ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, attention_mask=mask).logits

    return Timed(encode, forward)


def time_models(models: dict[str, Timed], texts: Sequence[str], passes: int = PASSES,
                clock: Callable[[], float] = time.perf_counter) -> dict[str, dict]:
    """Every model's four measurements on `texts` (medians over passes), in one interleaved run."""
    batches = [list(texts[i:i + BATCH]) for i in range(0, len(texts), BATCH)]
    singles = [[text] for text in texts[:SINGLES]]
    passes = max(1, min(passes, len(batches), len(singles)))
    encoded = {name: ([m.encode(b) for b in batches], [m.encode(s) for s in singles]) for name, m in models.items()}

    def end_to_end(model: Timed, groups: list[list[str]]) -> Callable:
        return lambda index: model.forward(*model.encode(groups[index]))

    def model_only(name: str, which: int) -> Callable:
        return lambda index: models[name].forward(*encoded[name][which][index])

    seconds = {}
    for field, groups, which in (("batch32_ex_per_s", batches, 0), ("model_batch32_ex_per_s", batches, 0),
                                 ("single_ms", singles, 1), ("model_single_ms", singles, 1)):
        timed = {name: end_to_end(m, groups) if not field.startswith("model") else model_only(name, which)
                 for name, m in models.items()}
        items = split_passes([(i,) for i in range(len(groups))], passes)
        seconds[field] = (interleaved_seconds(timed, items, clock), [sum(len(groups[i]) for (i,) in p) for p in items])
    results = {}
    for name in models:
        row = {}
        for field, (per_model, examples) in seconds.items():
            values = [(n / s if field.endswith("per_s") else 1000 * s / n)
                      for n, s in zip(examples, per_model[name], strict=True)]
            row[field] = statistics.median(values)
        row["per_pass"] = {field: per_model[name] for field, (per_model, _) in seconds.items()}
        results[name] = row
    return results


def with_ratios(results: dict[str, dict], teacher: str) -> dict[str, dict]:
    """Each student's four ratios to the teacher, pass by pass: median, min and max."""
    out = {}
    for name, row in results.items():
        if name == teacher:
            continue
        ratios = {}
        for field, ratio in MEASURES.items():
            summary = spread(pass_ratios(results[teacher]["per_pass"][field], row["per_pass"][field]))
            ratios.update({ratio: summary.median, f"{ratio}_min": summary.min, f"{ratio}_max": summary.max})
        out[name] = {**{f: v for f, v in row.items() if f != "per_pass"}, **ratios}
    return out


def disk_mb(directory: Path, weights: str = DISK_FILES[0]) -> float:
    """A student's weights (`weights`: its safetensors, or an ONNX file of it) and vocabulary; a peer's
    whole directory (what it saved is what it needs)."""
    if not (directory / DISK_FILES[0]).is_file():
        return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 1e6
    return sum((directory / name).stat().st_size for name in (weights, *DISK_FILES[1:])) / 1e6


def write_timings(cells: dict[str, Path], teacher: Callable[[], Timed], task: Task, test, names: list[str],
                  threads: int = 2, passes: int = PASSES) -> dict[str, dict]:
    """Time the students of `cells` (key -> cell directory), and each distil student's ONNX and int8
    forms, against their teacher (`teacher` builds it) in one run on `test` (the test split as read;
    `names` its labels), score the deployed forms on it, and write each cell's timing.json (the
    teacher's own numbers inside, under `teacher`)."""
    texts = texts_of(test)
    with torch_threads(threads):
        models = {"teacher": teacher()}
        students = {key: student_timed(directory / "student", threads) for key, directory in cells.items()}
        for key, student in students.items():
            models.update(student.models(key))
        scores = {key: deployed_scores(student, task, test, names) for key, student in students.items()}
        results = time_models(models, texts, passes)
    teacher_row = {f: v for f, v in results["teacher"].items() if f != "per_pass"}
    timings = with_ratios(results, "teacher")
    group, records = sorted(cells), {}
    for key, directory in cells.items():
        folder = directory / "student"
        # a peer has no graph: null, so a table shows nothing there (an older timing lacks the keys: not timed)
        deployed = {form: None for form in DEPLOYED}
        for form, (path, _) in students[key].deployed.items():
            deployed[form] = {**timings[f"{key}/{form}"], "test": scores[key][form],
                              "disk_mb": disk_mb(folder, path.name), "seconds": results[f"{key}/{form}"]["per_pass"]}
        records[key] = record = {**timings[key], "disk_mb": disk_mb(folder), "teacher": teacher_row,
                  "texts": len(texts), "passes": passes, "threads": threads, "group": group,
                  "serving_version": SERVING_VERSION,
                  # per pass, so any two students of the group compare pass by pass (distil.tables.frontier_targets)
                  "seconds": results[key]["per_pass"], **deployed}
        path = directory / TIMING_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(record, indent=1))
        os.replace(tmp, path)  # whole or absent
    return records


def timing_is_current(cells: dict[str, Path]) -> bool:
    """Every cell has a timing.json from one run that timed exactly these cells together, as they
    are served today (SERVING_VERSION; records before it had none: version 1)."""
    group = sorted(cells)
    for directory in cells.values():
        path = directory / TIMING_FILE
        if not path.is_file():
            return False
        record = json.loads(path.read_text())
        if record.get("group") != group or record.get("serving_version", 1) != SERVING_VERSION:
            return False
    return True


def texts_of(dataset) -> list[str]:
    """An evaluation split as a user would send it: the text, 'first ||| second' for a pair, the words
    of a tagged sentence joined by spaces."""
    if "tokens" in dataset.column_names:
        return [" ".join(tokens) for tokens in dataset["tokens"]]
    if "text_pair" in dataset.column_names:
        return [f"{a} {PAIR_SEPARATOR} {b}" for a, b in zip(dataset["text"], dataset["text_pair"], strict=True)]
    return list(dataset["text"])


def time_cells(cells: dict[str, Path], overrides: list[str], root: Path) -> dict[str, dict]:
    """Time the students of these cells (one teacher, one dataset; `overrides` make one of them) on the
    dataset's test texts against the teacher, which lives in the cells' artifact cache under `root`."""
    from distil.run.data import task_data
    from distil.tables.cells import compose_cell

    cfg = compose_cell(overrides, os.environ.get(CONFIG_DIR_ENV), "timing")
    cfg.paths.outputs = str(root)
    task = make_task(cfg.dataset)
    data = task_data(cfg)
    teacher_key = json.loads((next(iter(cells.values())) / "metrics.json").read_text())["artifacts"]["teacher"]
    teacher_dir = Path(cfg.paths.cache) / "teachers" / teacher_key
    if not teacher_dir.is_dir():
        raise DistilError(f"the teacher {teacher_dir} the students learned from is not in the cache; rerun one of "
                          f"their cells (it is reused) or restore the cache")
    return write_timings(cells, lambda: teacher_timed(teacher_dir, task, reading_length(cfg)), task,
                         data.splits["test"], data.label_names, cfg.trainer.threads)
