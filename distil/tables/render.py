"""Render a paper's table: our numbers beside the paper's, as md, csv, tex and (where the preset
asks) a PNG, in `<out_dir>/<preset.name>.*`.

Where the numbers come from (preset.kind):
  * sweep: each cell's metrics.json (one per seed), read at the dotted path `preset.value`;
    rows_from=stages makes the rows the stage/step records of each column's run
    (student.stages), rows_from=languages the per-language scores (student.<split>.per_language),
    rows_from=epochs the dev score after each epoch of the last step (a learning curve);
  * data: the dataset summaries `distil-data` shows (no teacher, no training); rows are datasets,
    a column label names a summary field (without columns: `preset.value`);
  * bench: the rows of `<out_dir>/bench.csv` whose model is a row's label; a column label names
    a bench.csv column (without columns: `preset.value`).

Layout: the paper's rows x columns, and for each column a group "ours | paper | Δ" (Δ = ours −
paper, in the units shown). One wide table was chosen over two sub-tables (ours, then the
paper's) because the reader compares a number with the paper's number for the same cell, and
side by side needs no eye travel between tables; a column the paper has no number for gets no
paper and Δ columns, so a table without paper values stays as narrow as ours alone.

Seeds: a cell over several seeds shows "mean ± std (n=k)", std being the sample standard
deviation (ddof=1) over the k seeds that produced a number; seeds that failed are counted
beside it. A cell without a number shows why: its error cut to 60 characters, or "not run".
The table itself shows numbers only; with `compare`, a paragraph under it (distil.tables.orderings)
says, pair by pair, whether the paper's order holds in ours and whether the seeds' spread supports it;
with `findings`, a block after it judges each of the paper's claims the table tests (distil.tables.findings).
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from distil.common.markdown import to_markdown
from distil.errors import DistilError, check_choice
from distil.tables import findings, orderings
from distil.tables.cells import NOT_RUN, NOT_TIMED, runs_of, waiting
from distil.tables.costs import run_costs
from distil.tables.preset import BENCHES, DEPLOYED_READS, Axis, Cell, TablePreset, bench_csv, bench_record

ERROR_CHARS = 60
MISSING = "–"  # no paper number, or no Δ
STILL_IMPROVING = "still improving"
ROW_HEADERS = {"stages": "stage", "languages": "language", "epochs": "epoch", "data": "dataset", "bench": "model"}
SCALE = {"percent": 100.0, "millions": 1e-6}  # the factor from the metrics.json value to the number shown; 1 otherwise
DECIMALS = {"percent": 2, "number": 2, "ratio": 1, "count": 0, "millions": 2}
NUMBER_MAX_DECIMALS = 4
PLOTS = ("line", "scatter")
FRONTIERS = (None, "lower_x", "higher_x")  # a scatter's Pareto frontier: which way x is better


@dataclass
class Sample:
    """One number (or why there is none) for one (row, column) of the table, from one seed."""

    row: str
    column: str | None
    value: Any = None  # in the units shown (percent x100); a string for a non-numeric summary field
    error: str | None = None
    improving: bool = False  # the run that gave it stopped at an epoch cap while still improving (still_improving)
    # the runs it needed (its cell's, or with `select` every option's): cell key -> seconds without its builds
    runs: dict[str, float] = field(default_factory=dict)
    builds: dict[str, float | None] = field(default_factory=dict)  # what its run read: artifact -> build seconds


@dataclass
class Entry:
    """Everything known about one (row, column): the numbers over seeds and the errors."""

    values: list[float] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)  # non-numeric values ("varies")
    errors: list[str] = field(default_factory=list)
    improving: int = 0  # seeds whose number comes from a run stopped at a cap while still improving
    runs: dict[str, float] = field(default_factory=dict)  # the runs its numbers needed: cell key -> seconds
    builds: dict[str, float | None] = field(default_factory=dict)  # artifact its runs read -> build seconds

    @property
    def failed(self) -> int:
        return sum(not waiting(error) for error in self.errors)

    @property
    def not_run(self) -> int:
        """Seeds still to run (an interrupted cell too): waiting, not failed."""
        return sum(waiting(error) and error != NOT_TIMED for error in self.errors)

    @property
    def not_timed(self) -> int:
        """Seeds that ran but wait for the table's timing step."""
        return self.errors.count(NOT_TIMED)

    @property
    def mean(self) -> float | None:
        return sum(self.values) / len(self.values) if self.values else None

    @property
    def std(self) -> float | None:
        if len(self.values) < 2:
            return None
        mean = self.mean
        return math.sqrt(sum((v - mean) ** 2 for v in self.values) / (len(self.values) - 1))


def write_table(preset: TablePreset, cells: list[Cell], out_dir: Path, scale: str = "cpu") -> list[Path]:
    """Write `<out_dir>/<preset.name>.{md,csv,tex}`, `.findings.json` where the preset lists findings
    (distil.tables.findings) and, if preset.plot is set, `.png`; return the paths."""
    from distil.common.atomic import write_atomic

    check_renderable(preset)
    out_dir = Path(out_dir)
    samples = table_samples(preset, cells, out_dir, scale)
    rows, columns = row_labels(preset, samples), [c.label for c in preset.columns] or [None]
    grid = aggregate(samples)
    shown = display_frame(preset, grid, rows, columns)
    paths = {ext: out_dir / f"{preset.name}.{ext}" for ext in ("md", "csv", "tex")}
    def fmt(value: float, signed: bool = True) -> str:
        return number_text(value, preset.format, signed=signed)

    pairs = orderings.verdicts(preset, grid, rows, columns, paper_value)
    order = orderings.paragraph(preset, pairs, fmt, orderings.spreads(preset, grid, rows, columns))
    judged = findings.judgements(preset, grid, scale, paper_value)
    order = "\n\n".join(part for part in (order, findings.block(judged, fmt)) if part)
    write_atomic(paths["md"], markdown(preset, shown, footer(preset, cells, grid, scale, out_dir), order))
    write_atomic(paths["csv"], long_frame(preset, grid, rows, columns).to_csv(index=False))
    write_atomic(paths["tex"], latex(preset, shown))
    written = list(paths.values())
    if judged:
        written.append(out_dir / f"{preset.name}.findings.json")
        write_atomic(written[-1], json.dumps(findings.record(preset, judged), indent=1) + "\n")
    written.append(out_dir / f"{preset.name}.summary.json")
    write_atomic(written[-1], json.dumps(summary(preset, cells, judged, pairs, scale), indent=1) + "\n")
    if preset.plot:
        written.append(write_plot(preset, cells, grid, rows, columns, out_dir / f"{preset.name}.png"))
    return written


def summary(preset: TablePreset, cells: list[Cell], judged: list, pairs: list, scale: str) -> dict:
    """What the table says in one record (outputs/tables/<name>.summary.json), for the results index
    and the README's "what is reproduced": its findings' verdicts, its orderings' counts, its cells."""
    runs = runs_of(cells)
    problems = [cell_problem(cell) for cell in runs]
    return {"table": preset.name, "paper": preset.paper, "label": preset.table, "title": preset.title,
            "kind": preset.kind, "scale": scale, "findings": [j.verdict for j in judged],
            "orderings": None if preset.compare is None else {
                "pairs": len(pairs), "held": sum(v.holds for v in pairs),
                "beyond": sum(v.holds and v.beyond for v in pairs),
                "against": sum(not v.holds and v.beyond for v in pairs),
                "unjudged": sum(not v.judged for v in pairs)},
            "cells": {"runs": len(runs), "done": problems.count(None), "not_run": sum(map(waiting, problems))}}


def check_renderable(preset: TablePreset) -> None:
    """What only rendering reads, checked before anything is read or written."""
    if preset.rows_from == "languages" and len(preset.value.split(".")) != 3:
        raise DistilError(f"table {preset.name}: rows_from: languages reads student.<split>.per_language, so value "
                          f"must be student.<split>.<metric> (e.g. student.test.f1), not '{preset.value}'")
    if preset.plot:
        kind = preset.plot.get("kind", "line")
        check_choice("plot kind", kind, PLOTS, where=f"table {preset.name}")
        if kind == "scatter" and not preset.plot.get("x"):
            raise DistilError(f"table {preset.name}: a scatter plot needs x: a metrics.json path "
                              "(e.g. {x: speed.speedup, y: student.test.f1, kind: scatter})")
        check_choice("plot.frontier", preset.plot.get("frontier"), FRONTIERS, where=f"table {preset.name}",
                     more=" (lower_x: x is a latency; higher_x: x is a speed-up)")
        check_choice("plot.xscale", preset.plot.get("xscale", "linear"), ("linear", "log"),
                     where=f"table {preset.name}")
        unknown = sorted(set(preset.plot.get("paper_x") or {}) - {row.label for row in preset.rows})
        if unknown:
            raise DistilError(f"table {preset.name}: plot.paper_x names rows the table does not have: "
                              f"{', '.join(unknown)}; use the labels of rows:")


# --- where the numbers come from -------------------------------------------------------------------


def table_samples(preset: TablePreset, cells: list[Cell], out_dir: Path, scale: str) -> list[Sample]:
    if preset.kind == "data":
        return data_samples(preset, scale)
    if preset.kind == "bench":
        return bench_samples(preset, bench_csv(out_dir, preset.bench))
    chosen = selected_on_dev(preset, cells) if preset.select else [(cell, [cell]) for cell in cells]
    return [sample for cell, needed in chosen for sample in cell_samples(preset, cell, needed)]


def selected_on_dev(preset: TablePreset, cells: list[Cell]) -> list[tuple[Cell, list[Cell]]]:
    """Per (row, column, seed), the run whose `select.by` (a dev score) is best among its options, with
    every option (what the choice cost); until every option has finished, a cell saying how many have
    (the choice waits for all)."""
    groups: dict[tuple, list[Cell]] = {}
    for cell in cells:
        groups.setdefault((cell.row, cell.column, cell.seed), []).append(cell)
    path = preset.select["by"]
    chosen = []
    for (row, column, seed), options in groups.items():
        scored = [(value, cell) for cell in options if cell_problem(cell) is None
                  and isinstance(value := dev_score(cell.metrics, path), int | float)]
        if len(scored) < len(options):
            chosen.append((Cell(row, column, seed, [], options[0].key,
                                error=f"{NOT_RUN}: {len(scored)} of {len(options)} runs to select from"), []))
            continue
        chosen.append((max(scored, key=lambda pair: pair[0])[1], options))  # ties: the first option
    return chosen


def cell_problem(cell: Cell) -> str | None:
    """Why the cell has no number, or None: the runner's error, "not run", or a failed status."""
    if cell.error:
        return cell.error
    if cell.metrics is None:
        return NOT_RUN
    status = str(cell.metrics.get("status", "unknown"))
    if status == "ok":
        return None
    return status if status.startswith("failed") else f"failed: status {status}"


def cell_samples(preset: TablePreset, cell: Cell, needed: list[Cell]) -> list[Sample]:
    """The cell's numbers, each costed at the runs it needed (the cell's own, or with `select` every
    option the choice read) and the artifacts they read (distil.tables.costs). A choice on dev against
    an option stopped still improving compared unequal budgets: the student's numbers are marked so."""
    samples = samples_of(preset, cell)
    if any(still_improving(student_steps(option.metrics or {})) for option in needed if option is not cell):
        for sample in samples:
            sample.improving |= reads_trained_student(preset, sample.row, sample.column)
    runs, builds = {}, {}
    for run in needed:
        own, read = run_costs(run.metrics or {})
        if own is not None:
            runs[run.key] = own
            builds.update(read)
    for sample in samples:
        sample.runs, sample.builds = runs, builds
    return samples


def samples_of(preset: TablePreset, cell: Cell) -> list[Sample]:
    if preset.is_empty(cell.row, cell.column):  # no number by design, whatever its run did
        return [Sample(cell.row, cell.column, value=MISSING)]
    problem = cell_problem(cell)
    if problem is not None:
        return [Sample(cell.row, cell.column, error=problem)]  # the preset's row: the run's own rows are unknown
    if preset.rows_from == "stages":
        return stage_samples(preset, cell)
    if preset.rows_from == "languages":
        return language_samples(preset, cell)
    if preset.rows_from == "epochs":
        return epoch_samples(preset, cell)
    form = preset.reads_of(cell.row)
    if form in DEPLOYED_READS and (gap := deployed_gap(cell, form)) is not None:
        return [gap]
    path = cell_value(preset, cell.row, cell.column)
    if path is None:  # a number only the trained student has (a dev score): not one of its deployed form's
        return [Sample(cell.row, cell.column, value=MISSING)]
    sample = read_sample(column_format(preset, cell.column), cell.row, cell.column, cell.metrics, path)
    sample.improving = reads_trained_student(preset, cell.row, cell.column) and still_improving(
        student_steps(cell.metrics))
    return [sample]


def deployed_gap(cell: Cell, form: str) -> Sample | None:
    """A row reading a deployed form (onnx, int8) of a run that has none to read, or None: not timed
    yet (no timing, or one from before the deployed forms were timed), or – where the timing says the
    student has no such form (a peer: another tool's model, no graph to export), never a zero."""
    timing = cell.metrics.get("timing")
    if not isinstance(timing, dict) or form not in timing:
        return Sample(cell.row, cell.column, error=NOT_TIMED)
    return Sample(cell.row, cell.column, value=MISSING) if timing[form] is None else None


# a student's fields that training does not change: its size, its vocabulary, its pre-training's report
UNTRAINED_FIELDS = ("params", "param_counts", "vocab_size", "pretrained", "models")


def reads_trained_student(preset: TablePreset, row: str, column: str | None) -> bool:
    """Whether (row, column) shows a score of the trained student: what its training budget decides."""
    return reads_training(column_value(preset, column)) and not preset.reads_teacher(row)


def reads_training(path: str) -> bool:
    """Whether a column's number is a score of the trained student (not its size or a timing)."""
    parts = path.split(".")
    return parts[0] == "student" and len(parts) > 1 and parts[1] not in UNTRAINED_FIELDS


def student_steps(metrics: dict) -> list[dict]:
    """Every stage step's record of the run's student (of each language's, for D0)."""
    stages = (metrics.get("student") or {}).get("stages") or []
    return [r for records in stages.values() for r in records] if isinstance(stages, dict) else list(stages)


def still_improving(steps: list[dict]) -> bool:
    """Whether some step of the student's schedule stopped at its epoch cap while still improving:
    its best epoch on dev is its last. A patience stop comes `patience` epochs after the best, so a
    best last epoch means the cap ended it (a non-finite loss aside), and more epochs might have
    helped: a comparison with such a cell says nothing about the method."""
    return any(0 < r.get("best_epoch", 0) == r.get("epochs_run", -1) and not r.get("nonfinite") for r in steps)


def column_value(preset: TablePreset, column: str | None) -> str:
    """What a sweep's column reads from each run: its own `value`, else the table's."""
    axis = preset.column(column)
    return axis.value if axis is not None and axis.value else preset.value


def cell_value(preset: TablePreset, row: str, column: str | None) -> str | None:
    """The column's path as the row reads it (`row_path`)."""
    return row_path(preset, row, column_value(preset, column))


def row_path(preset: TablePreset, row: str, path: str) -> str | None:
    """A metrics.json path as the row reads it: the teacher's scores for a row that `reads: teacher`;
    for a deployed form (`reads: onnx` or `int8`) its timing and its test scores, which the table's
    timing measured (timing.<f> -> timing.onnx.<f>, student.test.<m> -> timing.onnx.test.<m>), its size
    as the student's (the same parameters), and None for what only the trained student has (dev scores)."""
    reads = preset.reads_of(row)
    if reads == "teacher":
        return "teacher." + path.removeprefix("student.")
    if reads not in DEPLOYED_READS:
        return path
    parts = path.split(".")
    if parts[0] == "timing" or parts[:2] == ["student", "test"]:
        return ".".join(["timing", reads, *parts[1:]])
    return path if parts[0] == "student" and len(parts) > 1 and parts[1] in UNTRAINED_FIELDS else None


def column_format(preset: TablePreset, column: str | None) -> str:
    axis = preset.column(column)
    return axis.format if axis is not None and axis.format else preset.format


def read_sample(fmt: str, row: str, column: str | None, record: dict, path: str,
                source: str = "metrics.json") -> Sample:
    try:
        value = read_path(record, path)
    except KeyError:
        if path.startswith("timing.") and "timing" not in record:  # timed once every cell of the table is done
            return Sample(row, column, error=NOT_TIMED)
        return Sample(row, column, error=f"no {path} in {source}")
    return Sample(row, column, value=scaled(value, fmt))


def dev_score(record: dict, path: str) -> Any:
    """The selecting score of a run, or None when it has none."""
    try:
        return read_path(record, path)
    except KeyError:
        return None


def read_path(record: dict, path: str) -> Any:
    """`record[path]` for a flat key (a summary field may hold dots or spaces), else the dotted path."""
    if path in record:
        return record[path]
    value: Any = record
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def scaled(value: Any, fmt: str) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value if value is None or isinstance(value, str) else str(value)
    return value * SCALE.get(fmt, 1.0)


def stage_records(metrics: dict) -> list[tuple[str, dict]]:
    """(label, record) per stage step, e.g. "S3 bilstm" (as the presets' paper_values name them): a
    run with one student per language (D0) has stages per language, labelled "<language>: <stage>"."""
    stages = metrics.get("student", {}).get("stages") or []
    if isinstance(stages, dict):
        return [(f"{lang}: {label}", r) for lang, records in stages.items() for label, r in stage_records(
            {"student": {"stages": records}})]
    return [(r["name"] if r.get("step", "all") == "all" else f"{r['name']} {r['step']}", r) for r in stages]


def stage_samples(preset: TablePreset, cell: Cell) -> list[Sample]:
    path = preset.value.removeprefix("student.")  # e.g. test.f1: the same scores, per stage record
    prefix = f"{cell.row}: " if len(preset.rows) > 1 else ""
    records = stage_records(cell.metrics)
    if not records:
        return [Sample(cell.row, cell.column, error="no student.stages in metrics.json")]
    samples = [read_sample(preset.format, prefix + label, cell.column, record, path, "the stage record")
               for label, record in records]
    for sample, (_, record) in zip(samples, records, strict=True):
        sample.improving = still_improving([record])
    return samples


def epoch_samples(preset: TablePreset, cell: Cell) -> list[Sample]:
    """A learning curve: the dev score after each epoch of the run's last stage step (epoch 0: the
    model as the step began), from its history in metrics.json."""
    stages = (cell.metrics.get("student") or {}).get("stages") or []
    history = [h for h in (stages[-1].get("history") or []) if "dev" in h] if stages else []
    if not history:
        return [Sample(cell.row, cell.column, error="no student.stages history in metrics.json")]
    return [Sample(f"epoch {h['epoch']}", cell.column, value=scaled(h["dev"], preset.format)) for h in history]


def language_samples(preset: TablePreset, cell: Cell) -> list[Sample]:
    split = preset.value.split(".")[1]  # student.<split>.<metric>: per_language holds the task's metric
    path = f"student.{split}.per_language"
    try:
        scores = read_path(cell.metrics, path)
    except KeyError:
        return [Sample(cell.row, cell.column, error=f"no {path} in metrics.json")]
    return [Sample(lang, cell.column, value=scaled(v, preset.format)) for lang, v in scores.items()]


def named(axis: Axis, key: str) -> str:
    """What a data or bench axis names: its `<key>=<name>` entry (`value=transfer (unlabeled)`,
    `model=BiLSTM E300 H2x600`: a label can then read like the paper's), else its label."""
    entries = [o.partition("=")[2] for o in axis.overrides_for("cpu") if o.startswith(f"{key}=")]
    return entries[0] if entries else axis.label


def row_samples(preset: TablePreset, row: str, record: dict | None, error: str | None, source: str) -> list[Sample]:
    """Data and bench tables: one sample per field of the row's record; each column names a field
    (see `named`), and without columns the one field is `value`. A row without a record shows its error."""
    columns = [(c.label, named(c, "value")) for c in preset.columns] or [(None, preset.value)]
    if record is None:
        return [Sample(row, label, error=error) for label, _ in columns]
    return [read_sample(preset.format, row, label, record, field, source) for label, field in columns]


def data_samples(preset: TablePreset, scale: str) -> list[Sample]:
    """One dataset summary per row, computed as `distil-data` does; a dataset that cannot be
    read is that row's error, not the end of the table."""
    from distil.data.summary import overview
    from distil.run.data import load_splits

    base = preset.scales[scale].base if scale in preset.scales else []
    samples = []
    for row in preset.rows:
        record, error = None, None
        try:
            cfg, data = load_splits([*base, *row.overrides_for(scale)])  # rows name datasets; columns fields
            record = overview(data, cfg.dataset.name).iloc[0].to_dict()
        except DistilError as problem:
            error = f"failed: {problem}"
        samples += row_samples(preset, row.label, record, error, "the dataset summary")
    return samples


def bench_samples(preset: TablePreset, path: Path) -> list[Sample]:
    if not path.is_file():
        raise DistilError(f"table {preset.name}: {path} does not exist: run `make bench` "
                          f"({BENCHES[preset.bench]}) first")
    bench = pd.read_csv(path)
    samples = []
    for row in preset.rows:
        model = named(row, "model")
        found = bench[bench["model"] == model]
        record = None if found.empty else found.iloc[0].to_dict()
        samples += row_samples(preset, row.label, record, f"no model '{model}' in {path.name}", path.name)
    return samples


# --- numbers to a table ----------------------------------------------------------------------------


def row_labels(preset: TablePreset, samples: list[Sample]) -> list[str]:
    """The preset's rows where the preset names them; for stages and languages, the rows the runs
    report, in the order they first appear."""
    if preset.rows_from is None or preset.kind != "sweep":
        named = [r.label for r in preset.rows]
        return named + unique(s.row for s in samples if s.row not in named)
    return unique(s.row for s in samples)


def unique(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def aggregate(samples: list[Sample]) -> dict[tuple[str, str | None], Entry]:
    grid: dict[tuple[str, str | None], Entry] = {}
    for s in samples:
        entry = grid.setdefault((s.row, s.column), Entry())
        entry.improving += s.improving and s.error is None
        if s.error is None:
            entry.runs.update(s.runs)
            entry.builds.update(s.builds)
        if s.error is not None:
            entry.errors.append(s.error)
        elif isinstance(s.value, str):
            entry.texts.append(s.value)
        elif s.value is not None and not (isinstance(s.value, float) and math.isnan(s.value)):
            entry.values.append(float(s.value))
    return grid


def paper_value(preset: TablePreset, row: str, column: str | None) -> float | None:
    """The paper's number for (row, column): `paper_values` is row -> number or row -> column -> number;
    a plain row -> number belongs to a table of one column (e.g. Table 4's one run, step by step)."""
    value = preset.paper_values.get(row)
    if isinstance(value, dict):
        value = value.get(column) if column is not None else None
    elif len(preset.columns) > 1:
        value = None
    return None if value is None else float(value)


def number_text(value: float, fmt: str, signed: bool = False) -> str:
    decimals = DECIMALS.get(fmt, 2)
    if fmt == "count" and not float(value).is_integer():
        decimals = 1  # e.g. average words per document
    if fmt == "number" and 0 < abs(value) < 1:
        # three significant digits below 1, up to 4 decimals: a teacher's prediction variance (0.240 vs
        # 0.066 in Mukherjee Table 9), an eq. 1 loss (0.0288, Wu Table 4), a 0.036 ms latency
        decimals = min(NUMBER_MAX_DECIMALS, max(decimals, 2 - math.floor(math.log10(abs(value)))))
    sign, thousands = "+" if signed else "", "," if fmt == "count" else ""
    text = f"{value:{sign}{thousands}.{decimals}f}"
    return text + ("x" if fmt == "ratio" and not signed else "")


def short(error: str) -> str:
    return error if len(error) <= ERROR_CHARS else error[: ERROR_CHARS - 1] + "…"


def entry_text(entry: Entry | None, fmt: str) -> str:
    if entry is None:
        return NOT_RUN
    if entry.values:
        text = number_text(entry.mean, fmt)
        n = len(entry.values)
        missing = "".join(f", {count} {what}" for count, what in ((entry.failed, "failed"), (entry.not_run, NOT_RUN),
                                                                  (entry.not_timed, NOT_TIMED),
                                                                  (entry.improving, STILL_IMPROVING)) if count)
        if n > 1:
            text += f" ± {number_text(entry.std, fmt).removesuffix('x')} (n={n}{missing})"
        elif missing:
            text += f" (n=1{missing})"
        return text
    if entry.texts:
        return entry.texts[0]
    return short(entry.errors[0]) if entry.errors else NOT_RUN


def has_paper(preset: TablePreset, rows: list[str], column: str | None) -> bool:
    return any(paper_value(preset, row, column) is not None for row in rows)


def group_headers(column: str | None) -> tuple[str, str, str]:
    if column is None:
        return "ours", "paper", "Δ"
    return column, f"{column} (paper)", f"{column} Δ"


def display_frame(preset: TablePreset, grid: dict, rows: list[str], columns: list[str | None]) -> pd.DataFrame:
    """The table as shown: rows x (ours | paper | Δ per column), every cell a string."""
    table: dict[str, list[str]] = {}
    for column in columns:
        ours, paper, diff = group_headers(column)
        entries = [grid.get((row, column)) for row in rows]
        fmt = column_format(preset, column)
        table[ours] = [entry_text(entry, fmt) for entry in entries]
        if not has_paper(preset, rows, column):
            continue
        published = [paper_value(preset, row, column) for row in rows]
        table[paper] = [MISSING if p is None else number_text(p, fmt) for p in published]
        table[diff] = [difference_text(e, p, fmt) for e, p in zip(entries, published, strict=True)]
    return pd.DataFrame(table, index=pd.Index(rows, name=ROW_HEADERS.get(preset.rows_from or preset.kind, "")))


def difference_text(entry: Entry | None, paper: float | None, fmt: str) -> str:
    if paper is None or entry is None or entry.mean is None:
        return MISSING
    return number_text(entry.mean - paper, fmt, signed=True)


def long_frame(preset: TablePreset, grid: dict, rows: list[str], columns: list[str | None]) -> pd.DataFrame:
    """The csv: one line per (row, column) with mean, std and n apart, the paper's number and Δ
    (in the units shown), and the error where there is no number."""
    lines = []
    for row in rows:
        for column in columns:
            entry = grid.get((row, column)) or Entry(errors=[NOT_RUN])
            paper = paper_value(preset, row, column)
            mean = entry.mean
            lines.append({"row": row, "column": column, "mean": mean if mean is not None else
                          (entry.texts[0] if entry.texts else None), "std": entry.std, "n": len(entry.values),
                          "failed": entry.failed, "not_run": entry.not_run, "still_improving": entry.improving,
                          "paper": paper,
                          "diff": None if mean is None or paper is None else mean - paper,
                          "error": None if entry.values or entry.texts else entry.errors[0]})
    return pd.DataFrame(lines)


# --- the files -------------------------------------------------------------------------------------


def heading(preset: TablePreset) -> str:
    return f"{preset.paper}, {preset.table}: {preset.title}"


def footer(preset: TablePreset, cells: list[Cell], grid: dict, scale: str, out_dir: Path | None = None) -> str:
    if preset.kind in ("data", "bench"):
        failed = sum(1 for r in preset.rows if not any(e.values or e.texts for (row, _), e in grid.items()
                                                       if row == r.label))
        source = (f"Scale: {scale}; dataset summaries as `distil-data` computes them (no training)"
                  if preset.kind == "data" else measured_by(preset, out_dir))
        return f"{source}; rows: {len(preset.rows) - failed} done, {failed} failed."
    runs = runs_of(cells)
    problems = [cell_problem(cell) for cell in runs]
    done = problems.count(None)
    not_run = sum(map(waiting, problems))
    improving = sum(still_improving(student_steps(cell.metrics))
                    for cell, problem in zip(runs, problems, strict=True) if problem is None)
    seeds = ", ".join(str(s) for s in sorted({cell.seed for cell in cells})) or "none"
    return "\n".join([f"Scale: {scale}; seeds: {seeds}; cells: {done} done ({improving} {STILL_IMPROVING}), "
                      f"{len(problems) - done - not_run} failed, {not_run} not run.", *teacher_mismatches(runs)])


def measured_by(preset: TablePreset, out_dir: Path | None) -> str:
    """Where a bench table's numbers come from: the command, machine, code and time `distil table`
    recorded when it measured them, or the bench command on this machine (`make bench` ran it)."""
    from distil.common.provenance import measured_on
    from distil.tables.ledger import current_record

    csv = bench_csv(out_dir, preset.bench) if out_dir is not None else None
    saved = current_record(csv, bench_record(csv)) if csv is not None else None
    if not (saved and "machine" in saved):  # measured by `make bench`, or rewritten since
        return f"Measured by `{BENCHES[preset.bench]}` on this machine ({preset.bench}.csv, no record of when)"
    return f"Measured by {measured_on(saved)}"


def teacher_mismatches(runs: list[Cell]) -> list[str]:
    """One line per teacher content key whose runs record different test scores: the same key, so
    the same config, but different weights (fine-tuned on machines whose arithmetic differs, or a
    changed library): the cells that read it disagree on their teacher, and this says so."""
    scores: dict[str, Counter] = defaultdict(Counter)
    for cell in runs:
        metrics = cell.metrics or {}
        key = (metrics.get("artifacts") or {}).get("teacher")
        test = (metrics.get("teacher") or {}).get("test") or {}
        metric = metrics.get("metric")
        if key and isinstance(test.get(metric), float):
            scores[key][f"{100 * test[metric]:.2f}"] += 1
    return [f"Teacher {key}: its runs record test {texts}: one key, different weights (fine-tuned on another "
            f"machine or library); each run reads the teacher it had."
            for key, found in scores.items() if len(found) > 1
            for texts in [" and ".join(f"{score} ({n} run{'s' * (n > 1)})" for score, n in found.items())]]


def markdown_table(shown: pd.DataFrame) -> str:
    # the strings as formatted ("80.00", not tabulate's 80); numbers right-aligned, labels left
    return to_markdown(shown, disable_numparse=True, colalign=("left",) + ("right",) * len(shown.columns))


def delta_units(preset: TablePreset) -> str:
    """What a Δ is in: percentage points where every column is a percent; where some are not (a count,
    a ratio), which columns the points are of."""
    percent = [column.label for column in preset.columns if column_format(preset, column.label) == "percent"]
    if len(percent) == len(preset.columns) and (percent or preset.format == "percent"):
        return " (percentage points)"
    return f" (percentage points in {', '.join(percent)}; the others in their own units)" if percent else ""


def markdown(preset: TablePreset, shown: pd.DataFrame, foot: str, order: str = "") -> str:
    lines = [f"<!-- table: {preset.name} -->", f"### {heading(preset)}", "", markdown_table(shown), ""]
    legend = [f"Paper's metric: {preset.paper_metric}."] if preset.paper_metric else []
    if preset.paper_values:
        legend.append(f"Δ = ours − paper{delta_units(preset)}.")
    if preset.kind == "sweep":
        legend.append("Several seeds: mean ± sample std (n = seeds with a number). \"still improving\": seeds whose "
                      "run stopped at an epoch cap with its last epoch its best on dev, in some step of its schedule.")
    if preset.select:
        legend.append(f"Each run is the best on {preset.select['by']} of {', '.join(preset.select['over'])} "
                      "(chosen on dev; test only reported).")
    if legend:
        lines.append(" ".join(legend))
    if order:
        lines += ["", order]
    if preset.notes:
        lines += ["", preset.notes.strip()]
    lines += ["", foot, ""]
    return "\n".join(lines)


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                 "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_SYMBOLS = {"±": r"$\pm$", "Δ": r"$\Delta$", "−": "-", "–": "--", "…": r"\dots{}"}


def latex_escape(text: str) -> str:
    return "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)


def latex(preset: TablePreset, shown: pd.DataFrame) -> str:
    """The same strings as the md, escaped for LaTeX; ± and Δ as math so plain pdflatex reads it."""
    escaped = shown.rename(index=latex_escape, columns=latex_escape).map(latex_escape)
    escaped.index.name = latex_escape(shown.index.name or "")
    text = escaped.to_latex(caption=latex_escape(heading(preset)), label=f"tab:{preset.name}")
    for symbol, command in LATEX_SYMBOLS.items():
        text = text.replace(symbol, command)
    return text


def write_plot(preset: TablePreset, cells: list[Cell], grid: dict, rows: list[str],
               columns: list[str | None], path: Path) -> Path:
    from distil.tables import plots

    kind = preset.plot.get("kind", "line")
    ylabel = axis_label(plot_y(preset), preset.format)
    if kind == "scatter":
        paper = paper_points(preset)
        xs, ys = scatter_entries(preset, cells)  # aggregated once: the points and their spreads
        points, prefix = scatter_points(xs, ys), preset.plot.get("references")
        references = [p for p in points if prefix and p[0].startswith(prefix)]
        xlabel = preset.plot.get("xlabel") or axis_label(preset.plot["x"], "number")
        return plots.scatter([p for p in points if p not in references], xlabel,
                             with_papers(ylabel, preset, bool(paper)), heading(preset), path, paper=paper,
                             references=references, frontier=preset.plot.get("frontier"),
                             xscale=preset.plot.get("xscale", "linear"), spreads=scatter_spreads(xs, ys))
    by_rows = preset.plot.get("x") == "rows" or columns == [None]  # one column: x = its rows (stages)
    xs, lines = (rows, columns) if by_rows else (columns, rows)

    def at(line: str | None, x: str | None) -> tuple[str, str | None]:
        return (x, line) if by_rows else (line, x)

    series = {str(line) if line is not None else "": (
        [e.mean if (e := grid.get(at(line, x))) else None for x in xs],
        [e.std if (e := grid.get(at(line, x))) else None for x in xs],
        [paper_value(preset, *at(line, x)) for x in xs]) for line in lines}
    drawn = any(v is not None for _, _, paper in series.values() for v in paper)
    return plots.line([str(x) for x in xs], series, with_papers(ylabel, preset, drawn), heading(preset), path)


def plot_y(preset: TablePreset) -> str:
    """The metrics.json path a plot draws on its y axis."""
    return preset.plot.get("y", preset.value)


def axis_label(path: str, value_format: str) -> str:
    """What our numbers on an axis are, from their metrics.json path: `student.test.accuracy` ->
    'test accuracy (%)'. Not the paper's metric: at cpu scale it is often another dataset."""
    words = path.split(".")
    words = words[1:] if words[0] == "student" and len(words) > 1 else words
    return " ".join(words).replace("_", " ") + (" (%)" if value_format == "percent" else "")


def with_papers(label: str, preset: TablePreset, papers_drawn: bool) -> str:
    """The paper's metric beside ours where the plot also shows the paper's numbers."""
    return f"{label}; the paper's: {preset.paper_metric}" if papers_drawn and preset.paper_metric else label


def paper_points(preset: TablePreset) -> list[tuple[str, float, float]]:
    """(row, x, y) of the paper, for rows with both a `plot.paper_x` (the paper's x, e.g. its speed-up)
    and a paper value (e.g. Table 16: the paper's F1 against its batch-32 speed-up)."""
    paper_x = preset.plot.get("paper_x") or {}
    # where the columns read several numbers of one run (F1, params, speed-up), the paper's y is the
    # column that reads the plot's y
    column = next((axis.label for axis in preset.columns if axis.value == plot_y(preset)), None)
    return [(row, float(x), y) for row, x in paper_x.items() if (y := paper_value(preset, row, column)) is not None]


def scatter_points(xs: dict, ys: dict) -> list[tuple[str, float, float]]:
    """(label, x, y) per (row, column) of scatter_entries: the mean over its seeds; x as it is in
    metrics.json, y in the table's units."""
    return [(point_label(key), xs[key].mean, ys[key].mean) for key in xs]


def scatter_spreads(xs: dict, ys: dict) -> dict[str, float]:
    """Each point's y spread over its seeds (sample std; points of one seed have none)."""
    return {point_label(key): ys[key].std for key in xs if ys[key].std is not None}


def scatter_entries(preset: TablePreset, cells: list[Cell]) -> tuple[dict, dict]:
    """x and y over the seeds of each (row, column) that has both numbers."""
    x_path, y_path = preset.plot["x"], plot_y(preset)
    # a column that only picks what is read (value) is the same run as its row's other columns: one point
    runs = {(c.row, None if (axis := preset.column(c.column)) is not None and axis.value else c.column,
             c.seed): c for c in cells if cell_problem(c) is None}
    # each row's point as it reads its runs (a deployed form: its own latency and score)
    xs = aggregate([read_sample("number", row, column, c.metrics, x) for (row, column, _), c in runs.items()
                    if (x := row_path(preset, row, x_path)) is not None])
    ys = aggregate([read_sample(preset.format, row, column, c.metrics, y) for (row, column, _), c in runs.items()
                    if (y := row_path(preset, row, y_path)) is not None])
    both = [key for key in xs if key in ys and xs[key].values and ys[key].values]
    return {key: xs[key] for key in both}, {key: ys[key] for key in both}


def point_label(key: tuple[str, str | None]) -> str:
    return key[0] if key[1] is None else f"{key[0]} / {key[1]}"
