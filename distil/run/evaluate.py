"""Batched student inference; the scores themselves belong to each task (distil/tasks)."""

from __future__ import annotations

import torch

from distil.common.runtime import current, fetch
from distil.data.batching import length_sorted_batches
from distil.data.ragged import Tokens

Logits = torch.Tensor | list[torch.Tensor]  # [N, C], or per example [len_i, C] for tagging


@torch.inference_mode()
def student_logits(model, tokens: Tokens, pad_id: int, batch_size: int) -> Logits:
    """Logits in input order: [N, C], or a list of [len_i, C] for a tagger."""
    model.eval()
    runtime = current()
    lengths = tokens.lengths()
    rows_out: list[torch.Tensor | None] = [None] * len(tokens)
    for rows in length_sorted_batches(lengths, batch_size):
        # in fp32 whatever precision trained it: a saved student serves in fp32 (serve/student.py), and its
        # scores are the served student's (its model card's, distil export's "the run recorded")
        out = fetch(model(*runtime.put(tokens.pad(rows, pad_id)))["logits"])  # one copy back a batch
        for k, row in enumerate(rows):
            rows_out[row] = out[k, : lengths[row]] if out.dim() == 3 else out[k]
    if rows_out and rows_out[0].dim() == 1:
        return torch.stack(rows_out)
    return rows_out
