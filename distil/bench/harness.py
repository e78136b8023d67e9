"""The one benchmark harness every bench and paper measurement shares: models timed in turn on the
same inputs, pass by pass, and every speed ratio taken pass by pass.

A busy machine slows whatever runs while it is busy. So models are not timed one after the other:
the inputs are cut into passes, and in pass k every model runs on pass k's inputs (the order reversed
every other pass). Each pass gives one ratio; a table reports the median of the per-pass ratios with
their min-max and the number of passes, so a pass that a neighbour disturbed moves the median little.
Every bench takes the same --passes/--threads/--quick/--out (add_bench_arguments), each with its own
defaults.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch
from rich.table import Table
from torch import nn

from distil.common.markdown import to_markdown

Batch = tuple[torch.Tensor, torch.Tensor]
Forward = Callable[[torch.Tensor, torch.Tensor], object]


@dataclass(frozen=True)
class Spread:
    """The median of per-pass values, with their min, max and number: a disturbed pass shows in the spread."""

    median: float
    min: float
    max: float
    passes: int


def spread(values: Sequence[float]) -> Spread:
    if not values:
        raise ValueError("no passes to summarise")
    return Spread(statistics.median(values), min(values), max(values), len(values))


def pass_ratios(reference_seconds: Sequence[float], model_seconds: Sequence[float]) -> list[float]:
    """How many times faster the model is than the reference, pass by pass (same inputs within a pass)."""
    return [reference / own for reference, own in zip(reference_seconds, model_seconds, strict=True)]


@torch.inference_mode()
def interleaved_seconds(forwards: dict[str, Forward], passes: Sequence[Sequence[Batch]],
                        clock: Callable[[], float] = time.perf_counter) -> dict[str, list[float]]:
    """Seconds each model takes on each pass's inputs. Within a pass the models run one after the other on
    the same inputs, in the given order on even passes and reversed on odd ones, so a neighbour's burst
    hits a teacher and its students alike and no model always runs first."""
    for forward in forwards.values():
        forward(*passes[0][0])  # warm-up: first-call allocations are not throughput
    names = list(forwards)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for k, inputs in enumerate(passes):
        for name in names if k % 2 == 0 else reversed(names):
            start = clock()
            for item in inputs:  # (ids, mask) here; whatever the forwards take elsewhere (student_timing)
                forwards[name](*item)
            seconds[name].append(clock() - start)
    return seconds


def count_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def split_passes(items: Sequence[Batch], passes: int) -> list[list[Batch]]:
    """Contiguous, near-equal slices, one per pass (every slice non-empty when passes <= len(items))."""
    n = len(items)
    return [list(items[i * n // passes: (i + 1) * n // passes]) for i in range(passes)]


def markdown(frame: pd.DataFrame) -> str:
    # None (not NaN) is what tabulate shows as missing: "-" for ratios a teacher row does not have.
    return to_markdown(frame.astype(object).where(frame.notna(), None), index=False, floatfmt=".2f", intfmt=",",
                       missingval="-")


def rich_table(frame: pd.DataFrame, title: str) -> Table:
    table = Table(title=title)
    for column in frame.columns:
        table.add_column(column, justify="right" if frame[column].dtype.kind in "fi" else "left")
    for row in frame.itertuples(index=False):
        table.add_row(*(_cell(value) for value in row))
    return table


def _cell(value: object) -> str:
    if value is None or value is pd.NA:
        return "-"
    if isinstance(value, float):
        return "-" if math.isnan(value) else f"{value:,.2f}"
    if isinstance(value, int):
        return f"{value:,}"
    if value == "not met":
        return "[red]not met[/red]"
    return "[green]met[/green]" if value == "met" else str(value)


def add_bench_arguments(parser: argparse.ArgumentParser, *, out: str, quick: str, passes: int | None = None,
                        passes_help: str | None = None, with_passes: bool = True, with_threads: bool = True) -> None:
    """--passes, --threads, --quick and --out, as every bench and paper command takes them; each command
    keeps its own defaults (`passes`, None where --quick decides) and says what its files are (`out`)."""
    if with_passes:
        parser.add_argument("--passes", type=int, default=passes,
                            help=passes_help or f"interleaved passes (default {passes})")
    if with_threads:
        parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default 2)")
    parser.add_argument("--quick", action="store_true", help=quick)
    parser.add_argument("--out", type=Path, default=Path("outputs/tables"), help=out)
    parser.add_argument("--no-record", dest="record", action="store_false",
                        help="an experiment: write --out only, not the tracked record in results/bench "
                             "(which a full measurement updates, for the benchmarks page)")
