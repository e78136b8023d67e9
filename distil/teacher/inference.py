"""Run a (fine-tuned) teacher over token ids: logits and one hidden layer, batched by length."""

from __future__ import annotations

import torch

from distil.data.batching import length_sorted_batches, pad


@torch.inference_mode()
def run_teacher(model, id_lists, pad_id: int, batch_size: int, layer: int | None = None, progress=None):
    """Per example, in input order: logits ([C], or [len, C] for a token head) and, if `layer`
    is given, that hidden layer ([CLS] vector [H], or every token [len, H] for a token head)."""
    model.eval()
    per_token = type(model).__name__.endswith("ForTokenClassification")
    logits: list[torch.Tensor | None] = [None] * len(id_lists)
    hidden: list[torch.Tensor | None] = [None] * len(id_lists)
    for rows in length_sorted_batches([len(s) for s in id_lists], batch_size):
        ids, mask = pad([id_lists[i] for i in rows], pad_id)
        out = model(input_ids=ids, attention_mask=mask, output_hidden_states=layer is not None)
        states = out.hidden_states[layer] if layer is not None else None
        for k, row in enumerate(rows):
            length = len(id_lists[row])
            logits[row] = out.logits[k, :length].float() if per_token else out.logits[k].float()
            if states is not None:
                hidden[row] = states[k, :length].float() if per_token else states[k, 0].float()
        if progress is not None:
            progress(len(rows))
    return logits, (hidden if layer is not None else None)
