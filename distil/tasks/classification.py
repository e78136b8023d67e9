"""Classification of one text (sentiment, topic): accuracy, per language when multilingual."""

from __future__ import annotations

import numpy as np
import torch

from distil.data.prepared import PreparedSplit
from distil.tasks.base import Logits, Task
from distil.tasks.text import encode_user_text, prepare_texts


class ClassificationTask(Task):
    name = "classification"
    inputs = "text"
    metric = "accuracy"

    def prepare(self, name, tokenizer, ds, max_length, names) -> PreparedSplit:
        labels = torch.as_tensor(ds[self.label_column][:], dtype=torch.long)
        return prepare_texts(name, tokenizer, ds, max_length, self.inputs == "pair", labels)

    def encode_text(self, tokenizer, text, max_length, apart):
        return encode_user_text(tokenizer, text, max_length, self.inputs == "pair", apart)

    def score(self, logits: Logits, split: PreparedSplit, names: list[str]) -> dict:
        labels = split.labels
        result = {"accuracy": accuracy(logits, labels)}
        languages = split.languages
        if len(set(languages)) > 1:
            result["per_language"] = {
                lang: accuracy(logits[torch.as_tensor(languages == lang)], labels[languages == lang])
                for lang in sorted(set(languages))
            }
        return result

    def baseline(self, dev: PreparedSplit, test: PreparedSplit) -> dict:
        """Test accuracy of always predicting the most frequent dev label.

        Dev, not the labeled split: labeled sets are often drawn N per class, where every
        class ties and the "majority" would be arbitrary."""
        majority = np.bincount(dev.labels.numpy()).argmax()
        return {"accuracy": float((test.labels.numpy() == majority).mean())}

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

    def decode(self, logits: torch.Tensor, context, names: list[str]) -> str:
        probabilities = logits.softmax(-1)
        best = int(probabilities.argmax())
        return f"{names[best]}\t{probabilities[best]:.3f}"


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    if len(labels) == 0:
        return float("nan")
    return float((logits.argmax(dim=-1) == labels).float().mean())
