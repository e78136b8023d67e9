"""Inference throughput of teacher and student on the same examples, model time only.

Batches are padded before the clock starts, so tokenisation and collation are not timed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from distil.common.runtime import current
from distil.data.ragged import Tokens


@torch.inference_mode()
def examples_per_second(forward: Callable[..., object], tokens: Tokens, n: int, pad_id: int,
                        batch_size: int = 32) -> float:
    """Throughput over the first `n` examples of `tokens`, in batches of `batch_size`, on the active
    runtime's device (the batches put there before the clock starts) and in its precision. A GPU runs
    its queue behind the host's back: the clock is read only after it has caught up."""
    runtime = current()
    batches = [runtime.put(tokens.pad(range(i, min(i + batch_size, n)), pad_id)) for i in range(0, n, batch_size)]
    with runtime.autocast():
        forward(*batches[0])  # warm-up: first-call allocations are not throughput
        runtime.synchronize()
        start = time.perf_counter()
        for inputs in batches:
            forward(*inputs)
        runtime.synchronize()
    return n / (time.perf_counter() - start)


@contextmanager
def torch_threads(threads: int) -> Iterator[None]:
    """torch's intra-op threads set for a block, and restored afterwards (so calling a command's
    main() from Python, as the tests do, leaves the process as it found it)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)
