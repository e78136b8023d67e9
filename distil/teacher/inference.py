"""Run a (fine-tuned) teacher over prepared examples: logits and one hidden layer, batched by length."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch

from distil.data.batching import length_sorted_batches
from distil.data.prepared import PreparedSplit
from distil.data.ragged import Ragged
from distil.tasks import Task


def teacher_batches(model, ids: Ragged, rows: np.ndarray, pad_id: int, batch_size: int, hidden: bool,
                    progress=None) -> Iterator[tuple[np.ndarray, object]]:
    """(positions in `rows`, the model's output) for length-sorted batches of the sequences
    `ids[rows]`, with every layer's hidden states when `hidden`. Call under inference mode."""
    lengths = ids.lengths()[rows]
    for batch in length_sorted_batches(lengths, batch_size):
        tokens, mask = ids.pad(rows[batch], pad_id)
        yield batch, model(input_ids=tokens, attention_mask=mask, output_hidden_states=hidden)
        if progress is not None:
            progress(len(batch))


@torch.inference_mode()
def run_teacher(model, task: Task, split: PreparedSplit, rows: np.ndarray, pad_id: int, batch_size: int,
                layer: int | None = None, progress=None) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """For each of `rows`, in that order: fp32 logits ([C], or [len, C] per wordpiece) and, when
    `layer` is given, that layer at the task's hidden positions ([positions, H]) of the example
    as the teacher reads it (a pair joined). The cache writes its shards with
    `distil.teacher.cache.compute_shard` instead (fp16 buffers, and a pair's sentences apart)."""
    model.eval()
    lengths = split.ids.lengths()[rows]
    logits: list[torch.Tensor | None] = [None] * len(rows)
    hidden: list[torch.Tensor | None] = [None] * len(rows)
    for batch, out in teacher_batches(model, split.ids, rows, pad_id, batch_size, layer is not None, progress):
        states = out.hidden_states[layer] if layer is not None else None
        for k, local in enumerate(batch):
            length = int(lengths[local])
            logits[local] = (out.logits[k, :length] if task.per_token else out.logits[k]).float()
            if states is not None:
                positions = torch.from_numpy(task.hidden_positions(split, int(rows[local])))
                hidden[local] = states[k, positions].float()
    return logits, (hidden if layer is not None else None)


def teacher_split_logits(model, task: Task, split: PreparedSplit, pad_id: int, batch_size: int):
    """Logits for a whole split: [N, C], or a list of [len_i, C] for a per-token task."""
    logits, _ = run_teacher(model, task, split, np.arange(len(split)), pad_id, batch_size)
    return logits if task.per_token else torch.stack(logits) if logits else torch.zeros((0, 0))
