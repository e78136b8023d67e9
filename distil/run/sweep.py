"""Resuming an interrupted sweep: re-run it into the same sweep directory
(`distil -m ... hydra.sweep.dir=<dir>`, as the Makefile targets do) and the cells that already
finished are skipped, while failed, crashed and missing ones run again.

A cell counts as finished when its directory holds a metrics.json with `status: ok` written
for the same overrides: a cell number reused by a changed sweep runs again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode

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
