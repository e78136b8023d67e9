"""`distil bench students`: check the papers' size and speed claims as ratios measured in one run.

What is measured, per model (teachers and students alike):
  * params: every parameter, embedding rows included (so the vocabulary size matters and is a column);
  * batch32_ex_per_s: inference throughput at batch size 32;
  * online_ms: mean latency of one example at a time (the serving case, where batching does not help).

Why it is done this way:
  * Teachers are BERT-shaped models with random weights built from config classes: speed and size do not
    depend on the weights, and nothing has to be downloaded.
  * Every model reads the same random token ids, padded once with `distil.data.batching.pad` before any
    clock starts, so only model time is timed (no tokenisation, no collation).
  * Absolute numbers depend on the machine and on whoever else is using it; the claims are ratios
    (teacher params / student params, student throughput / teacher throughput), so they are computed
    from measurements taken in the same run, on the same inputs, with the same thread count.
  * A busy machine slows whatever runs while it is busy. So models are not timed one after the other:
    the inputs are cut into passes, and in pass k a teacher runs on pass k's inputs and then its students
    on the same inputs (the order reversed every other pass). Each pass gives one ratio; the table
    reports the median of the per-pass ratios with their min-max and the number of passes, so a pass
    that a neighbour disturbed moves the median little (the mean would follow it). Rates are medians too.
  * The runner's own overhead (packing, masked max-pooling, classifier) is checked against a bare
    `nn.Embedding` + bidirectional `nn.LSTM` of the same sizes, interleaved the same way on the same batches.

A student is compared with the teachers that share its vocabulary: they read the same wordpieces.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pandas as pd
import torch
import transformers
from rich.console import Console
from torch import nn
from transformers import BertConfig, BertForSequenceClassification

from distil.bench.harness import (
    Batch,
    Forward,
    Spread,
    count_params,
    interleaved_seconds,
    markdown,
    pass_ratios,
    rich_table,
    split_passes,
    spread,
)
from distil.common.atomic import write_atomic
from distil.common.progress import progress_bar
from distil.data.batching import pad
from distil.serve.speed import torch_threads
from distil.students.bilstm import BiLSTMClassifier
from distil.students.tang import TangStudent

BERT_VOCAB = 30522
MBERT_VOCAB = 119547
NUM_LABELS = 2
PAD_ID = 0
TOKEN_IDS = (2, 30000)  # random ids in [2, 30000): valid for every vocabulary here, never the pad id
BATCH_SIZE = 32
ONLINE_EXAMPLES = 64
PASSES = 8
SEED = 0
BARE = "bare Embedding+BiLSTM"


TIMED_RATIOS = ("speedup", "online_speedup")  # per-pass ratios: median in the column, spread beside it
COLUMNS = ["model", "kind", "params", "vocab", "batch32_ex_per_s", "online_ms",
           "vs_teacher", "compression", "speedup", "online_speedup",
           # added after the columns above (readers find columns by name): each timed ratio's spread
           *(f"{ratio}_{end}" for ratio in TIMED_RATIOS for end in ("min", "max")), "passes"]


@dataclass(frozen=True)
class TeacherSpec:
    """A BERT-shaped teacher with random weights (BertForSequenceClassification, 2 labels)."""

    kind: ClassVar[str] = "teacher"
    name: str
    layers: int
    hidden: int
    heads: int
    intermediate: int
    vocab: int

    def build(self, quick: bool) -> nn.Module:
        # Quick mode keeps the name and vocabulary (rows and comparisons line up) but shrinks the encoder.
        layers, hidden, heads, intermediate = (2, 32, 2, 64) if quick else (
            self.layers, self.hidden, self.heads, self.intermediate)
        config = BertConfig(vocab_size=self.vocab, hidden_size=hidden, num_hidden_layers=layers,
                            num_attention_heads=heads, intermediate_size=intermediate, num_labels=NUM_LABELS)
        return BertForSequenceClassification(config)

    @staticmethod
    def forward(model: nn.Module) -> Forward:
        return lambda ids, mask: model(input_ids=ids, attention_mask=mask).logits


@dataclass(frozen=True)
class StudentSpec:
    """The runner's BiLSTM student (one bidirectional layer); hidden_size is per direction."""

    kind: ClassVar[str] = "student"
    name: str
    embedding_dim: int
    hidden_size: int
    vocab: int

    def build(self, quick: bool) -> nn.Module:
        # Students are cheap at full size, so quick mode keeps them real (their params stay checkable).
        return BiLSTMClassifier(self.vocab, self.embedding_dim, self.hidden_size, NUM_LABELS, dropout=0.0,
                                pad_id=PAD_ID)

    @staticmethod
    def forward(model: nn.Module) -> Forward:
        return lambda ids, mask: model(ids, mask)["logits"]


@dataclass(frozen=True)
class TangSpec(StudentSpec):
    """Tang et al.'s student (Fig. 1): last forward/backward states -> ReLU layer -> linear, no max-pool."""

    relu_size: int = 200

    def build(self, quick: bool) -> nn.Module:
        return TangStudent(self.vocab, self.embedding_dim, self.hidden_size, NUM_LABELS, dropout=0.0,
                           relu_size=self.relu_size, pad_id=PAD_ID)


Spec = TeacherSpec | StudentSpec

TEACHERS: tuple[TeacherSpec, ...] = (
    TeacherSpec("bert-base", layers=12, hidden=768, heads=12, intermediate=3072, vocab=BERT_VOCAB),
    TeacherSpec("bert-large", layers=24, hidden=1024, heads=16, intermediate=4096, vocab=BERT_VOCAB),
    TeacherSpec("mbert", layers=12, hidden=768, heads=12, intermediate=3072, vocab=MBERT_VOCAB),
)

STUDENTS: tuple[StudentSpec, ...] = (
    StudentSpec("BiLSTM E300 H2x300", embedding_dim=300, hidden_size=300, vocab=BERT_VOCAB),  # Mukherjee 2019
    StudentSpec("BiLSTM E300 H2x600", embedding_dim=300, hidden_size=600, vocab=BERT_VOCAB),
    # XtremeDistil's smallest student reads mBERT's wordpieces; counted with the full vocabulary, as the paper does.
    StudentSpec("BiLSTM E50 H2x100", embedding_dim=50, hidden_size=100, vocab=MBERT_VOCAB),
    # Tang Table 2's SST-2 student (student=tang), reading the teacher's wordpieces like the others.
    TangSpec("Tang BiLSTM E300 H2x150 ReLU200", embedding_dim=300, hidden_size=150, vocab=BERT_VOCAB, relu_size=200),
)

# The student whose overhead over a bare Embedding+LSTM is checked.
OVERHEAD_STUDENT = STUDENTS[0]


@dataclass(frozen=True)
class Target:
    """One claim: `column` of the (student, teacher) comparison must be >= minimum."""

    check: str
    student: str
    teacher: str  # a teacher name, or BARE for the runner-overhead check
    column: str
    minimum: float
    source: str


TARGETS: tuple[Target, ...] = (
    Target("BiLSTM E300 H2x300 batch-32 throughput vs bert-base (x)", "BiLSTM E300 H2x300", "bert-base",
           "speedup", 15, "Mukherjee & Awadallah 2019"),
    Target("BiLSTM E50 H2x100 params, x fewer than mbert", "BiLSTM E50 H2x100", "mbert",
           "compression", 35, "XtremeDistil 2020"),
    Target("BiLSTM E50 H2x100 batch-32 throughput vs mbert (x)", "BiLSTM E50 H2x100", "mbert",
           "speedup", 100, "XtremeDistil 2020"),
    Target("BiLSTM E50 H2x100 online latency vs mbert (x)", "BiLSTM E50 H2x100", "mbert",
           "online_speedup", 16, "XtremeDistil 2020"),
    Target("Tang BiLSTM E300 H2x150 ReLU200 batch-32 throughput vs bert-large (x)",
           "Tang BiLSTM E300 H2x150 ReLU200", "bert-large", "speedup", 300, "Tang et al. 2019"),
    Target("runner overhead: BiLSTM E300 H2x300 throughput / bare Embedding+BiLSTM", OVERHEAD_STUDENT.name, BARE,
           "fraction_of_bare", 0.90, "this runner"),
)

NOTES = (
    "Params count every parameter, embedding rows included. BiLSTM E50 H2x100 (XtremeDistil) is counted with "
    f"mBERT's full {MBERT_VOCAB}-wordpiece vocabulary, as the paper does; the runner trims the vocabulary by "
    "default, which makes a trained student smaller still.",
    "A student is compared with the teachers that share its vocabulary (they read the same wordpieces).",
    "Tang's Table 2 counts 0.96M parameters without embeddings (its LSTM reads 2 x 300 multichannel word2vec "
    "inputs); the Tang row here reads one 300-d channel over BERT's wordpieces and counts its embedding rows.",
    "Timed ratios are medians of per-pass ratios: in each pass a teacher and then the students compared with it "
    "(the order reversed every other pass) run the same inputs; *_min and *_max are the lowest and highest "
    "per-pass ratio, passes their number. Targets are judged on the median. Rates are medians over passes.",
    f"Runner overhead: median of per-pass ratios of {OVERHEAD_STUDENT.name} to a bare nn.Embedding + "
    "bidirectional nn.LSTM of the same sizes, interleaved the same way, every pass on all the batch-32 inputs.",
)


@dataclass
class Inputs:
    """One set of inputs for every model, padded before any clock starts."""

    batches: list[Batch]  # batch-32 slices
    singles: list[Batch]  # the first min(64, examples) examples, one at a time


def make_inputs(examples: int, seq_len: int, seed: int = SEED) -> Inputs:
    generator = torch.Generator().manual_seed(seed)
    id_lists = torch.randint(*TOKEN_IDS, (examples, seq_len), generator=generator).tolist()
    batches = [pad(id_lists[i: i + BATCH_SIZE], PAD_ID) for i in range(0, examples, BATCH_SIZE)]
    singles = [pad([ids], PAD_ID) for ids in id_lists[:min(ONLINE_EXAMPLES, examples)]]
    return Inputs(batches, singles)


@dataclass
class Passes:
    """The inputs cut into passes: pass k of every model in a group reads batches[k] (and singles[k])."""

    batches: list[list[Batch]]
    singles: list[list[Batch]]

    @property
    def batch_examples(self) -> list[int]:
        return [sum(len(ids) for ids, _ in inputs) for inputs in self.batches]

    @property
    def single_examples(self) -> list[int]:
        return [len(inputs) for inputs in self.singles]


def make_passes(inputs: Inputs, passes: int) -> Passes:
    # The inputs are split rather than repeated: every model sees each input once, so the run is no longer
    # than timing each model on all of them, and the ratios still come pass by pass.
    return Passes(split_passes(inputs.batches, passes), split_passes(inputs.singles, passes))


@dataclass
class Timing:
    """One model's size and its seconds per pass, batched and one example at a time, within one group."""

    spec: Spec
    params: int
    batch_seconds: list[float]
    online_seconds: list[float]


def groups(teachers: Sequence[TeacherSpec], students: Sequence[StudentSpec]) -> list[list[Spec]]:
    """Each teacher with the students that share its vocabulary (they read the same wordpieces, so they are
    compared); a student sharing no teacher's vocabulary is still measured, alone."""
    result: list[list[Spec]] = [[t, *(s for s in students if s.vocab == t.vocab)] for t in teachers]
    result += [[s] for s in students if all(s.vocab != t.vocab for t in teachers)]
    return result


def measure_group(specs: Sequence[Spec], passes: Passes, quick: bool,
                  clock: Callable[[], float] = time.perf_counter) -> dict[str, Timing]:
    models = {}
    for spec in specs:
        torch.manual_seed(SEED)  # weights do not change the timings, but the run should be reproducible
        models[spec.name] = spec.build(quick).eval()
    forwards = {spec.name: spec.forward(models[spec.name]) for spec in specs}
    batch = interleaved_seconds(forwards, passes.batches, clock)
    online = interleaved_seconds(forwards, passes.singles, clock)
    return {spec.name: Timing(spec, count_params(models[spec.name]), batch[spec.name], online[spec.name])
            for spec in specs}


Ratios = dict[tuple[str, str], dict[str, Spread]]  # (student, teacher) -> {"speedup": ..., "online_speedup": ...}


def group_ratios(timings: dict[str, Timing]) -> Ratios:
    """Per-pass ratios of each student to the group's teacher, summarised."""
    teachers = [t for t in timings.values() if t.spec.kind == "teacher"]
    return {(s.spec.name, t.spec.name): {"speedup": spread(pass_ratios(t.batch_seconds, s.batch_seconds)),
                                         "online_speedup": spread(pass_ratios(t.online_seconds, s.online_seconds))}
            for t in teachers for s in timings.values() if s.spec.kind == "student"}


def model_rows(measured: Sequence[dict[str, Timing]], passes: Passes) -> list[dict]:
    """One row per model: median rate over every pass of every group it was timed in."""
    timings: dict[str, list[Timing]] = {}
    for group in measured:
        for name, timing in group.items():
            timings.setdefault(name, []).append(timing)
    rows = []
    for name, runs in timings.items():
        rates = [n / s for run in runs for n, s in zip(passes.batch_examples, run.batch_seconds, strict=True)]
        latencies = [1000 * s / n for run in runs for n, s in zip(passes.single_examples, run.online_seconds,
                                                                   strict=True)]
        spec = runs[0].spec
        rows.append({"model": name, "kind": spec.kind, "params": runs[0].params, "vocab": spec.vocab,
                     "batch32_ex_per_s": statistics.median(rates), "online_ms": statistics.median(latencies)})
    return rows


class BareBiLSTM(nn.Module):
    """Embedding + bidirectional LSTM and nothing else: the floor the runner's student is held against."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=PAD_ID)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.lstm(self.embedding(ids))[0]


def fraction_of_bare(spec: StudentSpec, inputs: Inputs, passes: int,
                     clock: Callable[[], float] = time.perf_counter) -> Spread:
    """Student throughput / bare Embedding+LSTM throughput, pass by pass on the same batches."""
    torch.manual_seed(SEED)
    student = spec.build(quick=False).eval()
    bare = BareBiLSTM(spec.vocab, spec.embedding_dim, spec.hidden_size).eval()
    # The ratio is close to 1, so noise matters: every pass runs all the batches (students are cheap).
    seconds = interleaved_seconds({"student": spec.forward(student), "bare": bare}, [inputs.batches] * passes,
                                  clock)
    return spread(pass_ratios(seconds["bare"], seconds["student"]))


def ratio_columns(ratios: dict[str, Spread]) -> dict:
    columns: dict = {}
    for name in TIMED_RATIOS:
        columns |= {name: ratios[name].median, f"{name}_min": ratios[name].min, f"{name}_max": ratios[name].max}
    return columns | {"passes": ratios[TIMED_RATIOS[0]].passes}


def comparison_table(raw: Sequence[dict], ratios: Ratios) -> pd.DataFrame:
    """Teacher rows, then one row per (student, teacher it was timed with) with the ratios."""
    teachers = [row for row in raw if row["kind"] == "teacher"]
    rows = list(teachers)
    for student in (row for row in raw if row["kind"] == "student"):
        relevant = [t for t in teachers if (student["model"], t["model"]) in ratios]
        if not relevant:
            rows.append(student)  # still measured, just nothing to compare with
        for teacher in relevant:
            rows.append({**student, "vs_teacher": teacher["model"],
                         "compression": teacher["params"] / student["params"],
                         **ratio_columns(ratios[(student["model"], teacher["model"])])})
    table = pd.DataFrame(rows, columns=COLUMNS)
    return table.astype({"passes": "Int64"})  # a count, missing on teacher rows


def measured_value(table: pd.DataFrame, overhead: Spread, target: Target) -> Spread | float:
    """A timed ratio's median with its spread, or a plain number (parameter counts do not vary)."""
    if target.teacher == BARE:
        return overhead
    match = table[(table["model"] == target.student) & (table["vs_teacher"] == target.teacher)]
    if match.empty:
        raise KeyError(f"target {target.check!r}: no comparison of {target.student!r} with {target.teacher!r}")
    row = match.iloc[0]
    if target.column in TIMED_RATIOS:
        return Spread(float(row[target.column]), float(row[f"{target.column}_min"]),
                      float(row[f"{target.column}_max"]), int(row["passes"]))
    return float(row[target.column])


TARGET_COLUMNS = ["check", "source", "target", "measured", "min", "max", "passes", "met"]


def targets_table(table: pd.DataFrame, overhead: Spread) -> pd.DataFrame:
    """Each claim judged on its median ratio; the spread is shown beside it, the verdict stays last."""
    rows = []
    for target in TARGETS:
        value = measured_value(table, overhead, target)
        spread_cells = ({"min": value.min, "max": value.max, "passes": value.passes}
                        if isinstance(value, Spread) else {})
        median = value.median if isinstance(value, Spread) else value
        rows.append({"check": target.check, "source": target.source, "target": target.minimum,
                     "measured": median, **spread_cells, "met": "met" if median >= target.minimum else "not met"})
    return pd.DataFrame(rows, columns=TARGET_COLUMNS).astype({"passes": "Int64"})


def header(args: argparse.Namespace) -> str:
    mode = "quick (tiny teachers: ratios are not meaningful)" if args.quick else "full"
    return (f"mode {mode}; {args.examples} examples x {args.seq_len} tokens; batch {BATCH_SIZE}; online latency "
            f"over {min(ONLINE_EXAMPLES, args.examples)} examples; {pass_count(args)} interleaved passes; "
            f"{args.threads} threads; random weights; model time only")


def write_outputs(table: pd.DataFrame, targets: pd.DataFrame, args: argparse.Namespace) -> tuple[Path, Path]:
    md, csv = args.out / "bench.md", args.out / "bench.csv"
    write_atomic(csv, table.to_csv(index=False, float_format="%.4f"))
    text = "\n\n".join([
        "# Inference benchmark", header(args),
        markdown(table), "## Targets", markdown(targets),
        "\n".join(f"- {note}" for note in NOTES),
    ])
    write_atomic(md, text + "\n")
    return md, csv


def pass_count(args: argparse.Namespace) -> int:
    """--passes, fewer if there are fewer batches or single examples than that (every pass gets inputs)."""
    batches = math.ceil(args.examples / BATCH_SIZE)
    return min(args.passes, batches, min(ONLINE_EXAMPLES, args.examples))


def run(args: argparse.Namespace) -> tuple[pd.DataFrame, pd.DataFrame]:
    inputs = make_inputs(args.examples, args.seq_len)
    passes = make_passes(inputs, pass_count(args))
    measured, ratios = [], {}
    with torch_threads(args.threads), progress_bar() as progress:
        specs_by_group = groups(TEACHERS, STUDENTS)
        task = progress.add_task("benchmark", total=len(specs_by_group) + 1, status="")
        for specs in specs_by_group:
            progress.update(task, status=" / ".join(spec.name for spec in specs))
            timings = measure_group(specs, passes, args.quick)
            measured.append(timings)
            ratios |= group_ratios(timings)
            progress.advance(task)
        progress.update(task, status=f"{OVERHEAD_STUDENT.name} vs {BARE}")
        overhead = fraction_of_bare(OVERHEAD_STUDENT, inputs, passes=args.passes)
        progress.advance(task)
    table = comparison_table(model_rows(measured, passes), ratios)
    return table, targets_table(table, overhead)


def settle_args(args: argparse.Namespace) -> str | None:
    """Fill in what --quick decides; the problem with the values, or None."""
    # Explicit values win; otherwise --quick picks a few small batches.
    if args.examples is None:
        args.examples = 64 if args.quick else 256
    if args.seq_len is None:
        args.seq_len = 32 if args.quick else 128
    if args.passes is None:
        args.passes = 2 if args.quick else PASSES
    if args.examples < 1 or args.seq_len < 1 or args.threads < 1 or args.passes < 1:
        return "--examples, --seq-len, --threads and --passes must be positive"
    return None


def bench(args: argparse.Namespace) -> tuple[Path, Path]:
    """The whole benchmark: measure, print the tables and notes, write bench.{md,csv}."""
    transformers.logging.set_verbosity_error()  # building random-weight models is expected, not news
    table, targets = run(args)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 150)  # logs and pipes: keep one row per line instead of folding cells
    console.print(rich_table(table, f"Inference benchmark\n{header(args)}"))
    console.print(rich_table(targets, "Targets"))
    for note in NOTES:
        console.print(f"- {note}")
    md, csv = write_outputs(table, targets, args)
    console.print(f"wrote {md} and {csv}")
    return md, csv
