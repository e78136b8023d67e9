"""A run's splits, built from its composed config: the one place a dataset config meets its task."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import datasets
from omegaconf import DictConfig

from distil.config.compose import compose_run_config
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData, build_task_data
from distil.errors import DistilError
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


@dataclass
class RecordedRun:
    """A finished run's task and splits, read again as the run read them (its .hydra/config.yaml); the
    splits are built on first use."""

    cfg: DictConfig
    task: object

    @cached_property
    def data(self) -> TaskData:
        return task_data(self.cfg, task=self.task)

    @classmethod
    def read(cls, run_dir: Path) -> RecordedRun:
        from omegaconf import OmegaConf

        from distil.common.libraries import quiet_libraries
        from distil.config.schema import register_configs

        register_configs()  # the resolvers the run's configuration may name
        quiet_libraries()
        cfg = OmegaConf.load(Path(run_dir) / ".hydra" / "config.yaml")
        return cls(cfg, make_task(cfg.dataset))

    def test_split(self, student, language: str | None = None, name: str = "the student") -> tuple[PreparedSplit,
                                                                                                    list[str]]:
        """The test split as the saved `student` reads it (its tokenizer and cut; a schedule=d0 student's
        `language` alone), and its examples as texts a user gives it (distil/serve/export.split_texts)."""
        from distil.serve.export import split_texts

        split = self.task.prepare("test", student.tokenizer, self.data.splits["test"], student.config["max_length"],
                                  self.data.label_names)
        if language is not None:
            split = split.language(language)
        texts = split_texts(split, self.task.inputs)
        if not texts:
            raise DistilError(f"the run's test split has no example for {name} to be checked on; give the dataset "
                              f"a test split")
        return split, texts
