"""Resuming an interrupted sweep: re-run it into the same sweep directory
(`distil -m ... hydra.sweep.dir=<dir>`, as the Makefile targets do) and the cells that already
finished are skipped, while failed, crashed and missing ones run again.

A cell counts as finished when its directory holds a metrics.json with `status: ok` written
for the same overrides: a cell number reused by a changed sweep runs again.

A failed cell is recorded in its metrics.json and the sweep goes on; `SweepFailures`, a Hydra
callback (conf/config.yaml), reads those files when the sweep ends, so `distil -m` exits non-zero
whichever launcher ran the cells (a joblib worker or a SLURM job is another process: what it kept
in memory never reaches the command that started the sweep).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig

log = logging.getLogger(__name__)
INTERRUPTED_STATUS = "failed: interrupted"  # metrics.json of a run stopped by Ctrl-C or SIGTERM: rerun to resume


def finished_metrics(run_dir: Path, overrides: list[str]) -> dict | None:
    """The cell's metrics.json if it ended `ok` with these overrides, else None."""
    try:
        metrics = json.loads((run_dir / "metrics.json").read_text())
    except (OSError, ValueError):  # missing, or half-written by a killed run: run the cell
        return None
    if not isinstance(metrics, dict) or metrics.get("status") != "ok":
        return None
    if sorted(map(str, metrics.get("overrides") or [])) != sorted(overrides):
        return None
    return metrics


def skip_finished_cell(run_dir: Path, overrides: list[str]) -> dict | None:
    """In a sweep, the metrics of this cell if an earlier run of the sweep finished it (the
    caller then returns without running it); None in a single run or when the cell must run."""
    hydra_cfg = HydraConfig.get()
    if hydra_cfg.mode != RunMode.MULTIRUN:
        return None
    metrics = finished_metrics(run_dir, overrides)
    if metrics is not None:
        log.info("cell %s already done; skipping (%s has status ok)", hydra_cfg.job.num, run_dir / "metrics.json")
    return metrics


def dev_score(metrics: dict) -> float:
    """What a sweeper optimises: the student's dev score, never test."""
    return metrics["student"]["dev"][metrics["metric"]]


# The failed cells of the sweep that just ended in this process (SweepFailures fills it).
FAILED_CELLS: list[str] = []


def failed_cells(sweep_dir: Path, since: float) -> list[str]:
    """The cell directories under `sweep_dir` whose metrics.json, written at `since` or later (this
    sweep's, not an earlier one's in a reused directory), says the cell failed."""
    failed = []
    for path in sorted(sweep_dir.glob("*/metrics.json")):
        try:
            if path.stat().st_mtime < since:
                continue
            status = json.loads(path.read_text()).get("status", "")
        except (OSError, ValueError, AttributeError):  # unreadable: a cell killed mid-write failed too
            status = "failed"
        if str(status).startswith("failed"):
            failed.append(str(path.parent))
    return failed


class SweepFailures(Callback):
    """After a sweep (in the process that started it), its failed cells from their metrics.json."""

    started = 0.0  # when this sweep began: older metrics.json files are an earlier sweep's

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        FAILED_CELLS.clear()
        self.started = time.time() - 1  # file times may be rounded to the second

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        FAILED_CELLS[:] = failed_cells(Path(str(config.hydra.sweep.dir)), self.started)
