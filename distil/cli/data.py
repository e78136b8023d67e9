"""`distil data <dataset> [key=value ...]`: the splits a run would see, as the papers' tables show them."""

from __future__ import annotations

import os
import sys

import pandas as pd
from rich.console import Console
from rich.table import Table

from distil.cli.parsing import Parser, run_guarded
from distil.common.console import console_command
from distil.config.overrides import CONFIG_DIR_ENV, config_dirs, group_options, with_config_dir_env
from distil.config.schema import CONF_DIR
from distil.data.summary import label_distribution, overview, per_language
from distil.run.data import load_splits

EXAMPLES = """\
examples:
  distil data sst2                                # the splits of `distil dataset=sst2`
  distil data wikiann transfer_size=10x seed=2    # any override a run takes
  distil data mine "hydra.searchpath=[file://$PWD/myconf]"
"""


def show(frame: pd.DataFrame, title: str, index: bool = False) -> None:
    table = Table(title=title)
    frame = frame.reset_index() if index else frame
    for column in frame.columns:
        table.add_column(str(column), justify="right" if frame[column].dtype.kind in "fi" else "left")
    for _, row in frame.iterrows():
        table.add_row(*(str(v) for v in row))
    Console().print(table)


def build_parser(prog: str) -> Parser:
    dirs, _ = config_dirs(with_config_dir_env([], os.environ.get(CONFIG_DIR_ENV)), CONF_DIR)
    parser = Parser(prog, "distil data", f"The splits a run would see (sizes, label distribution, languages), laid "
                                         f"out as the papers' tables show them.\n\ndatasets: "
                                         f"{', '.join(group_options(dirs, 'dataset'))}; your own: "
                                         f"hydra.searchpath=[file://DIR] or DISTIL_CONFIG_DIR=DIR", EXAMPLES)
    parser.add_argument("dataset", help="a dataset (also dataset=NAME, as `distil` takes it)")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, as a run takes them")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil data") -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        parser = build_parser(prog)
        if args and args[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        parser.error("name a dataset: " + parser.description.rsplit("datasets: ", 1)[1])
    dataset = args[0].removeprefix("dataset=")  # `distil data sst2` and, as `distil` takes it, `dataset=sst2`
    with console_command(prog):
        cfg, data = load_splits([f"dataset={dataset}", *args[1:]])
    show(overview(data, cfg.dataset.name),
         f"{cfg.dataset.name}: splits of a run with seed={cfg.seed}, transfer_size={cfg.transfer_size.name}")
    show(label_distribution(data), data.task.label_summary_heading, index=True)
    if data.multilingual:
        show(per_language(data), "examples per language")
    return 0


def alias() -> None:
    """`distil-data`, kept for one release."""
    sys.exit(run_guarded(main, None, "distil-data"))

