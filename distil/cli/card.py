"""`distil card <run dir>`: render the model card (README.md) of a finished run's student again."""

from __future__ import annotations

import argparse
from pathlib import Path

from distil.cli.parsing import Parser
from distil.common.console import console_command

EXAMPLES = """\
examples:
  distil card outputs/runs/<date>/<time>     # -> student/README.md
  distil card outputs/runs/<date>/<time>     # a schedule=d0 run: student-<lang>/README.md and its own README.md
"""


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil card", "Render the model card (README.md) of a finished run's student from its "
                                         "metrics.json: after a table's timing, or a newer distil.", EXAMPLES)
    parser.add_argument("run_dir", type=Path, help="a run directory written by `distil`")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil card") -> int:
    args = build_parser(prog).parse_args(argv)
    with console_command(prog):
        from distil.serve.card import write_cards

        for path in write_cards(args.run_dir):
            print(f"wrote {path}")
    return 0
