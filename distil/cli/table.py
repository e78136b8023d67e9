"""`distil table`: run the missing cells of paper tables (distil/conf/table/*.yaml), then write the tables.

Each cell runs as the real `distil` command in a subprocess (--jobs at a time), into <outputs>/cells/<key>/;
a finished cell is skipped, so an interrupted table continues where it stopped (see distil/tables/run.py).
"""

from __future__ import annotations

import argparse
import sys

from distil.cli.parsing import Parser, run_guarded
from distil.common.console import console_command
from distil.common.interrupt import exit_on_interrupt

EXAMPLES = """\
examples:
  distil table xtremedistil-table3 [more names or preset files] [--scale cpu|paper]
  distil table --all                      # every papers' preset (make tables)
  distil table --all --set frontier       # the frontier tables (make frontier)
  distil table NAME --dry-run             # the cells, their keys, and which are done; runs nothing
  distil table --list                     # the presets and their cell counts per scale
  distil table NAME --render-only         # write NAME's table from the cells done so far; run nothing
  distil table NAME --only SST-2          # run only the cells of that row or column first (repeatable)
  distil table NAME --seed 1              # run only seed 1's cells (repeatable)
  distil table NAME --jobs 2              # two cells at a time, one core each on 2 cores
  distil table NAME --threads 1           # one core a cell: another table can run beside it
  distil table --frontier-targets         # the frontier targets on the frontier runs -> frontier-targets.{md,csv}
  distil table --all --render-only --pages  # every table from the recorded cells, then docs/results/ (make results)
"""


def interrupted(prog: str) -> str:
    return f"{prog}: interrupted; rerun the same command to continue (finished cells are not run again)"


def build_parser(prog: str) -> argparse.ArgumentParser:
    from distil.tables.preset import SCALES, SETS

    parser = Parser(prog, "distil table", "Run the missing cells of paper tables (distil/conf/table/*.yaml) and "
                                          "write outputs/tables/<name>.*", EXAMPLES)
    parser.add_argument("names", nargs="*", help="preset names (distil table --list) or preset files")
    parser.add_argument("--scale", choices=SCALES, default="cpu", help="which sweep of each preset (default cpu)")
    parser.add_argument("--all", action="store_true", help="every preset of the set (default: the papers' tables)")
    parser.add_argument("--set", choices=SETS, default="papers", dest="table_set",
                        help="which presets --all runs: papers (make tables) or frontier (make frontier)")
    parser.add_argument("--dry-run", action="store_true", help="print the cells and whether each is done; run none")
    parser.add_argument("--status", action="store_true",
                        help="one line per table: its cells done (and how many are results/cells records of "
                             "another machine) and the minutes they took; run none")
    parser.add_argument("--list", action="store_true", help="list the presets and their cell counts per scale")
    parser.add_argument("--render-only", action="store_true",
                        help="write the tables from the cells done so far (the rest show 'not run'); run nothing")
    parser.add_argument("--only", action="append", metavar="LABEL", default=[],
                        help="run only the cells of the row or column with this label (repeatable; rows and "
                             "columns both named: where they cross), e.g. a big table's SST-2 column first; the "
                             "table is still written with every cell done so far")
    parser.add_argument("--seed", action="append", type=int, metavar="N", default=[], dest="seeds",
                        help="run only the cells of this seed (repeatable), e.g. a first seed of every cell "
                             "before the rest; with --only, both apply")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run up to N cells at once, each on an equal share of the cores (trainer.threads, "
                             "which changes no result); other distil table processes on the same outputs share "
                             "the cells too, each cell run once (default 1)")
    parser.add_argument("--threads", type=int, metavar="N",
                        help="torch threads for each cell (trainer.threads, which changes no result); default: "
                             "the config's with one job, the cores shared among the jobs with several. "
                             "--threads 1 runs two tables side by side on 2 cores without one slowing the other")
    parser.add_argument("--frontier-targets", action="store_true",
                        help="write outputs/tables/frontier-targets.{md,csv}: the frontier targets checked on the "
                             "frontier runs done at --scale (make frontier's last step); runs nothing")
    parser.add_argument("--pages", nargs="?", const="docs/results", metavar="DIR",
                        help="write the results pages (one per paper, the frontier, the benchmarks, the recorded "
                             "searches and the findings overview, default docs/results) from the tables in "
                             "outputs/tables and the records in results/, after any tables this command writes; "
                             "runs nothing")
    return parser


def parse_args(argv: list[str] | None, prog: str = "distil table") -> argparse.Namespace:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads {args.threads}: give 1 or more")
    if not (args.names or args.all or args.list or args.frontier_targets or args.pages):
        parser.error(f"name a preset ({prog} --list shows them), or give --all")
    return args


def main(argv: list[str] | None = None, prog: str = "distil table") -> int:
    """Every ending is one line, never a traceback."""
    from distil.tables.run import outputs_root, run

    args = parse_args(argv, prog)
    failed, frame = [], None
    with console_command(prog), exit_on_interrupt(interrupted(prog)):
        if args.names or args.all or args.list:
            failed = run(args)
        if args.frontier_targets and not failed:  # make frontier: the targets once the frontier tables are done
            from distil.tables.frontier_targets import write_targets

            frame = write_targets(args.scale, outputs_root())
        if args.pages and not failed:
            from pathlib import Path

            from distil.search.page import write_search_page
            from distil.tables.ledger import results_root
            from distil.tables.pages import write_pages

            for path in [*write_pages(outputs_root() / "tables", Path(args.pages)),
                         write_search_page(results_root() / "search", Path(args.pages), outputs_root())]:
                print(f"{prog}: wrote {path}")
    if failed:
        print(f"{prog}: error: {len(failed)} cell(s) failed (status in their metrics.json; the tables mark "
              f"them): {'; '.join(failed)}", file=sys.stderr)
        sys.exit(2)
    if frame is not None:
        print(frame.to_string(index=False))
    return 0


def alias() -> None:
    """`distil-table`, kept for one release."""
    sys.exit(run_guarded(main, None, "distil-table"))
