"""The rows of a search's frontier table (a preset's `frontier`, e.g. frontier-sst2) as the comparison reads
them (distil.search.against_frontier): each row's test scores over its seeds and its latency, from the
table's finished cells (here, else the tracked record in results/cells: a fresh clone has them too).

Latency, in the unit both sides share: the frontier table times every student in one interleaved run
(distil.tables.timing), and the search's reference student is one of its cells (sst2: the BiLSTM d1
cell at seed 1). So a row's latency is read as the search reads a trial's: the median, over the passes
of every seed, of the row's per-pass seconds over the reference row's in the same pass, a ratio no
machine's speed moves. Where the reference is not a row of the table, rows compare in ms, from two
timing runs (say so beside them).
"""

from __future__ import annotations

import statistics
from pathlib import Path

from distil.search.against_frontier import FrontierRow
from distil.search.preset import TIMING_FIELDS, median_ms
from distil.tables.cells import collect, expand
from distil.tables.load import load_preset
from distil.tables.preset import DEPLOYED_READS
from distil.tables.render import read_path, row_path

RATIO, MS = "vs_reference", "ms"  # the comparison's latency unit: a Pareto csv column of the same name
PEER_FAMILY = "peer-"  # distil/conf/student/peer-*.yaml: another tool's model


def runs_by_row(table: str, root: Path) -> tuple[object, dict[str, dict[int, object]]]:
    """(the table's preset, row -> seed -> its cell with metrics) at the cpu scale."""
    preset = load_preset(table)
    rows: dict[str, dict[int, object]] = {}
    for cell in collect(expand(preset, "cpu"), root):  # one cell per column: the same run, read once
        rows.setdefault(cell.row, {}).setdefault(cell.seed, cell)
    return preset, rows


def finished(cell) -> bool:
    return cell.error is None and cell.metrics is not None and cell.metrics.get("status") == "ok"


def timing_of(metrics: dict, reads: str) -> dict | None:
    """The row's timing record: the eager student's, or its deployed form's (None: not timed)."""
    timing = metrics.get("timing")
    if not isinstance(timing, dict):
        return None
    return timing.get(reads) if reads in DEPLOYED_READS else timing


def pass_ratios(own: dict, reference: dict, latency: str) -> list[float]:
    field = TIMING_FIELDS[latency]
    return [a / b for a, b in zip(own["seconds"][field], reference["seconds"][field], strict=True)]


def frontier_rows(table: str, metric: str, seed: int, reference: str | None, latency: str,
                  root: Path) -> tuple[list[FrontierRow], str]:
    """(every row but the teacher's, the latency unit: RATIO where the reference cell `reference` is the
    table's run of a row at `seed`, else MS)."""
    from distil.tables.timing import DEPLOYED  # timing.json's form -> its backend (imports torch: only here)

    preset, rows = runs_by_row(table, root)
    reference_row = next((row for row, seeds in rows.items() if preset.reads_of(row) == "student"
                          and seed in seeds and seeds[seed].key == reference), None)
    unit = RATIO if reference_row is not None else MS
    found = []
    for axis in preset.rows:
        if axis.reads == "teacher":
            continue
        runs = {s: cell for s, cell in sorted(rows.get(axis.label, {}).items()) if finished(cell)}
        path = row_path(preset, axis.label, f"student.test.{metric}")
        values, ms, ratios = [], [], []
        for s, cell in runs.items():
            try:
                values.append(float(read_path(cell.metrics, path)))
            except KeyError:  # a deployed form's score comes with the table's timing
                continue
            timing = timing_of(cell.metrics, axis.reads)
            if timing is None:
                continue
            ms.append(median_ms(timing, latency))
            if reference_row is not None and s in rows[reference_row] and finished(rows[reference_row][s]):
                anchor = timing_of(rows[reference_row][s].metrics, "student")
                ratios += pass_ratios(timing, anchor, latency) if anchor is not None else []
        overrides = next(iter(rows.get(axis.label, {}).values())).overrides if axis.label in rows else []
        student = next((o.partition("=")[2] for o in reversed(overrides) if o.startswith("student=")), "")
        timed = ms and (unit == MS or ratios)
        at_seed = rows.get(axis.label, {}).get(seed)
        found.append(FrontierRow(
            label=axis.label, values=values,
            latency=None if not timed else statistics.median(ratios if unit == RATIO else ms),
            ms=statistics.median(ms) if ms else None, student=student, peer=student.startswith(PEER_FAMILY),
            run=(at_seed.key, DEPLOYED.get(axis.reads, "eager")) if at_seed is not None else None))
    return found, unit
