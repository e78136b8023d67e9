"""`distil bench deploy`: serving a student with PyTorch, ONNX and int8 ONNX, end to end, on this machine.

One run's student (default: the newest finished run of the default job, `make demo`: a BiLSTM on BBC
News) is exported afresh, into a temporary copy of its folder (the run is left as it is), and served
through the Python API (`Student.load(..., backend=...).predict`: tokenisation and decoding included)
on `--threads` threads, torch's and ONNX Runtime's:

1. Backends: PyTorch (eager), its ONNX export (fp32) and the int8 copy, one text at a time (batch-1
   latency, the first texts of the test split) and in batches of 32 (throughput, the whole test
   split every pass). The backends take turns pass by pass (distil.bench.harness.interleaved_seconds),
   and each speed ratio is taken pass by pass. Each backend's test score on the run's whole test
   split, read as the run read it, and each file's size.
2. Families: every student family's ONNX fp32 export against PyTorch on a whole test split: the run's
   own student, and a smoke-sized student of each family (`debug=smoke` on a toy dataset whose inputs
   it reads), trained here for it.
3. The API's overhead: `Student.predict` on `--texts` texts (the test split repeated) in batches of 64,
   against the bare loop on the same batches (the API's own length-sorted ones): `encode_batch`, the
   model, argmax. That is the API's work minus its wrapping, so the ratio is what the wrapping costs.

Each target is judged on the median of its per-pass ratios (a score or a size has one value).
"""

from __future__ import annotations

import argparse
import json
import math
import numbers
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from distil.bench.harness import Spread, interleaved_seconds, pass_ratios, split_passes, spread
from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown
from distil.common.outputs_dir import outputs_dir
from distil.errors import DistilError

NAME = "bench-deploy"  # the stem of the files it writes
BACKENDS = ("torch", "onnx", "onnx-int8")  # the first is the reference every ratio is taken against
INT8 = "onnx-int8"
FILES = {"torch": "model.safetensors", "onnx": "model.onnx", INT8: "model.int8.onnx"}
THROUGHPUT_BATCH = 32
API_BATCH = 64
OVERHEAD_BACKENDS = ("torch", INT8)  # the API against its bare loop, on the default backend and the fastest
MAX_DIFFERENCE = 1e-4  # the largest logit difference an fp32 export may have from PyTorch
# (defaults, --quick): passes, texts timed one at a time, texts the API serves
SIZES = {"passes": (5, 2), "latency_texts": (256, 8), "texts": (10_000, 256)}
# Overrides that change where or on what a run ran, not what it trained: still the default job.
WHERE = ("paths.", "runtime.", "trainer.threads=")
# A smoke-sized student of each family: (student option, a toy dataset whose inputs it reads; a pair
# read apart where the family reads one, the largest graph it exports).
FAMILY_JOBS = (("bilstm", "toy"), ("rnn", "toy"), ("tang", "toy"), ("transformer-tiny", "toy"), ("static", "toy"),
               ("static-words", "toy"), ("bilstm-tagger", "toy-ner"), ("siamese", "toy-pair"), ("sra", "toy-pair"))


@dataclass(frozen=True)
class Target:
    """One claim of the issue: `check`'s measured value at least, at most, or within ± `bound`."""

    check: str
    bound: float
    kind: str  # "at least", "at most", "within", or "all" (of `bound` items)

    def met(self, value: float) -> bool:
        return {"at least": value >= self.bound, "at most": value <= self.bound,
                "within": abs(value) <= self.bound, "all": value == self.bound}[self.kind]

    @property
    def text(self) -> str:
        return {"at least": f">= {self.bound:g}", "at most": f"<= {self.bound:g}",
                "within": f"within ±{self.bound:g}", "all": f"all {self.bound:g}"}[self.kind]


LATENCY = Target("int8 ONNX against PyTorch: batch-1 latency, end to end (x as fast)", 2.0, "at least")
THROUGHPUT = Target("int8 ONNX against PyTorch: batch-32 throughput, end to end (x)", 1.4, "at least")
SCORE = Target("int8 ONNX against PyTorch: test score (points)", 0.5, "within")
SIZE = Target("int8 ONNX file against the fp32 one (x its size)", 0.30, "at most")
OVERHEAD = 0.9  # the API's throughput over the bare loop's, at least: its overhead at most 10%


def families_target(count: int) -> Target:
    return Target(f"student families whose ONNX fp32 export gives PyTorch's predictions on every test example, "
                  f"logits within {MAX_DIFFERENCE:g}", count, "all")


def overhead_target(backend: str) -> Target:
    return Target(f"API throughput over the bare loop's ({backend}, batches of {API_BATCH})", OVERHEAD, "at least")


def settle_args(args: argparse.Namespace) -> str | None:
    """Fill in what --quick decides; the problem with the values, or None."""
    for key, (full, quick) in SIZES.items():
        if getattr(args, key, None) is None:
            setattr(args, key, quick if args.quick else full)
    if min(args.passes, args.latency_texts, args.texts, args.threads) < 1:
        return "--passes, --latency-texts, --texts and --threads must be positive"
    return None


def default_run(outputs: Path | None = None) -> Path:
    """The newest finished run of the default job (`make demo`, a plain `distil`: no override but where it
    ran) under <outputs>/runs, outputs being $DISTIL_OUTPUTS or ./outputs as for `distil`."""
    root = (outputs or outputs_dir()) / "runs"
    found = []
    for path in root.glob("*/*/metrics.json"):
        try:
            metrics = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if metrics.get("status") == "ok" and all(str(o).startswith(WHERE) for o in metrics.get("overrides") or []):
            found.append(path.parent)
    if not found:
        raise DistilError(f"no finished run of the default job under {root}; run `make demo` first, or pass a run "
                          f"directory")
    return max(found, key=lambda run: run.relative_to(root).as_posix())  # <date>/<time> sorts by start


# --- exporting and checking a student on its test split -----------------------------------------------

@dataclass
class Checked:
    """A student exported and served on its run's whole test split by each backend."""

    name: str  # the student option
    family: str
    dataset: str
    examples: int
    metric: str
    scores: dict[str, float]  # backend -> the task's primary score, 0-1
    agreements: dict  # ONNX backend -> distil.serve.export.Agreement against PyTorch
    sizes: dict[str, int]  # backend -> its file's bytes
    texts: list[str]

    def matches(self, backend: str = "onnx") -> bool:
        result = self.agreements[backend]
        agree = result.agreeing is None or result.agreeing == result.compared  # a regression: its logits alone
        return agree and result.max_difference <= MAX_DIFFERENCE


def export_and_check(run_dir: Path, folder: Path, language: str | None, int8: bool, run=None) -> Checked:
    """`folder`'s student exported (and quantised) into `folder`, each backend's logits on the test split of
    its run (`run`: a distil.run.data.RecordedRun of `run_dir`, read here if not given)."""
    from distil.run.data import RecordedRun
    from distil.serve import export
    from distil.serve.student import SavedStudent

    run = run or RecordedRun.read(run_dir)
    saved = SavedStudent(folder, device="cpu")
    split, texts = run.test_split(saved, language, name=folder.name)
    export.export_onnx(saved, folder / FILES["onnx"])
    if int8:
        export.quantise_int8(folder / FILES["onnx"], folder / FILES[INT8])
    batches = export.encoded_batches(saved, texts)
    reference = export.run_pass(export.torch_forward(saved), batches)
    outputs = {backend: export.run_pass(export.onnx_forward(folder / FILES[backend]), batches)
               for backend in ("onnx", *([INT8] if int8 else []))}
    task, names = run.task, run.data.label_names
    return Checked(saved.cfg.name, saved.config["student"]["kind"], run.cfg.dataset.name, len(texts), task.metric,
                   {backend: export.score(task, out, split, names)[task.metric]
                    for backend, out in {"torch": reference, **outputs}.items()},
                   {backend: export.agreement(reference, out) for backend, out in outputs.items()},
                   {backend: (folder / FILES[backend]).stat().st_size for backend in ("torch", *outputs)}, texts)

def train_families(workdir: Path, jobs: Sequence[tuple[str, str]] = FAMILY_JOBS) -> list[Path]:
    """A smoke run (debug=smoke) of each (student, dataset) job into `workdir`, one `distil -m` sweep per
    dataset (its teacher fine-tuned once): their run directories, in the order of `jobs`."""
    from distil.common.console import console_script

    by_dataset: dict[str, list[str]] = {}
    for student, dataset in jobs:
        by_dataset.setdefault(dataset, []).append(student)
    runs = {}
    for dataset, students in by_dataset.items():
        sweep = workdir / dataset
        done = subprocess.run([console_script("distil"), "-m", "debug=smoke", f"dataset={dataset}",
                               f"student={','.join(students)}", f"paths.outputs={workdir / 'outputs'}",
                               f"hydra.sweep.dir={sweep}"], capture_output=True, text=True)
        if done.returncode != 0:
            raise DistilError(f"the smoke runs of {', '.join(students)} on {dataset} failed (exit {done.returncode}): "
                              f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        for metrics in sweep.glob("*/metrics.json"):
            runs[json.loads(metrics.read_text())["choices"]["student"], dataset] = metrics.parent
    missing = [f"{student} on {dataset}" for student, dataset in jobs if (student, dataset) not in runs]
    if missing:
        raise DistilError(f"the smoke sweeps left no run of {', '.join(missing)}")
    return [runs[job] for job in jobs]


def check_families(workdir: Path, say: Callable[[str], None]) -> list[Checked]:
    from distil.serve.routing import run_students

    checked = []
    for run_dir in train_families(workdir):
        _, folders = run_students(run_dir)
        for language, folder in folders.items():
            checked.append(export_and_check(run_dir, folder, language, int8=False))
            say(f"  {checked[-1].name} on {checked[-1].dataset}: {checked[-1].agreements['onnx'].agreeing} of "
                f"{checked[-1].agreements['onnx'].compared} predictions agree")
    return checked


# --- timing -------------------------------------------------------------------------------------------

@dataclass
class Timed:
    """Seconds per pass of each backend, and how many texts each pass served."""

    seconds: dict[str, list[float]]
    texts: list[int]

    def per_text_ms(self, backend: str) -> Spread:
        return spread([1000 * s / n for s, n in zip(self.seconds[backend], self.texts, strict=True)])

    def rate(self, backend: str) -> Spread:
        return spread([n / s for s, n in zip(self.seconds[backend], self.texts, strict=True)])

    def speedup(self, backend: str, reference: str = BACKENDS[0]) -> Spread:
        """How many times as fast as `reference`, pass by pass."""
        return spread(pass_ratios(self.seconds[reference], self.seconds[backend]))


def time_latency(students: dict, texts: list[str], passes: int) -> Timed:
    """Each text alone through each backend's predict (a batch of one), the backends in turn pass by pass;
    the texts split over the passes."""
    slices = split_passes([(text,) for text in texts], min(passes, len(texts)))
    forwards = {backend: (lambda text, student=student: student.predict([text], batch_size=1))
                for backend, student in students.items()}
    return Timed(interleaved_seconds(forwards, slices), [len(part) for part in slices])


def time_throughput(students: dict, texts: list[str], passes: int) -> Timed:
    """The texts in batches of 32 through each backend's predict, every pass all of them, the backends in turn."""
    chunks = [(texts[start:start + THROUGHPUT_BATCH],) for start in range(0, len(texts), THROUGHPUT_BATCH)]
    forwards = {backend: (lambda chunk, student=student: student.predict(chunk, batch_size=THROUGHPUT_BATCH))
                for backend, student in students.items()}
    return Timed(interleaved_seconds(forwards, [chunks] * passes), [len(texts)] * passes)


def api_batches(texts: list[str], batch_size: int = API_BATCH) -> list[list[str]]:
    """The batches Student.predict forms: the texts shortest first (it pads less), `batch_size` at a time."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # distil.serve.api.Student._outputs's order
    return [[texts[i] for i in order[start:start + batch_size]] for start in range(0, len(order), batch_size)]


def bare_loop(saved, onnx: Path | None, threads: int) -> Callable[[list[str], list[list[str]]], None]:
    """What the API does for a label minus its wrapping: each batch encoded, run by the model (`saved`'s
    torch model, or the ONNX file `onnx`), argmax."""
    if onnx is None:
        def run(texts: list[str], batches: list[list[str]]) -> None:
            for batch in batches:
                saved.logits(saved.encode_batch(batch)).argmax(-1)
        return run
    from distil.serve.onnx_session import OnnxLogits

    session = OnnxLogits(onnx, threads=threads)

    def run_onnx(texts: list[str], batches: list[list[str]]) -> None:
        for batch in batches:
            session(saved.encode_batch(batch, one_request=False))["logits"].argmax(-1)
    return run_onnx


def time_overhead(student, onnx: Path | None, texts: list[str], passes: int, threads: int) -> Timed:
    """`student.predict` against the bare loop on the same batches, in turn pass by pass; the texts split
    over the passes (each pass one predict call, and the bare loop on the batches that call forms)."""
    slices = split_passes(texts, min(passes, len(texts)))
    items = [[(part, api_batches(part))] for part in slices]  # batched before any clock starts
    forwards = {"api": lambda part, batches: student.predict(part, batch_size=API_BATCH),
                "bare": bare_loop(student.saved, onnx, threads)}
    return Timed(interleaved_seconds(forwards, items), [len(part) for part in slices])


# --- the whole bench ----------------------------------------------------------------------------------

@dataclass
class Measured:
    run_dir: Path
    checked: Checked  # the run's own student, every backend
    latency: Timed
    throughput: Timed
    overhead: dict[str, Timed]  # backend -> the API against its bare loop
    families: list[Checked]  # the run's own student first, then the smoke students (none with --quick)
    latency_texts: int
    api_texts: int
    load: tuple[float, float]  # the 1-minute load average when the timing began and when it ended


def measure(args: argparse.Namespace, say: Callable[[str], None] = print) -> Measured:
    """The whole bench on args.run_dir (default: default_run()), each step said as it starts."""
    from distil.run.data import RecordedRun
    from distil.serve.api import Student
    from distil.serve.routing import run_students
    from distil.serve.speed import torch_threads

    run_dir, folders = run_students(args.run_dir or default_run())
    if len(folders) != 1:
        raise DistilError(f"{run_dir} has a student per language ({', '.join(map(str, folders))}); pass one of its "
                          f"student-<lang>/ folders")
    [(language, folder)] = folders.items()
    run = RecordedRun.read(run_dir)
    with tempfile.TemporaryDirectory(prefix="distil-deploy-") as tmp:
        copy = Path(tmp) / "student"
        shutil.copytree(folder, copy, ignore=shutil.ignore_patterns("*.onnx", "README.md"))  # exported afresh
        say(f"{folder}: exporting the student afresh (ONNX and int8) into a copy, and scoring every backend on the "
            f"test split of {run.cfg.dataset.name}")
        checked = export_and_check(run_dir, copy, language, int8=True, run=run)
        texts = checked.texts
        started_load = os.getloadavg()[0]
        if started_load > (os.cpu_count() or 1) / 2:
            print(f"warning: the load average is {started_load:.2f} on {os.cpu_count()} cores: other work will slow "
                  f"the timings, torch's threads most; measure on a quiet machine", file=sys.stderr, flush=True)
        with torch_threads(args.threads):
            students = {backend: Student.load(copy, backend=backend, device="cpu", threads=args.threads)
                        for backend in BACKENDS}
            latency_texts = texts[:args.latency_texts]
            say(f"timing {len(latency_texts)} texts one at a time, {args.passes} passes, backends in turn")
            latency = time_latency(students, latency_texts, args.passes)
            say(f"timing the {len(texts)} test texts in batches of {THROUGHPUT_BATCH}, {args.passes} passes")
            throughput = time_throughput(students, texts, args.passes)
            api_texts = (texts * math.ceil(args.texts / len(texts)))[:args.texts]
            overhead = {}
            for backend in OVERHEAD_BACKENDS:
                say(f"timing the API ({backend}) on {len(api_texts):,} texts against the bare loop, in turn")
                overhead[backend] = time_overhead(students[backend], None if backend == "torch" else copy /
                                                  FILES[backend], api_texts, args.passes, args.threads)
    load = (started_load, os.getloadavg()[0])
    families = [checked]
    if not args.quick:
        with tempfile.TemporaryDirectory(prefix="distil-deploy-families-") as tmp:
            say(f"training a smoke student of each family ({len(FAMILY_JOBS)}), then exporting and checking each")
            families += check_families(Path(tmp), say)
    return Measured(run_dir, checked, latency, throughput, overhead, families, len(latency_texts), len(api_texts),
                    load)


# --- the tables ---------------------------------------------------------------------------------------

BACKEND_COLUMNS = ("backend", "file", "MB", "x fp32 file", "test score", "points vs torch", "agree with torch %",
                   "largest logit difference")
SPEED_COLUMNS = ("backend", "measure", "value", "min", "max", "x torch", "x min", "x max", "passes")
OVERHEAD_COLUMNS = ("backend", "texts", "batch", "API texts/s", "bare texts/s", "API / bare", "min", "max", "passes")
FAMILY_COLUMNS = ("family", "student", "dataset", "test examples", "compared", "agreeing", "largest logit difference",
                  "met")
TARGET_COLUMNS = ("check", "target", "measured", "min", "max", "passes", "met")


def backends_table(checked: Checked) -> pd.DataFrame:
    rows = []
    for backend in checked.sizes:
        result = checked.agreements.get(backend)
        share = None if result is None or result.share is None else 100 * result.share
        rows.append({"backend": backend, "file": FILES[backend], "MB": checked.sizes[backend] / 1e6,
                     "x fp32 file": checked.sizes[backend] / checked.sizes["onnx"] if backend != "torch" else None,
                     "test score": 100 * checked.scores[backend],
                     "points vs torch": 100 * (checked.scores[backend] - checked.scores["torch"]),
                     "agree with torch %": share,
                     "largest logit difference": None if result is None else result.max_difference})
    return pd.DataFrame(rows, columns=list(BACKEND_COLUMNS))


def speed_table(latency: Timed, throughput: Timed) -> pd.DataFrame:
    rows = []
    for measure_, timed, value in (("batch-1 latency, ms", latency, latency.per_text_ms),
                                   (f"batch-{THROUGHPUT_BATCH} texts/s", throughput, throughput.rate)):
        for backend in BACKENDS:
            own, ratio = value(backend), timed.speedup(backend)
            rows.append({"backend": backend, "measure": measure_, "value": own.median, "min": own.min, "max": own.max,
                         "x torch": ratio.median, "x min": ratio.min, "x max": ratio.max, "passes": ratio.passes})
    return pd.DataFrame(rows, columns=list(SPEED_COLUMNS)).astype({"passes": "Int64"})


def overhead_table(overhead: dict[str, Timed]) -> pd.DataFrame:
    rows = []
    for backend, timed in overhead.items():
        ratio = timed.speedup("api", reference="bare")
        rows.append({"backend": backend, "texts": sum(timed.texts), "batch": API_BATCH,
                     "API texts/s": timed.rate("api").median, "bare texts/s": timed.rate("bare").median,
                     "API / bare": ratio.median, "min": ratio.min, "max": ratio.max, "passes": ratio.passes})
    return pd.DataFrame(rows, columns=list(OVERHEAD_COLUMNS)).astype({"passes": "Int64", "texts": "Int64"})


def families_table(families: list[Checked]) -> pd.DataFrame:
    rows = [{"family": checked.family, "student": checked.name, "dataset": checked.dataset,
             "test examples": checked.examples, "compared": f"{result.compared} {result.unit}",
             "agreeing": "-" if result.agreeing is None else f"{100 * result.share:.2f}%",
             "largest logit difference": result.max_difference,
             "met": "met" if checked.matches() else "not met"}
            for checked in families for result in [checked.agreements["onnx"]]]
    return pd.DataFrame(rows, columns=list(FAMILY_COLUMNS))


def targets_table(measured: Measured) -> pd.DataFrame:
    checked, rows = measured.checked, []

    def judge(target: Target, value: Spread | float) -> None:
        spread_cells = ({"min": value.min, "max": value.max, "passes": value.passes}
                        if isinstance(value, Spread) else {})
        median = value.median if isinstance(value, Spread) else value
        rows.append({"check": target.check, "target": target.text, "measured": median, **spread_cells,
                     "met": "met" if target.met(median) else "not met"})

    judge(LATENCY, measured.latency.speedup(INT8))
    judge(THROUGHPUT, measured.throughput.speedup(INT8))
    judge(SCORE, 100 * (checked.scores[INT8] - checked.scores["torch"]))
    judge(SIZE, checked.sizes[INT8] / checked.sizes["onnx"])
    judge(families_target(len(measured.families)), sum(family.matches() for family in measured.families))
    for backend, timed in measured.overhead.items():
        judge(overhead_target(backend), timed.speedup("api", reference="bare"))
    return pd.DataFrame(rows, columns=list(TARGET_COLUMNS), dtype=object)  # a count stays a count


def header(measured: Measured, args: argparse.Namespace, provenance: dict) -> str:
    checked = measured.checked
    mode = ("quick (small sizes, and the run's own student alone in the families check): checks that it runs, "
            "not a measurement; " if args.quick else "")
    return (f"`{provenance['command']}` on {provenance['machine']}, {provenance['date']}, code {provenance['code']}: "
            f"{mode}run `{measured.run_dir}` ({checked.name} on {checked.dataset}, {checked.examples} test texts, "
            f"test score in {checked.metric}), {args.threads} threads (torch and ONNX Runtime), {args.passes} "
            f"interleaved passes; batch-1 latency over {measured.latency_texts} texts, throughput over the whole "
            f"test split each pass, the API's overhead over {measured.api_texts:,} texts. Load average (1 minute) "
            f"{measured.load[0]:.2f} when the timing began, {measured.load[1]:.2f} when it ended, on {os.cpu_count()} "
            f"cores: a busy machine slows torch's threads most.")


NOTES = (
    "End to end: each backend serves through `Student.load(copy, backend=...).predict`, tokenisation, batching "
    "and decoding included, the ONNX files exported afresh into a temporary copy of the run's student folder.",
    "Timed ratios are medians of per-pass ratios (the backends, or the API and its bare loop, run the same texts "
    "in turn within a pass, the order reversed every other pass), with the lowest and highest per-pass ratio and "
    "the number of passes; the targets are judged on the median.",
    "The bare loop: the same batches the API forms (shortest texts first), each `encode_batch`, the model and an "
    "argmax; the API adds its checks, ordering, decode contexts and labels.",
    f"Families: each family's ONNX fp32 export served by ONNX Runtime against its PyTorch model on its run's "
    f"whole test split, in batches of {THROUGHPUT_BATCH}; a smoke-sized student (`debug=smoke`, a toy dataset) for "
    f"each family but the run's own.",
)


FORMATS = {"largest logit difference": "{:.1e}", "API texts/s": "{:,.0f}", "bare texts/s": "{:,.0f}",
           "MB": "{:.3f}"}


def shown(frame: pd.DataFrame) -> str:
    """The table in markdown, each number formatted by its column (FORMATS; a count with thousands
    separators, anything else with 2 decimals), a missing one as '-', numbers aligned right."""
    def missing(value) -> bool:
        return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))

    def cell(column: str, value) -> str:
        if missing(value):
            return "-"
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return str(value)
        if column in FORMATS:
            return FORMATS[column].format(value)
        return f"{value:,}" if isinstance(value, numbers.Integral) else f"{value:.2f}"

    columns = {column: list(frame[column].astype(object)) for column in frame.columns}
    numeric = [all(missing(v) or (isinstance(v, numbers.Real) and not isinstance(v, bool)) for v in values)
               for values in columns.values()]
    text = pd.DataFrame({column: [cell(column, value) for value in values] for column, values in columns.items()})
    return to_markdown(text, index=False, disable_numparse=True,
                       colalign=["right" if is_number else "left" for is_number in numeric])


def write(measured: Measured, args: argparse.Namespace, provenance: dict) -> tuple[Path, pd.DataFrame]:
    """bench-deploy.md (the tables, the targets first) and bench-deploy.csv (every table's rows, a `table`
    column naming which, with the command, machine, code and date); the targets table."""
    tables = {"targets": targets_table(measured), "backends": backends_table(measured.checked),
              "speed": speed_table(measured.latency, measured.throughput),
              "api overhead": overhead_table(measured.overhead), "families": families_table(measured.families)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    recorded = {key: provenance[key] for key in ("command", "machine", "code", "date")}
    csv = pd.concat([frame.assign(**recorded).astype(object).assign(table=name) for name, frame in tables.items()],
                    ignore_index=True)
    write_atomic(out / f"{NAME}.csv", csv[["table", *(c for c in csv.columns if c != "table")]].to_csv(index=False))
    titles = {"targets": "Targets", "backends": "Each backend on the test split",
              "speed": "Speed, end to end", "api overhead": "The Python API against the bare model loop",
              "families": "Every family's ONNX export against PyTorch"}
    parts = ["### Serving a student: PyTorch, ONNX and int8 ONNX (`distil bench deploy`)", header(measured, args,
                                                                                                   provenance)]
    for name, frame in tables.items():
        parts += [f"#### {titles[name]}", shown(frame)]
    parts.append("\n".join(f"- {note}" for note in NOTES))
    write_atomic(out / f"{NAME}.md", "\n\n".join(parts) + "\n")
    return out / f"{NAME}.md", tables["targets"]
