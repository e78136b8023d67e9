"""`distil-data <dataset> [key=value ...]`: the splits a run would see, as the papers' tables show them.

Classification and pairs follow Mukherjee & Awadallah Tables 3-4 (classes, labeled,
labeled per class, transfer, test, average words per document); tagging follows
XtremeDistil Table 1 (labels, train, test, unlabeled) with one row per language.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

import pandas as pd
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig
from rich.console import Console
from rich.table import Table

from distil.common.console import console_command
from distil.config.overrides import (
    CONFIG_DIR_ENV,
    check_overrides,
    config_dirs,
    group_options,
    replace_files_map,
    with_config_dir_env,
)
from distil.config.schema import CONF_DIR, register_configs
from distil.data.split import SPLITS, TaskData
from distil.errors import DistilError

USAGE = ("usage: distil-data <dataset> [key=value ...]   (datasets: {}; your own: "
         "hydra.searchpath=[file://DIR] or DISTIL_CONFIG_DIR=DIR)")


def average_words(data: TaskData, split: str) -> float:
    ds = data.splits[split]
    if len(ds) == 0:
        return 0.0
    if data.task.inputs == "tokens":
        return sum(len(tokens) for tokens in ds["tokens"][:]) / len(ds)
    texts = ds["text"][:]
    words = sum(len(t.split()) for t in texts)
    if data.task.inputs == "pair":
        words += sum(len(t.split()) for t in ds["text_pair"][:])
    return words / len(ds)


def overview(data: TaskData, name: str) -> pd.DataFrame:
    sizes = data.summary()
    row = {"dataset": name, "task": data.task.name, "labels": data.num_labels, "labeled": sizes["labeled"]}
    if data.task.has_classes:
        counts = Counter(data.splits["labeled"]["label"][:])
        row["labeled/class"] = min(counts.values()) if len(set(counts.values())) == 1 else "varies"
    row.update({"transfer (unlabeled)": sizes["transfer"], "dev": sizes["dev"], "test": sizes["test"],
                **{split: sizes[split] for split in data.extra_tests},  # e.g. MNLI's test_mismatched
                "#W (labeled)": round(average_words(data, "labeled"), 1)})
    return pd.DataFrame([row])


def label_distribution(data: TaskData) -> pd.DataFrame:
    """Examples per class, entity spans per type, or score statistics: as the task describes its labels."""
    table = {split: data.task.label_summary(data.splits[split], data.label_names)
             for split in ("labeled", "dev", "test", *data.extra_tests)}
    frame = pd.DataFrame(table).fillna(0)
    frame.index.name = data.task.label_summary_title
    return frame.astype(int).sort_index() if (frame % 1 == 0).all().all() else frame.round(3)


def per_language(data: TaskData) -> pd.DataFrame:
    counts = {split: Counter(data.splits[split]["language"][:]) for split in SPLITS}  # one column read per split
    return pd.DataFrame([{"language": lang, **{split: counts[split][lang] for split in SPLITS}}
                         for lang in data.languages])


def show(frame: pd.DataFrame, title: str, index: bool = False) -> None:
    table = Table(title=title)
    frame = frame.reset_index() if index else frame
    for column in frame.columns:
        table.add_column(str(column), justify="right" if frame[column].dtype.kind in "fi" else "left")
    for _, row in frame.iterrows():
        table.add_row(*(str(v) for v in row))
    Console().print(table)


def compose_run_config(overrides: list[str]) -> DictConfig:
    """The config `distil` composes from these overrides, without running anything. Raises DistilError."""
    from distil.run.pipeline import quiet_libraries

    overrides = with_config_dir_env(overrides, os.environ.get(CONFIG_DIR_ENV))
    problem = check_overrides(overrides, CONF_DIR)
    if problem:
        raise DistilError(problem)
    register_configs()  # the schema (base_config) and resolvers the YAML names: distil.cli.main does it on import
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    replace_files_map(cfg, overrides)
    quiet_libraries()
    return cfg


def load_splits(overrides: list[str]) -> tuple[DictConfig, TaskData]:
    """The config and the splits a run with these overrides would see (no teacher, no training):
    what `distil-data` shows and what a table of kind `data` summarises. Raises DistilError."""
    from distil.data.split import build_task_data

    cfg = compose_run_config(overrides)
    return cfg, build_task_data(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed, cfg.hub_offline)


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
