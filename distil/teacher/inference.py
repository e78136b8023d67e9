"""Run a (fine-tuned) teacher over prepared examples: logits and one hidden layer, batched by length."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import torch

from distil.common.runtime import current, fetch
from distil.data.batching import length_sorted_batches
from distil.data.prepared import PreparedSplit
from distil.data.ragged import Ragged
from distil.tasks import Task


class TeacherBatch(NamedTuple):
    """One batch's outputs: the batch's positions in `rows`, its logits [B, T?, C] on the CPU in float32
    whatever precision the teacher ran in, and, when asked for, one hidden layer [B, T, H] still on the
    device (`pick` brings back only the positions kept)."""

    rows: np.ndarray
    logits: torch.Tensor
    hidden: torch.Tensor | None


def pick(states: torch.Tensor, positions: list[np.ndarray]) -> list[torch.Tensor]:
    """Example k's `positions[k]` rows of a batch's hidden layer [B, T, H], on the CPU in float32: one
    gather on the device and one copy back for the whole batch, not the whole layer nor a copy per example."""
    counts = [len(p) for p in positions]
    rows = torch.repeat_interleave(torch.arange(len(positions)), torch.tensor(counts, dtype=torch.long))
    columns = torch.from_numpy(np.concatenate(positions).astype(np.int64)) if positions else rows
    picked = fetch(states[rows.to(states.device), columns.to(states.device)])
    return list(torch.split(picked, counts))


def teacher_batches(model, ids: Ragged, rows: np.ndarray, pad_id: int, batch_size: int, layer: int | None = None,
                    progress=None) -> Iterator[TeacherBatch]:
    """The outputs of length-sorted batches of the sequences `ids[rows]`, with hidden layer `layer`
    when given. Each batch goes to the device once and its outputs come back once (one host sync a
    batch, never one an example), computed in the run's cache precision (fp32, or fp16 under fp16:
    these outputs are kept, and bf16 would lose bits the fp16 cache holds). Call under inference mode."""
    runtime = current()
    lengths = ids.lengths()[rows]
    for batch in length_sorted_batches(lengths, batch_size):
        tokens, mask = runtime.put(ids.pad(rows[batch], pad_id))
        with runtime.autocast(runtime.cache_precision):
            out = model(input_ids=tokens, attention_mask=mask, output_hidden_states=layer is not None)
        yield TeacherBatch(batch, fetch(out.logits), out.hidden_states[layer] if layer is not None else None)
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
    for batch, batch_logits, states in teacher_batches(model, split.ids, rows, pad_id, batch_size, layer, progress):
        picked = None if states is None else pick(states, [task.hidden_positions(split, int(rows[local]))
                                                           for local in batch])
        for k, local in enumerate(batch):
            length = int(lengths[local])
            logits[local] = batch_logits[k, :length] if task.per_token else batch_logits[k]
            if picked is not None:
                hidden[local] = picked[k]
    return logits, (hidden if layer is not None else None)


def teacher_split_logits(model, task: Task, split: PreparedSplit, pad_id: int, batch_size: int):
    """Logits for a whole split: [N, C], or a list of [len_i, C] for a per-token task."""
    logits, _ = run_teacher(model, task, split, np.arange(len(split)), pad_id, batch_size)
    return logits if task.per_token else torch.stack(logits) if logits else torch.zeros((0, 0))
