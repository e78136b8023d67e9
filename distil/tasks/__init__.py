"""Tasks: one module each. `make_task(dataset_cfg)` gives the task a dataset names."""

from __future__ import annotations

from distil.errors import check_choice
from distil.tasks.base import NO_LABEL, Task
from distil.tasks.classification import ClassificationTask
from distil.tasks.pair import PairTask
from distil.tasks.regression import RegressionTask
from distil.tasks.tagging import TaggingTask

TASKS = {"classification": ClassificationTask, "pair": PairTask, "tagging": TaggingTask,
         "regression": RegressionTask}


def get_task(name: str, pair: bool = False, where: str = "") -> Task:
    """The task called `name`; `pair` says whether a regression task reads two texts."""
    check_choice("task", name, TASKS, where=where)
    return RegressionTask(pair) if name == "regression" else TASKS[name]()


def make_task(dataset_cfg) -> Task:
    """The dataset's task, scoring the metrics the dataset names."""
    return get_task(dataset_cfg.task, pair=bool(dataset_cfg.text_pair_column),
                    where=f"dataset '{dataset_cfg.name}'").configure(dataset_cfg)


__all__ = ["NO_LABEL", "TASKS", "Task", "get_task", "make_task"]
