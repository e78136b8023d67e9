"""`distil data <dataset> [key=value ...]`: the splits a run would see, as the papers' tables show them."""

from __future__ import annotations

import os
import sys

import pandas as pd
from rich.console import Console
from rich.table import Table

from distil.common.console import console_command
from distil.config.overrides import CONFIG_DIR_ENV, config_dirs, group_options, with_config_dir_env
from distil.config.schema import CONF_DIR
from distil.data.summary import label_distribution, overview, per_language
from distil.run.data import load_splits

USAGE = ("usage: distil-data <dataset> [key=value ...]   (datasets: {}; your own: "
         "hydra.searchpath=[file://DIR] or DISTIL_CONFIG_DIR=DIR)")


def show(frame: pd.DataFrame, title: str, index: bool = False) -> None:
    table = Table(title=title)
    frame = frame.reset_index() if index else frame
    for column in frame.columns:
        table.add_column(str(column), justify="right" if frame[column].dtype.kind in "fi" else "left")
    for _, row in frame.iterrows():
        table.add_row(*(str(v) for v in row))
    Console().print(table)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0].startswith("-"):
        dirs, _ = config_dirs(with_config_dir_env([], os.environ.get(CONFIG_DIR_ENV)), CONF_DIR)
        print(USAGE.format(", ".join(group_options(dirs, "dataset"))), file=sys.stderr)
        sys.exit(0 if args and args[0] in ("-h", "--help") else 2)
    dataset = args[0].removeprefix("dataset=")  # `distil-data sst2` and, as `distil` takes it, `dataset=sst2`
    with console_command("distil-data"):
        cfg, data = load_splits([f"dataset={dataset}", *args[1:]])
    show(overview(data, cfg.dataset.name),
         f"{cfg.dataset.name}: splits of a run with seed={cfg.seed}, transfer_size={cfg.transfer_size.name}")
    show(label_distribution(data), data.task.label_summary_heading, index=True)
    if data.multilingual:
        show(per_language(data), "examples per language")


if __name__ == "__main__":
    main()
