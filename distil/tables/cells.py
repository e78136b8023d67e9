"""A table's cells: the runs that fill it, each keyed by the config it composes to.

`expand(preset, scale)` lists them (base + row + column + `seed=<s>`, for every seed) and keys
each by a hash of its composed config, leaving out what cannot change its result (paths, Hydra's
settings, threads, speed timing, checkpoint frequency). A cell's directory is `<outputs>/cells/<key>/`,
so two tables that name the same run share it, and a finished one is never run again.
`collect(cells, root)` reads each cell's metrics.json back.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

from omegaconf import DictConfig, OmegaConf

from distil.config.compose import ComposeProblem, compose_overrides
from distil.config.overrides import CONFIG_DIR_ENV
from distil.config.schema import without_defaults
from distil.errors import DistilError
from distil.run.sweep import INTERRUPTED_STATUS
from distil.tables import config_store, ledger
from distil.tables.preset import Axis, Cell, TablePreset

KEY_VERSION = 2  # bump when what a key covers changes: every cell then runs again
# Settings that change where a run writes and how fast it goes, not what a table reports
# (threads may move a sum's last float digits, never a table's number): two tables' runs that
# differ only in these are one cell.
NOT_RESULT = {"paths": None, "hydra": None, "trainer": ("threads", "speed_examples", "checkpoint_every_seconds"),
              "runtime": ("device",),  # one recipe on any device (make gpu-check holds them equal)
              # a file that is not UTF-8: an error (strict) or read with U+FFFD (replace); every run that
              # finishes under both read the same texts (BBC News, which sets replace, fails under strict)
              "dataset": ("encoding_errors",),
              "tracking": None}  # what a run logs to TensorBoard or MLflow, not what it computes
KEY_LENGTH = 16
# Every table cell runs the recipe of the recorded cells: its teacher's min_steps always holds (the
# default job stops earlier, conf/config.yaml), and it computes in fp32 on every machine (the default
# job's auto is bf16 where the CPU or GPU has it natively). At their schema defaults, both leave every
# key as it was.
RECORDED_RECIPE = ("teacher.finetune.min_steps_while=always", "runtime.precision=fp32")
NOT_RUN = "not run"  # a cell's error while it waits to run (an interrupted one too): not a failure
NOT_TIMED = "not timed yet"  # a finished run's timing column before the table's timing step: not a failure


def cell_specs(preset: TablePreset, scale: str) -> list[tuple[str, str | None, int, list[str]]]:
    """(row, column, seed, overrides) of every cell at `scale`, without composing anything.
    Only a sweep has cells (a data table reads dataset summaries, a bench table bench.csv; their
    axes name datasets, fields and bench models), and a scale the preset does not define has none.
    Seed-major: every cell of the first seed comes before any of the second, so a sweep cut short
    (a session's end) leaves whole seeds of the table rather than some cells with every seed."""
    if preset.kind != "sweep" or scale not in preset.scales:
        return []
    base = preset.scales[scale]
    rows = preset.rows or [Axis(label="")]  # rows_from: one run per column, its stages/languages are the rows
    columns = preset.columns or [None]
    choices = selection_options(preset)
    return [(row.label, column and column.label, seed,
             [*RECORDED_RECIPE, *base.base, *row.overrides_for(scale), *(column.overrides_for(scale) if column else []),
              *([choice] if choice else []), f"seed={seed}"])
            for seed in base.seeds for row in rows for column in columns for choice in choices]


def selection_options(preset: TablePreset) -> list[str | None]:
    """The overrides a `select` tries for every (row, column, seed); [None] without one."""
    return list((preset.select or {}).get("over") or []) or [None]


def expand(preset: TablePreset, scale: str) -> list[Cell]:
    """Every cell of the table at `scale`, keyed; a bad override is a one-line error before anything runs."""
    options = [o for o in selection_options(preset) if o]
    return [Cell(row=row, column=column, seed=seed, overrides=overrides,
                 key=cell_key(overrides, f"table preset {preset.name}, cell {label(row, column, seed)}"),
                 choice=overrides[-2] if options else None)
            for row, column, seed, overrides in cell_specs(preset, scale)]


def label(row: str, column: str | None, seed: int) -> str:
    """`D1 x 5k seed 1`: how a cell is named in messages and progress lines."""
    return " x ".join(part for part in (row, column) if part) + f" seed {seed}"


def cell_key(overrides: list[str], where: str = "cell") -> str:
    """The key of the run these overrides make: a hash of its composed config, without NOT_RESULT.
    The seed is set after composing (it is only `seed`), so a table's seeds share one composition."""
    *rest, seed = overrides
    if not seed.startswith("seed="):
        raise ValueError(f"a cell's overrides end with seed=<s>: {overrides}")
    try:
        config = copy.deepcopy(_result_config(tuple(rest), os.environ.get(CONFIG_DIR_ENV)))
    except ComposeProblem as problem:
        raise DistilError(f"{where}: {problem}; fix the preset") from problem.__cause__
    config["seed"] = int(seed.partition("=")[2])
    text = json.dumps({"key_version": KEY_VERSION, "config": config}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:KEY_LENGTH]


# a cell named by several tables, every seed of one, and every column that only picks a metric: composed once
# in a process, and once at all until a config file or the code changes (config_store)
@lru_cache(maxsize=1024)
def _result_config(overrides: tuple[str, ...], config_dirs: str | None) -> dict:
    return config_store.stored(overrides, config_dirs, lambda: _composed_result(overrides, config_dirs))


def _composed_result(overrides: tuple[str, ...], config_dirs: str | None) -> dict:
    """The composed config as plain data, interpolations unresolved (so `${paths.data_dir}` inside a
    dataset's file names does not make the key depend on where the data lives), without NOT_RESULT."""
    cfg = compose_overrides(overrides, config_dirs)
    config = without_defaults(OmegaConf.to_container(cfg, resolve=False), cfg)
    for group, keys in NOT_RESULT.items():
        if keys is None:
            config.pop(group, None)
        else:
            for key in keys:
                config.get(group, {}).pop(key, None)
    # a group left empty is a group at its defaults (augment=none), or one whose settings change no
    # result (runtime.device): as if the group did not exist, so a group added to the config later
    # leaves every existing key as it was
    return {group: values for group, values in config.items() if values != {}}


def compose_cell(overrides: Sequence[str], config_dirs: str | None, where: str) -> DictConfig:
    """The config `distil` composes from these overrides (without running anything)."""
    try:
        return compose_overrides(overrides, config_dirs)
    except ComposeProblem as problem:
        raise DistilError(f"{where}: {problem}; fix the preset") from problem.__cause__


def waiting(problem: str | None) -> bool:
    """Whether a cell's problem is that it has not run yet ("not run", or a selection still missing
    some of its runs: "not run: 1 of 4 runs to select from") or not been timed yet, not that it failed."""
    return problem is not None and (problem.startswith(NOT_RUN) or problem == NOT_TIMED)


def runs_of(cells: list[Cell]) -> list[Cell]:
    """One cell per run, the first that names it: columns that only read another field of one run
    (a frontier table's accuracy, params, speed) and tables that share a run count it once."""
    first: dict[str, Cell] = {}
    for cell in cells:
        first.setdefault(cell.key, cell)
    return list(first.values())


def cell_dir(root: Path, key: str) -> Path:
    return Path(root) / "cells" / key


TIMING_FILE = "timing.json"  # written by distil.tables.timing for tables with `timing: true`


def collect(cells: list[Cell], root: Path) -> list[Cell]:
    """Fill each cell's metrics and error (`result_of`); returns the cells."""
    for cell in cells:
        cell.metrics, cell.error, cell.recorded = result_of(root, cell.key)
    return cells


class Result(NamedTuple):
    metrics: dict | None
    error: str | None  # None: a finished cell
    recorded: bool  # the number is the tracked record's, not a run here


def result_of(root: Path, key: str) -> Result:
    """A cell's (metrics, error, recorded): its run in `<root>/cells/<key>/` (metrics.json, with its timing.json under
    `timing` if the student was timed, see distil.tables.timing); when that run has no number, the
    tracked record of the cell (distil.tables.ledger: a finished cell of another machine); else why
    there is no number."""
    directory = cell_dir(root, key)
    metrics, error = read_result(directory / "metrics.json")
    if error is not None and (kept := ledger.recorded(key)) is not None:
        return Result(kept, None, recorded=True)
    timing = directory / TIMING_FILE
    if metrics is not None and timing.is_file():
        metrics = {**metrics, "timing": json.loads(timing.read_text())}
    return Result(metrics, error, recorded=False)


def read_result(path: Path) -> tuple[dict | None, str | None]:
    """(metrics, None) for a finished run; (metrics or None, why there is no number) otherwise."""
    if not path.exists():
        return None, NOT_RUN
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        return None, f"unreadable metrics.json ({type(error).__name__}: {error}); delete {path.parent} to run it again"
    status = metrics.get("status") if isinstance(metrics, dict) else None
    if status == "ok":
        return metrics, None
    if status == INTERRUPTED_STATUS:  # stopped, not failed: the next run of the table resumes it
        return metrics, f"{NOT_RUN} (interrupted)"
    if isinstance(status, str) and status.startswith("failed"):
        return metrics, status
    return None, f"unreadable metrics.json (status {status!r}); delete {path.parent} to run it again"
