"""The tracked record of finished table cells: `results/cells/<key>.json`, one small file per run.

outputs/ is not in git, and each machine this project runs on starts without it: before this record,
every new machine ran every table cell again, so the ~15 hours of cpu tables never added up across
sessions. Now a finished cell's metrics.json (with its timing.json, when its table times students) is
copied here whenever its table is written, and committed with the table; a fresh clone's
`distil-table` reads a cell from here when `outputs/cells/<key>/` has no result, and does not run it
again. The key is the cell's content key (its composed config and KEY_VERSION), so a changed preset
or config is another key and runs; only finished cells (status ok) are recorded.

The root is $DISTIL_RESULTS, else ./results (the checkout's, like ./outputs); tests point it at a
temporary directory.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from distil.common.atomic import write_json_atomic

RESULTS_ENV = "DISTIL_RESULTS"


def results_root() -> Path:
    return Path(os.environ.get(RESULTS_ENV, "results")).resolve()


def entry_path(key: str, root: Path | None = None) -> Path:
    return (root or results_root()) / "cells" / f"{key}.json"


def recorded(key: str, root: Path | None = None) -> dict | None:
    """The finished cell's metrics as recorded, or None. A torn or foreign file is no record: the cell
    is looked up in outputs/ or run again, never read as a number."""
    path = entry_path(key, root)
    try:
        metrics = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return metrics if isinstance(metrics, dict) and metrics.get("status") == "ok" else None


def record(key: str, metrics: dict, root: Path | None = None) -> bool:
    """Record a finished cell's metrics (timing included) unless the same are there; whether it wrote."""
    if metrics.get("status") != "ok" or recorded(key, root) == metrics:
        return False
    write_json_atomic(entry_path(key, root), metrics)
    return True
