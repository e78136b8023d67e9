"""Scores for every task, and batched student inference.

classification / pair: accuracy (plus per language when the dataset is multilingual).
tagging: seqeval span-level F1 over IOB2 tags at each word's first wordpiece ('X'
continuations are never scored), per language, with the mean and standard deviation
over languages as XtremeDistil reports them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import datasets
import numpy as np
import torch
from seqeval.metrics import f1_score

from distil.data.batching import example_length, length_sorted_batches, model_inputs
from distil.data.encode import Encoded

PRIMARY_METRIC = {"classification": "accuracy", "pair": "accuracy", "tagging": "f1"}

Logits = torch.Tensor | list[torch.Tensor]  # [N, C], or per example [len_i, C] for tagging


def score(task: str, logits: Logits, ds: datasets.Dataset, encoded: Encoded, label_names: list[str]) -> dict:
    if task == "tagging":
        return _tagging_scores(logits, ds, encoded, label_names)
    labels = torch.as_tensor(ds["label"][:])
    result = {"accuracy": accuracy(logits, labels)}
    languages = np.asarray(ds["language"][:])
    if len(set(languages)) > 1:
        result["per_language"] = {
            lang: accuracy(logits[torch.as_tensor(languages == lang)], labels[languages == lang])
            for lang in sorted(set(languages))
        }
    return result


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    if len(labels) == 0:
        return float("nan")
    return float((logits.argmax(dim=-1) == labels).float().mean())


def _tagging_scores(logits, ds, encoded: Encoded, label_names: list[str]) -> dict:
    gold_by_language, predicted_by_language = defaultdict(list), defaultdict(list)
    for row, (tags, language) in enumerate(zip(ds["tags"][:], ds["language"][:], strict=True)):
        best = logits[row].argmax(dim=-1).tolist()
        predicted = []
        for position in encoded.word_starts[row]:
            label = best[position] if position >= 0 else None  # truncated words count as 'O'
            predicted.append(label_names[label] if label is not None and label < len(label_names) else "O")
        gold_by_language[language].append([label_names[t] for t in tags])
        predicted_by_language[language].append(predicted)
    per_language = {lang: float(f1_score(gold_by_language[lang], predicted_by_language[lang]))
                    for lang in sorted(gold_by_language)}
    scores = list(per_language.values())
    result = {"f1": float(np.mean(scores)), "f1_std": float(np.std(scores))}
    if len(per_language) > 1:
        result["per_language"] = per_language
    return result


def majority_baseline(dev_labels: Sequence[int], test_labels: Sequence[int]) -> float:
    """Test accuracy of always predicting the most frequent dev label.

    Dev, not the labeled split: labeled sets are often drawn N per class, where every
    class ties and the "majority" would be arbitrary.
    """
    majority = np.bincount(np.asarray(dev_labels)).argmax()
    return float((np.asarray(test_labels) == majority).mean())


@torch.inference_mode()
def student_logits(model, id_lists: Sequence[Sequence[int]], pad_id: int, batch_size: int) -> Logits:
    """Logits in input order: [N, C], or a list of [len_i, C] for a tagger."""
    model.eval()
    rows_out: list[torch.Tensor | None] = [None] * len(id_lists)
    for rows in length_sorted_batches([example_length(s) for s in id_lists], batch_size):
        out = model(*model_inputs([id_lists[i] for i in rows], pad_id))["logits"]
        for k, row in enumerate(rows):
            rows_out[row] = out[k, : len(id_lists[row])] if out.dim() == 3 else out[k]
    if rows_out and rows_out[0] is not None and rows_out[0].dim() == 1:
        return torch.stack(rows_out)
    return rows_out
