"""What every task owns: labels, encoding, the teacher's head, losses, cache layout, scores, decoding.

A task is one module in this package plus a `task:` line in a dataset YAML. The rest of the
runner asks the task instead of testing its name.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import datasets
import numpy as np
import torch
from transformers import AutoModelForSequenceClassification

from distil.data.prepared import PreparedSplit
from distil.data.task import NO_LABEL
from distil.errors import DistilError
from distil.training.losses import cross_entropy

Logits = torch.Tensor | list[torch.Tensor]  # [N, C], or per example [len_i, C] for tagging


class Task:
    name: str = ""
    inputs: str = "text"  # what the models read: "text", "pair" (two texts) or "tokens" (pre-split words)
    # Scores (higher is better). `metric` selects models on dev; `metrics` are every score
    # reported, the primary first. A dataset config may choose both among `available_metrics`
    # (`configure`); these class values are the task's own defaults.
    metric: str = "accuracy"
    metrics: Sequence[str] = ("accuracy",)
    available_metrics: tuple[str, ...] = ("accuracy",)
    positive_label: str | None = None  # the class `f1` scores (classification and pairs)
    label_column: str = "label"  # canonical column of gold labels
    per_token: bool = False  # one output per wordpiece (tagging) instead of one per example
    has_classes: bool = True  # one class per example: labeled sets can be drawn N per class
    # losses that cannot apply to this task's outputs (see losses.py), with the reason
    excluded_losses: dict[str, str] = {}
    supervised_loss = staticmethod(cross_entropy)  # what the `ce` loss of a schedule means here
    teacher_class = AutoModelForSequenceClassification

    # --- the dataset's choice of scores -----------------------------------------------------
    def configure(self, dataset_cfg) -> Task:
        """Take the dataset's `metric`, `metrics` and `positive_label`; a name this task cannot
        score is a one-line error before anything runs."""
        where = f"dataset '{dataset_cfg.name}'"
        self.positive_label = dataset_cfg.positive_label
        primary = dataset_cfg.metric or self.metric
        named = [*(dataset_cfg.metrics or self.metrics), *self.implied_metrics()]
        for name in (primary, *named):
            if name not in self.available_metrics:
                raise DistilError(f"{where}: unknown metric '{name}' for a {self.name} task; "
                                  f"choose from: {', '.join(self.available_metrics)}")
        self.metric, self.metrics = primary, list(dict.fromkeys([primary, *named]))
        self.check_metric_settings(where)
        return self

    def implied_metrics(self) -> list[str]:
        """Metrics a dataset setting asks for without naming them."""
        return []

    def check_metric_settings(self, where: str) -> None:
        if self.positive_label is not None:
            raise DistilError(f"{where}: dataset.positive_label applies to classification and pair data, "
                              f"not {self.name}; remove it")

    def check_label_names(self, names: list[str], where: str) -> None:
        """Settings that name labels, checked once the label names are known (before training)."""

    # --- reading a dataset ------------------------------------------------------------------
    def source_columns(self, dataset_cfg) -> dict[str, str]:
        """dataset.<role> setting -> the canonical column it becomes."""
        columns = {"text_column": "text", "label_column": "label"}
        if self.inputs == "pair":
            columns["text_pair_column"] = "text_pair"
        return columns

    def cast_source_labels(self, ds: datasets.Dataset, where: str, column: str) -> datasets.Dataset:
        """Labels as read from a file or the hub, before split.py maps them to ids: class names."""
        return ds.cast_column(self.label_column, datasets.Value("string"))

    # --- labels ---------------------------------------------------------------------------
    def label_names(self, train: datasets.Dataset, configured: Sequence[str] | None) -> list[str]:
        return list(configured) if configured else sorted(set(train[self.label_column][:]))

    def encode_labels(self, ds: datasets.Dataset, names: list[str], where: str) -> datasets.Dataset:
        """String labels -> ids; a label outside `names` is an error naming the fix."""
        index = {name: i for i, name in enumerate(names)}
        unknown = sorted(set(ds[self.label_column][:]) - set(index))
        if unknown:
            raise DistilError(f"{where} has labels {unknown[:5]} outside the label set {names}; "
                              f"fix the data or list every label in dataset.labels")
        features = ds.features.copy()
        features[self.label_column] = datasets.Value("int64")
        return ds.map(lambda row: {self.label_column: index[row[self.label_column]]}, features=features)

    missing_label = NO_LABEL  # what an unlabeled example (transfer set) holds in the label column

    def drop_labels(self, ds: datasets.Dataset) -> datasets.Dataset:
        return ds.map(lambda _: {self.label_column: self.missing_label})

    label_summary_title = "label"
    label_summary_heading = "examples per class"

    def label_summary(self, ds: datasets.Dataset, names: list[str]) -> dict[str, float]:
        """What `distil-data` shows of a split's labels: examples per class."""
        return dict(Counter(names[v] for v in ds[self.label_column][:]))

    def output_names(self, names: list[str]) -> list[str]:
        """What the model predicts, one name per output unit."""
        return list(names)

    def num_outputs(self, names: list[str]) -> int:
        return len(self.output_names(names))

    def strata(self) -> str:
        """The column that stratifies carved dev/test splits."""
        return "label"

    def has_gold(self, labels: torch.Tensor) -> torch.Tensor:
        return labels >= 0

    def batch_labels(self, split: PreparedSplit, rows, width: int) -> torch.Tensor:
        """Gold labels of these rows as a model batch of `width` positions sees them."""
        return split.labels[torch.as_tensor(rows, dtype=torch.long)]

    def check_losses(self, losses: Sequence[str], where: str) -> None:
        for loss in losses:
            if loss in self.excluded_losses:
                raise DistilError(f"{where}: loss '{loss}' cannot train a {self.name} task "
                                  f"({self.excluded_losses[loss]}); choose a schedule without it")

    # --- encoding -------------------------------------------------------------------------
    def prepare(self, name: str, tokenizer, ds: datasets.Dataset, max_length: int,
                names: list[str]) -> PreparedSplit:
        raise NotImplementedError

    def encode_text(self, tokenizer, text: str, max_length: int, apart: bool):
        """One user text for `distil-predict`: (teacher ids, or a pair of them; context for decode)."""
        raise NotImplementedError

    def encode_texts(self, tokenizer, texts: list[str], max_length: int, apart: bool) -> list:
        """Many user texts at once, teacher ids per text (tasks whose tokenizer call can batch override it)."""
        return [self.encode_text(tokenizer, text, max_length, apart)[0] for text in texts]

    # --- the teacher ----------------------------------------------------------------------
    def teacher_head(self, names: list[str]) -> dict:
        """Keyword arguments that give a pre-trained model this task's head."""
        return {"num_labels": self.num_outputs(names)}

    def teacher_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits, labels)

    # --- cache layout ---------------------------------------------------------------------
    def hidden_positions(self, split: PreparedSplit, row: int) -> np.ndarray:
        """Positions of the teacher's hidden layer a student is compared with: [CLS] here."""
        return np.zeros(1, dtype=np.int64)

    # --- scores and decoding --------------------------------------------------------------
    def score(self, logits: Logits, split: PreparedSplit, names: list[str]) -> dict:
        raise NotImplementedError

    def baseline(self, dev: PreparedSplit, test: PreparedSplit, names: list[str]) -> dict | None:
        """A trivial predictor's scores on `test`, for the report (None: no meaningful one)."""
        return None

    def floors(self, labeled: PreparedSplit, dev: PreparedSplit, splits: dict[str, PreparedSplit],
               names: list[str]) -> dict:
        """Trivial predictors a useful model must beat, each with its scores per split of `splits`:
        {floor name: {split: {metric: value or None (undefined)}, ...facts about the floor}}."""
        return {}

    def diagnostics(self, logit_chunks) -> dict:
        """Facts about the teacher's predictions on a split, from its logits chunk by chunk
        (no gold labels needed, so the transfer set has them too)."""
        return {}

    # Serving one text: `logits` its model outputs ([outputs], or [wordpieces, outputs] for tagging),
    # `context` what encode_text kept of it for decoding (a tagged text's words).
    gives_probabilities: bool = True  # its outputs are logits over `names`, not a score

    def prediction(self, logits: torch.Tensor, context, names: list[str]):
        """What the model predicts for one text: a label (a score for regression, a tag per word for tagging)."""
        raise NotImplementedError

    def probabilities(self, logits: torch.Tensor, context) -> np.ndarray:
        """The softmax of one text's logits, in `names` order."""
        return logits.float().softmax(-1).numpy()

    def decode(self, logits: torch.Tensor, context, names: list[str]) -> str:
        """One text's prediction as `distil predict` prints it."""
        raise NotImplementedError
