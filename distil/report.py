"""`distil-report <dir>`: one table from the metrics.json files of a sweep (and nothing else)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
from rich.console import Console
from rich.table import Table

CHOICES = ("teacher", "student", "schedule", "dataset", "transfer_size", "seed")


def collect(root: Path) -> pd.DataFrame:
    rows = []
    for path in sorted(root.rglob("metrics.json")):
        metrics = json.loads(path.read_text())
        choices = metrics.get("choices", {})
        row = {"run": str(path.parent.relative_to(root)) or ".", **{c: choices.get(c) for c in CHOICES},
               "overrides": metrics.get("overrides", [])}
        row["status"] = metrics.get("status", "unknown")
        if row["status"] == "ok":
            teacher, student, metric = metrics["teacher"], metrics["student"], metrics["metric"]
            row.update({
                "metric": metric,
                **score_columns(metrics),
                "teacher_params_M": teacher["params"] / 1e6,
                "student_params_M": student["params"] / 1e6,
                "speedup": metrics.get("speed", {}).get("speedup"),
                "minutes": metrics.get("seconds", 0) / 60,  # the whole run: what a schedule costs
                "warnings": "; ".join(metrics.get("warnings", [])),  # distil.flags: ok, but suspect
            })
        rows.append(row)
    table = pd.DataFrame(rows)
    if not table.empty:
        # Keep only the overrides that tell cells apart (the swept ones) and that no
        # choice column already shows (`schedule=d1` is the schedule column).
        shared = set.intersection(*(set(o) for o in table["overrides"]))
        table["overrides"] = [" ".join(o for o in row if o not in shared and o.split("=")[0] not in CHOICES)
                              for row in table["overrides"]]
    return table


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
    table.to_csv(csv, index=False, float_format="%.4f")
    md.write_text(table.to_markdown(index=False, floatfmt=".2f") + "\n")
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


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="distil-report",
        description="Build table.md and table.csv from every metrics.json under a run or sweep directory.",
    )
    parser.add_argument("directory", type=Path, help="a multirun (sweep) or run directory")
    args = parser.parse_args(argv)
    if not args.directory.is_dir():
        print(f"distil-report: error: {args.directory} is not a directory; pass a run or multirun "
              "directory (e.g. outputs/multirun/<date>/<time>)", file=sys.stderr)
        sys.exit(2)
    table = collect(args.directory)
    if table.empty:
        print(f"distil-report: error: no metrics.json under {args.directory}; point it at a "
              "directory written by `distil` or `distil -m`", file=sys.stderr)
        sys.exit(2)
    print_table(table, str(args.directory))
    md, csv = write_tables(table, args.directory)
    print(f"wrote {md} and {csv}")


if __name__ == "__main__":
    main()
