"""`distil report <dir>`: table.md and table.csv from every metrics.json of a run or sweep directory."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distil.cli.parsing import Parser, run_guarded

EXAMPLES = """\
examples:
  distil report outputs/multirun/<date>/<time>     # -> table.md and table.csv in that directory
  distil report outputs/multirun/schedules-xd      # a named sweep (make schedules-xd)
"""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil report", "Build table.md and table.csv from every metrics.json under a run or "
                                           "sweep directory.", EXAMPLES)
    parser.add_argument("directory", type=Path, help="a multirun (sweep) or run directory")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil report") -> int:
    from distil.tables.report import collect, print_table, write_tables  # pandas: only past --help

    args = build_parser(prog).parse_args(argv)
    if not args.directory.is_dir():
        print(f"{prog}: error: {args.directory} is not a directory; pass a run or multirun "
              "directory (e.g. outputs/multirun/<date>/<time>)", file=sys.stderr)
        sys.exit(2)
    table = collect(args.directory)
    if table.empty:
        print(f"{prog}: error: no metrics.json under {args.directory}; point it at a "
              "directory written by `distil` or `distil -m`", file=sys.stderr)
        sys.exit(2)
    print_table(table, str(args.directory))
    md, csv = write_tables(table, args.directory)
    failed = int((table["status"] != "ok").sum())
    print(f"{failed} of {len(table)} cells failed; wrote {md} and {csv}")  # exit 0: the table is written
    return 0


def alias() -> None:
    """`distil-report`, kept for one release."""
    sys.exit(run_guarded(main, None, "distil-report"))
