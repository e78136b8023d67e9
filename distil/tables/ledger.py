"""The tracked record of finished table cells: `results/cells/<key>.json`, one small file per run.

outputs/ is not in git, and each machine this project runs on starts without it: before this record,
every new machine ran every table cell again, so the ~15 hours of cpu tables never added up across
sessions. Now a finished cell's metrics.json (with its timing.json, when its table times students) is
copied here whenever its table is written, and committed with the table; a fresh clone's
`distil-table` reads a cell from here when `outputs/cells/<key>/` has no result, and does not run it
again. The key is the cell's content key (its composed config and KEY_VERSION), so a changed preset
or config is another key and runs; only finished cells (status ok) are recorded.

A bench table's csv (speed and size measurements, distil.tables.run.run_bench) is recorded the same
way, as `results/bench/<bench>.csv` with `<bench>.json` beside it: the command, overrides, machine,
code version and time it was measured with (distil.common.provenance), so a fresh clone renders it
with where it came from instead of leaving the table out.

The root is $DISTIL_RESULTS, else ./results (the checkout's, like ./outputs); tests point it at a
temporary directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from distil.common.atomic import write_json_atomic

if TYPE_CHECKING:  # pandas loads only when a bench records
    import pandas as pd

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


def bench_paths(bench: str, root: Path | None = None) -> tuple[Path, Path]:
    """The recorded csv of a bench and its provenance json."""
    folder = (root or results_root()) / "bench"
    return folder / f"{bench}.csv", folder / f"{bench}.json"


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def current_record(csv: Path, record: Path) -> dict | None:
    """The json record measured with `csv`, or None: no csv, no record, or a csv rewritten since."""
    try:
        saved = json.loads(record.read_text())
        return saved if saved.get("csv_sha256") == file_digest(csv) else None
    except (OSError, ValueError, AttributeError):
        return None


def record_bench(csv: Path, provenance: dict, root: Path | None = None) -> None:
    """Record a bench csv just measured, its md table where the bench writes one (the benchmarks page
    shows it), and its provenance (with the csv's digest)."""
    saved_csv, saved_json = bench_paths(csv.stem, root)
    saved_csv.parent.mkdir(parents=True, exist_ok=True)
    if not (saved_csv.exists() and saved_csv.samefile(csv)):  # a bench told to write into the ledger itself
        shutil.copyfile(csv, saved_csv)
        if csv.with_suffix(".md").is_file():
            shutil.copyfile(csv.with_suffix(".md"), saved_csv.with_suffix(".md"))
    write_json_atomic(saved_json, {**provenance, "csv_sha256": file_digest(saved_csv)})


def recorded_bench(bench: str, root: Path | None = None) -> tuple[Path, dict] | None:
    """The recorded csv and its provenance, or None: no record, or a csv changed since (not its numbers)."""
    saved_csv, saved_json = bench_paths(bench, root)
    try:
        provenance = json.loads(saved_json.read_text())
    except (OSError, ValueError):
        return None
    if not saved_csv.is_file() or provenance.get("csv_sha256") != file_digest(saved_csv):
        return None
    return saved_csv, provenance


def record_rows(stem: str, row: dict, columns: tuple[str, ...], heading: str, footer: str,
                provenance: dict) -> pd.DataFrame:
    """A measured row beside the tracked record's rows of other code versions or machines (one row per
    version and machine: a version measured again on the same machine replaces its row), written as
    <stem>.{csv,md} to results/bench with its provenance: how `make bench-suite` and `make
    bench-fresh-clone` keep their numbers. Each row names its machine (the provenance's): the json
    beside the record keeps only the last measurement's, and rows of different CPUs sit in one table."""
    import tempfile

    import pandas as pd

    from distil.bench.harness import markdown
    from distil.common.atomic import write_atomic

    row = {**row, "machine": provenance["machine"]}
    columns = (*columns, "machine")
    saved = recorded_bench(stem)
    earlier = [] if saved is None else pd.read_csv(saved[0]).to_dict("records")
    kept = [r for r in earlier if (r["code"], r.get("machine")) != (row["code"], row["machine"])]
    frame = pd.DataFrame([*kept, row], columns=list(columns))
    with tempfile.TemporaryDirectory() as tmp:
        csv = Path(tmp, f"{stem}.csv")
        write_atomic(csv, frame.to_csv(index=False))
        write_atomic(csv.with_suffix(".md"), f"### {heading}\n\n{markdown(frame)}\n\n{footer}\n")
        record_bench(csv, provenance)
    return frame
