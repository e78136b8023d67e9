"""Classification of one text (sentiment, topic): accuracy, F1 of a positive class, Matthews
correlation; the primary metric also per language when multilingual."""

from __future__ import annotations

import numpy as np
import torch

from distil.data.prepared import PreparedSplit
from distil.errors import DistilError
from distil.tasks.base import Logits, Task
from distil.tasks.text import encode_user_text, encode_user_texts, prepare_texts


class ClassificationTask(Task):
    name = "classification"
    inputs = "text"
    metric = "accuracy"
    metrics = ("accuracy",)
    available_metrics = ("accuracy", "f1", "mcc")

    def implied_metrics(self) -> list[str]:
        """A dataset that names its positive class reports its F1 (Tang T1, Turc T3, Wu T1: F1/acc)."""
        return ["f1"] if self.positive_label is not None else []

    def check_metric_settings(self, where: str) -> None:
        if "f1" in self.metrics and self.positive_label is None:
            raise DistilError(f"{where}: metric f1 is the F1 of dataset.positive_label; set it to the positive "
                              f"class (e.g. positive_label: \"1\" for MRPC's paraphrase) or drop f1")

    def check_label_names(self, names: list[str], where: str) -> None:
        if self.positive_label is not None and self.positive_label not in names:
            raise DistilError(f"{where}: positive_label '{self.positive_label}' is not one of its labels {names}; "
                              f"set dataset.positive_label to one of them")

    def prepare(self, name, tokenizer, ds, max_length, names) -> PreparedSplit:
        labels = torch.as_tensor(ds[self.label_column][:], dtype=torch.long)
        return prepare_texts(name, tokenizer, ds, max_length, self.inputs == "pair", labels)

    def encode_text(self, tokenizer, text, max_length, apart):
        return encode_user_text(tokenizer, text, max_length, self.inputs == "pair", apart)

    def encode_texts(self, tokenizer, texts, max_length, apart):
        return encode_user_texts(tokenizer, texts, max_length, self.inputs == "pair", apart)

    def score(self, logits: Logits, split: PreparedSplit, names: list[str]) -> dict:
        predicted, gold = logits.argmax(dim=-1).numpy(), split.labels.numpy()
        result = self.scores_of(predicted, gold, names)
        languages = split.languages
        if len(set(languages)) > 1:
            result["per_language"] = {  # str(): numpy strings, which a weights-only checkpoint load refuses
                str(lang): self.scores_of(predicted[languages == lang], gold[languages == lang], names)[self.metric]
                for lang in sorted(set(languages))
            }
        return result

    def scores_of(self, predicted: np.ndarray, gold: np.ndarray, names: list[str]) -> dict[str, float]:
        """Every reported metric, from one confusion matrix, and accuracy always: the majority-class floor
        is compared on it whatever metric selects (on MCC or F1 the majority class scores 0, a floor
        that any model passes while it sits below the majority's accuracy)."""
        counts = confusion(predicted, gold, len(names))
        positive = names.index(self.positive_label) if self.positive_label is not None else None
        return {name: CLASS_METRICS[name](counts, positive) for name in dict.fromkeys([*self.metrics, "accuracy"])}

    def baseline(self, dev: PreparedSplit, test: PreparedSplit, names: list[str]) -> dict:
        """Test scores of always predicting the most frequent dev label.

        Dev, not the labeled split: labeled sets are often drawn N per class, where every
        class ties and the "majority" would be arbitrary."""
        majority = int(np.bincount(dev.labels.numpy()).argmax())
        return self.score(one_hot_rows(len(test.labels), majority, len(names)), test, names)

    def floors(self, labeled: PreparedSplit, dev: PreparedSplit, splits: dict[str, PreparedSplit],
               names: list[str]) -> dict:
        """The majority class (dev's most frequent label, as `baseline`): its accuracy and every reported
        metric on each split."""
        if not len(dev.labels):
            return {}
        majority = int(np.bincount(dev.labels.numpy(), minlength=len(names)).argmax())
        return {"majority_class": {"label": names[majority],
                                   **{name: self.baseline(dev, split, names) for name, split in splits.items()}}}

    def diagnostics(self, logit_chunks) -> dict:
        """Mukherjee & Awadallah Table 9: the variance of the teacher's class probabilities
        <p_1(x_i) .. p_C(x_i)> of each example, averaged over the N examples, beside its
        maximum (1/C)(1 - 1/C), reached when every prediction is one-hot."""
        total, count, classes = 0.0, 0, 0
        for logits in logit_chunks:
            if len(logits):
                probabilities = logits.double().softmax(dim=-1)
                total += float(probabilities.var(dim=-1, unbiased=False).sum())
                count, classes = count + len(logits), logits.shape[-1]
        if count == 0:
            return {}
        return {"prediction_variance": total / count, "max_prediction_variance": (1 / classes) * (1 - 1 / classes)}

    def prediction(self, logits: torch.Tensor, context, names: list[str]) -> str:
        return names[int(logits.argmax())]

    def decode(self, logits: torch.Tensor, context, names: list[str]) -> str:
        """The label and its probability, tab-separated."""
        return f"{self.prediction(logits, context, names)}\t{self.probabilities(logits, context).max():.3f}"


def one_hot_rows(rows: int, label: int, classes: int) -> torch.Tensor:
    """Logits that predict `label` for every one of `rows` examples."""
    logits = torch.zeros(rows, classes)
    logits[:, label] = 1.0
    return logits


def confusion(predicted: np.ndarray, gold: np.ndarray, classes: int) -> np.ndarray:
    """counts[g, p]: examples of gold class g predicted as p."""
    counts = np.zeros((classes, classes), dtype=np.int64)
    np.add.at(counts, (gold, predicted), 1)
    return counts


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Share of examples whose top logit is the gold class (NaN for no examples)."""
    return correct_share(confusion(logits.argmax(dim=-1).numpy(), labels.numpy(), logits.shape[-1]))


def correct_share(counts: np.ndarray, positive: int | None = None) -> float:
    total = counts.sum()
    return float(np.trace(counts) / total) if total else float("nan")


def positive_f1(counts: np.ndarray, positive: int) -> float:
    """F1 of class `positive`: 2 TP / (2 TP + FP + FN); 0 when it is neither gold nor predicted."""
    if not counts.sum():
        return float("nan")
    true_positive = counts[positive, positive]
    gold_and_predicted = counts[positive, :].sum() + counts[:, positive].sum()  # 2 TP + FN + FP
    return float(2 * true_positive / gold_and_predicted) if gold_and_predicted else 0.0


def matthews(counts: np.ndarray, positive: int | None = None) -> float:
    """Matthews correlation, K classes (Gorodkin 2004; for two classes (TP TN - FP FN) /
    sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))): (c s - p.t) / sqrt((s^2 - p.p)(s^2 - t.t)), with c
    examples right of s, t the gold and p the predicted count per class. 0 where undefined
    (one class predicted, or gold, throughout), as GLUE's CoLA scorer does."""
    counts = counts.astype(np.float64)
    s, c = counts.sum(), np.trace(counts)
    if not s:
        return float("nan")
    t, p = counts.sum(axis=1), counts.sum(axis=0)
    denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
    return float((c * s - p @ t) / denominator) if denominator else 0.0


CLASS_METRICS = {"accuracy": correct_share, "f1": positive_f1, "mcc": matthews}
