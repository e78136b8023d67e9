"""Metrics and batched student inference."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from distil.data.batching import length_sorted_batches, pad


def accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    if len(labels) == 0:
        return float("nan")
    return float((logits.argmax(dim=-1) == labels).float().mean())


def majority_baseline(train_labels: Sequence[int], test_labels: Sequence[int]) -> float:
    """Accuracy of always predicting the most frequent training label."""
    majority = np.bincount(np.asarray(train_labels)).argmax()
    return float((np.asarray(test_labels) == majority).mean())


@torch.inference_mode()
def student_logits(model, id_lists: Sequence[Sequence[int]], pad_id: int, batch_size: int):
    model.eval()
    logits = None
    for rows in length_sorted_batches([len(s) for s in id_lists], batch_size):
        ids, mask = pad([id_lists[i] for i in rows], pad_id)
        out = model(ids, mask)["logits"]
        if logits is None:
            logits = torch.zeros((len(id_lists), out.shape[-1]))
        logits[rows] = out
    return logits
