"""Inference throughput of teacher and student on the same examples, model time only.

Batches are padded before the clock starts, so tokenisation and collation are not timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import torch

from distil.data.batching import model_inputs


@torch.inference_mode()
def examples_per_second(
    forward: Callable[..., object],
    id_lists: Sequence[Sequence[int]],
    pad_id: int,
    batch_size: int = 32,
) -> float:
    batches = [model_inputs(id_lists[i : i + batch_size], pad_id) for i in range(0, len(id_lists), batch_size)]
    forward(*batches[0])  # warm-up: first-call allocations are not throughput
    start = time.perf_counter()
    for inputs in batches:
        forward(*inputs)
    return len(id_lists) / (time.perf_counter() - start)
