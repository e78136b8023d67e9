"""What reading and splitting data asks of a task. The task is handed in (distil.tasks builds it
from the dataset's config): data sits below tasks and never imports them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import datasets

from distil.errors import DistilError

NO_LABEL = -1  # a transfer-set example (or token) has no gold label


class BadRow(DistilError):
    """A problem of one example a task found in what a reader read: raised with the example's 0-based
    index, the reader names the example as its user finds it (a file's line, a hub split's row)."""

    def __init__(self, index: int, problem: str):
        self.index, self.problem = index, problem  # problem: "has score nan in label column 'score'; ..."
        super().__init__(f"row {index + 1} {problem}")


class DataTask(Protocol):
    """The part of distil.tasks.Task that data reads: its inputs and how its labels are stored."""

    name: str
    inputs: str  # "text", "pair" or "tokens"
    per_token: bool
    has_classes: bool
    label_column: str

    def source_columns(self, dataset_cfg) -> dict[str, str]: ...
    # raises BadRow for an example whose label cannot be read
    def cast_source_labels(self, ds: datasets.Dataset, where: str, column: str) -> datasets.Dataset: ...
    def label_names(self, train: datasets.Dataset, configured: Sequence[str] | None) -> list[str]: ...
    def check_label_names(self, names: list[str], where: str) -> None: ...
    def encode_labels(self, ds: datasets.Dataset, names: list[str], where: str) -> datasets.Dataset: ...
    def drop_labels(self, ds: datasets.Dataset) -> datasets.Dataset: ...
    def strata(self) -> str: ...
