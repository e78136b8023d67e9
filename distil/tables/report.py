"""`distil report <dir>` (distil/cli/report.py): one table from the metrics.json files of a sweep (and nothing else)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import yaml
from rich.console import Console
from rich.table import Table

from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown

CHOICES = ("teacher", "student", "schedule", "dataset", "transfer_size", "augment", "seed")


NO_METRICS = "failed: no metrics.json (crashed or still running)"


def collect(root: Path) -> pd.DataFrame:
    """One row per cell: every directory with a metrics.json or Hydra's .hydra/ (a cell that
    crashed before writing metrics.json still has it). A damaged metrics.json is a failed row
    and a one-line warning, never the end of the report."""
    rows = [cell_row(cell, root) for cell in cell_dirs(root)]
    table = pd.DataFrame(rows)
    if not table.empty:
        # Keep only the overrides that tell cells apart (the swept ones) and that no
        # choice column already shows (`schedule=d1` is the schedule column).
        shared = set.intersection(*(set(o) for o in table["overrides"]))
        table["overrides"] = [" ".join(o for o in row if o not in shared and o.split("=")[0] not in CHOICES)
                              for row in table["overrides"]]
    return table


def cell_dirs(root: Path) -> list[Path]:
    cells = {p.parent for p in root.rglob("metrics.json")} | {p.parent for p in root.rglob(".hydra") if p.is_dir()}
    # cell 10 after cell 9, not after cell 1
    return sorted(cells, key=lambda cell: [(0, int(part), "") if part.isdigit() else (1, 0, part)
                                           for part in cell.relative_to(root).parts])


def cell_row(cell: Path, root: Path) -> dict:
    path = cell / "metrics.json"
    metrics, problem = read_metrics(path)
    row = {"run": str(cell.relative_to(root)) or "."}
    if metrics is None:
        if problem != NO_METRICS:
            warn(f"skipping {path}: {problem}")
            problem = f"failed: unreadable metrics.json: {problem}"
        return {**row, **launched_with(cell), "status": problem}
    choices = metrics.get("choices") or {}
    row.update({c: choices.get(c) for c in CHOICES}, overrides=list(metrics.get("overrides") or []),
               status=metrics.get("status", "unknown"))
    if row["status"] != "ok":
        return row
    try:
        return {**row, **result_columns(metrics)}
    except (KeyError, TypeError, ZeroDivisionError) as error:  # `ok` yet incomplete: edited or another version
        warn(f"skipping {path}: status ok but its results are incomplete ({type(error).__name__}: {error})")
        return {**row, "status": f"failed: unreadable metrics.json: status ok but no results ({error})"}


def read_metrics(path: Path) -> tuple[dict | None, str | None]:
    """(metrics, None), or (None, what is wrong with the file)."""
    try:
        metrics = json.loads(path.read_text())
    except FileNotFoundError:
        return None, NO_METRICS
    except OSError as error:
        return None, f"cannot read it ({error.strerror})"
    except ValueError as error:  # also a UnicodeDecodeError: binary garbage
        return None, f"not valid JSON ({error})"
    if not isinstance(metrics, dict):
        return None, f"not a JSON object but a {type(metrics).__name__}"
    return metrics, None


def launched_with(cell: Path) -> dict:
    """Choices and overrides of a cell without usable metrics, from what Hydra wrote before it ran."""
    choices = dict(read_yaml(cell, "hydra.yaml", "hydra", "runtime", "choices") or {})
    choices.update(seed=read_yaml(cell, "config.yaml", "seed"),
                   dataset=read_yaml(cell, "config.yaml", "dataset", "name") or choices.get("dataset"))
    overrides = read_yaml(cell, "overrides.yaml")
    return {**{c: choices.get(c) for c in CHOICES},
            "overrides": [str(o) for o in overrides] if isinstance(overrides, list) else []}


def read_yaml(cell: Path, name: str, *keys: str):
    """The value at `keys` in the cell's .hydra/<name>, or None if the file or a key is missing."""
    try:
        value = yaml.safe_load((cell / ".hydra" / name).read_text())
    except (OSError, ValueError, yaml.YAMLError):
        return None
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def result_columns(metrics: dict) -> dict:
    teacher, student = metrics["teacher"], metrics["student"]
    return {
        "metric": metrics["metric"],
        **score_columns(metrics),
        "teacher_params_M": teacher["params"] / 1e6,
        "student_params_M": student["params"] / 1e6,
        "speedup": metrics.get("speed", {}).get("speedup"),
        "minutes": metrics.get("seconds", 0) / 60,  # the whole run: what a schedule costs
        "warnings": "; ".join(metrics.get("warnings", [])),  # distil.run.flags: ok, but suspect
    }


def warn(message: str) -> None:
    print(f"distil-report: warning: {message}", file=sys.stderr)


def score_columns(metrics: dict) -> dict[str, float]:
    """Percent scores, per reported metric (the primary first, unsuffixed as it always was;
    the others `_<metric>`): teacher_test, student_dev, student_test, then teacher_<split>
    and student_<split> for every extra test split (MNLI's test_mismatched)."""
    primary = metrics["metric"]
    places = [("teacher", "test"), ("student", "dev"), ("student", "test"),
              *((who, split) for split in metrics.get("extra_tests", []) for who in ("teacher", "student"))]
    columns = {}
    for name in metrics.get("metrics", [primary]):
        suffix = "" if name == primary else f"_{name}"
        columns.update({f"{who}_{split}{suffix}": 100 * metrics[who][split][name] for who, split in places})
    return columns


def write_tables(table: pd.DataFrame, out_dir: Path) -> tuple[Path, Path]:
    md, csv = out_dir / "table.md", out_dir / "table.csv"
    write_atomic(csv, table.to_csv(index=False, float_format="%.4f"))
    write_atomic(md, to_markdown(table, index=False, floatfmt=".2f") + "\n")
    return md, csv


def print_table(table: pd.DataFrame, title: str) -> None:
    """Terminal view: choices shared by every cell go to the title, the rest are columns."""
    shared = [c for c in (*CHOICES, "metric", "overrides") if c in table and table[c].nunique(dropna=False) == 1]
    view = table.drop(columns=shared)
    view["status"] = view["status"].map(lambda s: "ok" if s == "ok" else "failed")
    rich_table = Table(title=f"{title}\n" + ", ".join(f"{c}={table[c].iloc[0]}" for c in shared
                                                       if c != "overrides"))
    for column in view.columns:
        rich_table.add_column(column, justify="right" if view[column].dtype.kind in "fi" else "left")
    for _, row in view.iterrows():
        rich_table.add_row(*("-" if pd.isna(v) else f"{v:.2f}" if isinstance(v, float) else str(v)
                             for v in row))
    console = Console()
    console.print(rich_table)
    for _, row in table[table["status"] != "ok"].iterrows():
        console.print(f"[red]{row['run']}[/red]: {row['status']}")
