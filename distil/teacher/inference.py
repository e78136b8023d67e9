"""Run a (fine-tuned) teacher over token ids: logits and one hidden layer, batched by length."""

from __future__ import annotations

import torch

from distil.data.batching import length_sorted_batches, pad


@torch.inference_mode()
def predict_logits(model, id_lists, pad_id: int, batch_size: int) -> torch.Tensor:
    """Teacher logits in the original order (batches sorted by length for speed)."""
    return run_teacher(model, id_lists, pad_id, batch_size, layer=None)[0]


@torch.inference_mode()
def run_teacher(model, id_lists, pad_id: int, batch_size: int, layer: int | None, progress=None):
    """(logits, [CLS] vector of hidden layer `layer` or None), both in the input order."""
    model.eval()
    n = len(id_lists)
    logits = torch.zeros((n, model.config.num_labels))
    hidden = torch.zeros((n, model.config.hidden_size)) if layer is not None else None
    for rows in length_sorted_batches([len(s) for s in id_lists], batch_size):
        ids, mask = pad([id_lists[i] for i in rows], pad_id)
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=layer is not None)
        logits[rows] = out.logits.float()
        if layer is not None:
            hidden[rows] = out.hidden_states[layer][:, 0].float()
        if progress is not None:
            progress(len(rows))
    return logits, hidden
