"""A paper's table as data: `distil/conf/table/<paper>-table<N>.yaml` (one file per table).

A preset says which runs fill the table (a sweep of overrides at two scales), where each
number comes from in their metrics.json, how the table is laid out, and what the paper
published, so `distil-table` can run the missing cells and print ours beside the paper's.

    name: xtremedistil-table3          # the file name without .yaml; outputs/tables/<name>.{md,csv,tex,png}
    paper: XtremeDistil (Mukherjee & Awadallah, ACL 2020)
    table: Table 3
    title: Distillation strategies over transfer-set sizes
    kind: sweep                        # sweep (runs) | data (dataset summaries) | bench (distil-bench rows)
    value: student.test.accuracy       # sweep: a dotted path into metrics.json; data: a summary field;
                                       # bench: a column of outputs/tables/bench.csv (or of
                                       # <bench>.csv with `bench: bench_tang`, see BENCHES)
    format: percent                    # percent (x100, 2 decimals) | number | ratio (x, 1 decimal) | count
                                       # | millions (/10^6, 2 decimals: parameter counts in M, as papers give them)
    rows_from: null                    # null: the rows below; "stages" (each stage/step of the one run of a
                                       # column: XtremeDistil Table 4), "languages" (per-language scores: Table 17)
                                       # or "epochs" (the dev score after each epoch of its last step: a learning
                                       # curve, Wu Fig. 2)
    scales:
      cpu:   {base: [+experiment=sst2-low, trainer.epochs=4], seeds: [1]}
      paper: {base: [teacher=mbert, dataset=wikiann], seeds: [1]}
    rows:                              # label -> overrides, the same at both scales ...
      - {label: D0, overrides: [schedule=d0]}
      - {label: D1, overrides: {cpu: [schedule=d1], paper: [schedule=d1]}}   # ... or per scale
    columns:                           # optional: without columns a table has one column of ours
      - {label: 0.7M, overrides: {cpu: [transfer_size=5k], paper: [transfer_size=xd-0.7m]}}
    paper_values:                      # row -> number, or row -> column -> number; missing: not in the paper
      D0: {0.7M: 71.26}
    empty: {D0: [0.7M]}                # optional: row -> columns that have no number by design (shown as –, not
                                       # as an error), e.g. Wu Table 4's distillation loss of a student never distilled
    paper_metric: average F1 over 41 languages (WikiANN NER)
    notes: |                           # what differs here: teacher, data, scale; shown under the table
      ...
    # a sweep's column can read its own metric from the same runs instead of adding overrides:
    #   - {label: params, value: student.params, format: count}
    # and a row the teacher's score from a student row's runs (same overrides: no run of its own):
    #   - {label: BERT (teacher), overrides: [schedule=d0], reads: teacher}
    # or, in a timed table, the student as deployed, its ONNX export (onnx) or int8 copy (int8):
    #   - {label: "BiLSTM, ONNX int8", overrides: [student=bilstm], reads: int8}
    # (timing.<f> -> timing.int8.<f>, student.test.<m> -> timing.int8.test.<m>; its size, e.g.
    # student.params, as the student's; a peer has no export: shown as –)
    compare: columns                   # optional: rank columns within each row (rows: rows within each
                                       # column) against the paper's order, with the spread over seeds
    plot: null                         # null | {x: columns, kind: line} | {x: <path>, y: <path>, kind: scatter}
                                       # scatter: paper_x: {row: the paper's x} plots the paper's points too;
                                       # xlabel: what x is, in words (else its metrics.json path);
                                       # xscale: log for an axis over orders of magnitude;
                                       # references: a row-label prefix ("peer: "): those rows are other
                                       # tools, drawn apart from ours (the frontier counts them too)

A cell is one run: the scale's base overrides + the row's + the column's + `seed=<s>`, for every
seed of the scale. Its key hashes the composed config (everything that changes its result), so
a cell named by several tables runs once and a finished cell is never run again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KINDS = ("sweep", "data", "bench")
READS = ("student", "teacher", "onnx", "int8")
DEPLOYED_READS = ("onnx", "int8")  # a timed student's deployed forms (distil.tables.timing.DEPLOYED)
# a bench table's csv (outputs/tables/<name>.csv) -> the command that measures it, as the rendered tables name it
BENCHES = {"bench": "distil-bench", "bench_tang": "distil-bench-tang", "bench_turc": "distil-bench-turc",
           "bench_wu": "distil-bench-wu", "untuned": "distil-untuned"}
# ... and the `distil` subcommand distil table runs for it (the names above are its aliases)
BENCH_COMMANDS = {"bench": ("bench", "students"), "bench_tang": ("paper", "tang-table2"),
                  "bench_turc": ("paper", "turc-table1"), "bench_wu": ("paper", "wu-table2"),
                  "untuned": ("paper", "wu-table5")}
FORMATS = ("percent", "number", "ratio", "count", "millions")
ROWS_FROM = (None, "stages", "languages", "epochs")
SCALES = ("cpu", "paper")
COMPARES = (None, "columns", "rows")  # see distil.tables.orderings
SETS = ("papers", "frontier")  # `distil-table --all --set S`: the papers' tables (make tables), or ours


def bench_csv(tables_dir: Path, bench: str) -> Path:
    """Where a bench's console script writes its measurements (`--out tables_dir`) and its table reads them."""
    return tables_dir / f"{bench}.csv"


def bench_record(csv: Path) -> Path:
    """Beside a bench csv that `distil table` measured: its overrides and provenance (command, machine,
    code version, time) and the csv's digest."""
    return csv.with_name(csv.stem + ".measured.json")


@dataclass
class Scale:
    base: list[str] = field(default_factory=list)  # overrides every cell of the table shares
    seeds: list[int] = field(default_factory=lambda: [1])


@dataclass
class Axis:
    """A row or a column: its label and the overrides that make it (a list for both scales,
    or {cpu: [...], paper: [...]}). A sweep's column may instead (or also) choose what is read from
    each run: `value` (a metrics.json path) and `format`, e.g. a frontier table's accuracy, params
    and latency columns, all read from one run per row."""

    label: str
    overrides: Any = field(default_factory=list)
    value: str | None = None
    format: str | None = None
    # a sweep's row: `teacher` reads the teacher's score where the others read the student's
    # (student.test.f1 -> teacher.test.f1), e.g. the paper's BERT row, from a student row's runs;
    # `onnx` or `int8` the student's deployed form, timed and scored by a table's timing
    # (student.test.accuracy -> timing.onnx.test.accuracy, timing.single_ms -> timing.onnx.single_ms)
    reads: str = "student"

    def overrides_for(self, scale: str) -> list[str]:
        if isinstance(self.overrides, dict):
            return list(self.overrides.get(scale, []))
        return list(self.overrides)


RELATIONS = (">", ">=")  # a finding's claim: the better entry above the worse, or reaching it (within a margin)


@dataclass
class Finding:
    """One of the paper's claims that a table can test: `better` and `worse` name two rows (read in
    each column) or two columns (read in each row); distil.tables.findings judges it on our seeds."""

    claim: str  # the paper's claim in a few words, e.g. "soft distillation beats hard distillation"
    better: str  # the row or column label the paper finds better (or, with >=, the one that reaches)
    worse: str
    section: str = ""  # where the paper says so, e.g. "§6.3, Table 8"
    # ">": better above worse; ">=": better reaches worse, at most `margin` below it (in the units shown)
    relation: str = ">"
    margin: float = 0.0
    groups: list[str] | None = None  # the columns (or rows) it is read in; null: every one
    headline: int | None = None  # its number among the headline findings of the findings overview
    # scale -> the mechanism the finding needs that this scale lacks (the verdict is then "not comparable")
    not_comparable: dict[str, str] = field(default_factory=dict)
    # the table (a preset name) that reads the effect against the one variable the paper says drives it
    # (transfer size, pre-training steps, labels): where it appears at this scale, or that it never does
    probe: str | None = None
    # scale -> why that scale may not show the finding (what it has less of than the paper, what the probe
    # varies): shown under the finding wherever it is not reproduced. Names the mechanism, never our numbers
    explanation: dict[str, str] = field(default_factory=dict)


@dataclass
class TablePreset:
    name: str
    paper: str
    table: str
    title: str
    kind: str = "sweep"
    value: str = "student.test.accuracy"
    format: str = "percent"
    rows_from: str | None = None
    scales: dict[str, Scale] = field(default_factory=dict)
    rows: list[Axis] = field(default_factory=list)
    columns: list[Axis] = field(default_factory=list)
    paper_values: dict[str, Any] = field(default_factory=dict)
    # row -> the columns it has no number in by design (Wu Table 4: no distillation loss without the stage)
    empty: dict[str, list[str]] = field(default_factory=dict)
    paper_metric: str = ""
    notes: str = ""
    plot: dict[str, Any] | None = None
    # sweeps: after the cells, time every finished student against its teacher in one interleaved run
    # (distil.tables.timing; read as timing.<field>, e.g. timing.single_ms, timing.speedup)
    timing: bool = False
    set: str = "papers"  # papers: a table of the five papers; frontier: the students side by side (make frontier)
    # a bench table: which measurement it reads, outputs/tables/<bench>.csv, written by BENCHES[bench]
    bench: str = "bench"
    # a sweep whose setting the paper picks on dev (Wu: the learning rate from {2,3,5,10} x 1e-4):
    # {over: [trainer.lr=2e-4, ...], by: student.dev.accuracy}. Every (row, column, seed) runs once
    # per option; the table shows the run with the best `by` (dev only, never test). (Not `on`: YAML reads it as true.)
    select: dict[str, Any] | None = None
    # rank the columns within each row, or the rows within each column, against the paper's order
    # (distil.tables.orderings): null (no orderings paragraph), columns or rows
    compare: str | None = None
    # the paper's claims this table tests, each judged on our seeds (distil.tables.findings)
    findings: list[Finding] = field(default_factory=list)

    def row(self, label: str) -> Axis | None:
        """The row axis with this label (None: a label the preset has no row for)."""
        return next((axis for axis in self.rows if axis.label == label), None)

    def reads_teacher(self, row: str) -> bool:
        """Whether the row reads the teacher's score where the others read the student's."""
        axis = self.row(row)
        return axis is not None and axis.reads == "teacher"

    def reads_of(self, row: str) -> str:
        """What the row reads from its runs (READS): the student, the teacher, or a deployed form."""
        axis = self.row(row)
        return "student" if axis is None else axis.reads

    def is_empty(self, row: str, column: str | None) -> bool:
        """Whether (row, column) has no number by design (`empty`): shown as –, never as an error."""
        return column in self.empty.get(row, [])

    def column(self, label: str | None) -> Axis | None:
        """The column axis with this label (None: no such column, or a table without columns)."""
        return next((axis for axis in self.columns if axis.label == label), None)


@dataclass
class Cell:
    """One run of a table at one scale: what makes it, where its result is, and the result."""

    row: str
    column: str | None  # None: the table has no columns
    seed: int
    overrides: list[str]  # base + row + column + seed=<s>, in that order
    key: str  # content key of the composed config: its directory is outputs/cells/<key>/
    metrics: dict | None = None  # its metrics.json once run (status ok or failed)
    choice: str | None = None  # with the preset's `select`: which option of its `over` this run is
    error: str | None = None  # why it has no number: "failed: <reason>", "not run", ...
    recorded: bool = False  # its number is another machine's, read from the tracked results (ledger)
