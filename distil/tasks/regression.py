"""Regression on a score (STS-B-style 0-5 similarity) of one text or a pair: Pearson and Spearman.

The model has one output; `ce` in a schedule means squared error on the gold score here, and
the losses that need class probabilities (hard, soft_ce, kl) are refused.
"""

from __future__ import annotations

import math

import datasets
import pandas as pd
import torch

from distil.data.prepared import PreparedSplit
from distil.data.task import BadRow
from distil.errors import DistilError
from distil.tasks.base import Task
from distil.tasks.text import encode_user_text, encode_user_texts, prepare_texts
from distil.training.losses import squared_error

NO_SCORE = math.nan  # a transfer-set example has no gold score
UNDEFINED = math.nan  # the correlation of a constant prediction (or constant gold scores)


def constant(values: pd.Series) -> bool:
    """Every value the same (or none): Pearson and Spearman divide by its zero spread."""
    return values.nunique(dropna=True) <= 1


class RegressionTask(Task):
    name = "regression"
    metric = "pearson"
    metrics = ("pearson", "spearman")  # Pearson selects on dev, Spearman is reported beside it
    available_metrics = ("pearson", "spearman")
    has_classes = False
    excluded_losses = {loss: "a score has no class probabilities" for loss in ("hard", "soft_ce", "kl")}
    supervised_loss = staticmethod(squared_error)

    def __init__(self, pair: bool = False):
        self.inputs = "pair" if pair else "text"

    def cast_source_labels(self, ds: datasets.Dataset, where: str, column: str) -> datasets.Dataset:
        for index, value in enumerate(ds[self.label_column][:]):
            try:
                number = float(value)
            except (TypeError, ValueError):
                raise BadRow(index, f"has {value!r} in label column '{column}'; a regression task needs a number "
                                    f"in every row") from None
            if not math.isfinite(number):  # nan/inf parse as floats, then poison every mean, loss and score
                raise BadRow(index, f"has score {value} in label column '{column}'; a regression task needs a "
                                    f"finite number in every row: fix or drop that row")
        return ds.cast_column(self.label_column, datasets.Value("float64"))

    def label_names(self, train, configured) -> list[str]:
        return []  # a score, not classes

    def encode_labels(self, ds: datasets.Dataset, names: list[str], where: str) -> datasets.Dataset:
        return ds  # already float64 scores (cast_source_labels)

    missing_label = NO_SCORE

    label_summary_title = "score"
    label_summary_heading = "gold scores"

    def label_summary(self, ds: datasets.Dataset, names: list[str]) -> dict[str, float]:
        scores = pd.Series(ds[self.label_column][:], dtype=float)
        return {"mean": scores.mean(), "std": scores.std(ddof=0), "min": scores.min(), "max": scores.max()}

    def output_names(self, names: list[str]) -> list[str]:
        return ["score"]

    def strata(self) -> str:
        return "language"  # scores have no classes: carve dev/test at random (per language)

    def has_gold(self, labels: torch.Tensor) -> torch.Tensor:
        return ~torch.isnan(labels)

    def prepare(self, name, tokenizer, ds, max_length, names) -> PreparedSplit:
        labels = torch.as_tensor(ds[self.label_column][:], dtype=torch.float32)
        return prepare_texts(name, tokenizer, ds, max_length, self.inputs == "pair", labels)

    def encode_text(self, tokenizer, text, max_length, apart):
        return encode_user_text(tokenizer, text, max_length, self.inputs == "pair", apart)

    def encode_texts(self, tokenizer, texts, max_length, apart):
        return encode_user_texts(tokenizer, texts, max_length, self.inputs == "pair", apart)

    def teacher_head(self, names: list[str]) -> dict:
        return {"num_labels": 1, "problem_type": "regression"}

    def teacher_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return squared_error(logits, labels)

    def score(self, logits, split: PreparedSplit, names: list[str]) -> dict:
        predicted = pd.Series(logits[:, 0].double().numpy())
        gold = pd.Series(split.labels.double().numpy())
        if constant(predicted) or constant(gold):  # no correlation is defined: NaN, without scipy's warning
            return dict.fromkeys(self.metrics, UNDEFINED)
        return {name: float(predicted.corr(gold, method=name)) for name in self.metrics}  # pandas' names

    def floors(self, labeled: PreparedSplit, dev: PreparedSplit, splits: dict[str, PreparedSplit],
               names: list[str]) -> dict:
        """The mean predictor (the labeled set's mean score for every example). Its Pearson and Spearman
        are undefined (a constant has no correlation), recorded as None: any model scoring above 0
        correlates with the gold scores, which the mean predictor never does."""
        gold = labeled.labels.double()
        mean = float(gold[~torch.isnan(gold)].mean()) if len(gold) else UNDEFINED
        undefined = dict.fromkeys(self.metrics)
        return {"mean_predictor": {"prediction": mean, "beat_above": 0.0,
                                   "note": "a constant prediction has no correlation: its scores are undefined",
                                   **{name: dict(undefined) for name in splits}}}

    gives_probabilities = False

    def prediction(self, logits: torch.Tensor, context, names: list[str]) -> float:
        return float(logits[0])

    def probabilities(self, logits: torch.Tensor, context):
        raise DistilError("a regression student predicts a score, not class probabilities; use predict()")

    def decode(self, logits: torch.Tensor, context, names: list[str]) -> str:
        return f"{self.prediction(logits, context, names):.3f}"
