"""A run's splits, built from its composed config: the one place a dataset config meets its task."""

from __future__ import annotations

from collections.abc import Callable

import datasets
from omegaconf import DictConfig

from distil.config.compose import compose_run_config
from distil.data.split import TaskData, build_task_data
from distil.tasks import make_task

Augment = Callable[[datasets.Dataset, datasets.Dataset], datasets.Dataset]


def task_data(cfg: DictConfig, augment: Augment | None = None, task=None) -> TaskData:
    """The splits a run with this config sees (`augment`: extra transfer examples, distil/augment)."""
    task = task or make_task(cfg.dataset)
    return build_task_data(cfg.dataset, task, cfg.transfer_size, cfg.paths.data_dir, cfg.seed, cfg.hub_offline,
                           augment)


def load_splits(overrides: list[str]) -> tuple[DictConfig, TaskData]:
    """The config and the splits a run with these overrides would see (no teacher, no training):
    what `distil data` shows and what a table of kind `data` summarises. Raises DistilError."""
    cfg = compose_run_config(overrides)
    return cfg, task_data(cfg)
