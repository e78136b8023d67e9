"""One run on several processes (`torchrun --nproc_per_node=N -m distil ...`): who this process is,
and the few collectives the run needs.

torchrun (and `accelerate launch`) start N copies of the command with RANK, WORLD_SIZE and
MASTER_ADDR/MASTER_PORT in their environment. `init_from_env` joins them into one process group
(gloo on the CPU, nccl on CUDA) before Hydra composes the config, so that the run directory can be
chosen once, by rank 0, and told to the others. Without those variables (every ordinary run) the
process is rank 0 of 1 and every function here is a no-op, so the code that calls them reads the
same on one process and on many.

The rules the rest of distil follows:
- rank 0 alone writes a file another rank could also write (metrics.json, manifests, checkpoints,
  the student folder, tracking);
- every rank takes the same path through the code (the same artifacts in the same order), since a
  collective that one rank skips blocks the others forever.
"""

from __future__ import annotations

import datetime
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from distil.errors import DistilError

if TYPE_CHECKING:
    import torch

# torch is imported by the functions that need it: `distil cache list` and the store read `is_main`
# without paying for it (no process group can exist before torch is imported).

# The torchrun variables that say this process is one of several.
ENV = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
TIMEOUT = datetime.timedelta(minutes=30)  # a rank waits this long for the others (a slow teacher download)
# How long a rank other than 0 holds back its own error line: an error every rank meets (a bad path)
# is then told once, by rank 0, as torchrun stops the other processes when one exits.
REPORT_DELAY_S = 3.0
# What a collective raises when another rank has exited: gloo's TCP messages, NCCL's remote errors.
PEER_GONE = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "remote process exited")


def launched() -> bool:
    """Started by torchrun (or any launcher that sets its variables) with more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def rank_from_env() -> int:
    """This process's rank as torchrun gave it, also before the group is joined or after it is left."""
    return int(os.environ.get("RANK", "0")) if launched() else 0


def init_from_env() -> None:
    """Join the process group torchrun describes (a no-op for one process, or if already joined).
    gloo on the CPU, nccl when this rank has a CUDA GPU (LOCAL_RANK picks which)."""
    import torch
    import torch.distributed as dist

    if not launched() or dist.is_initialized():
        return
    missing = [name for name in ENV if name not in os.environ]
    if missing:
        raise DistilError(f"WORLD_SIZE={os.environ['WORLD_SIZE']} without {', '.join(missing)}: start several "
                          "processes with torchrun --nproc_per_node=N -m distil ..., or unset WORLD_SIZE")
    if torch.cuda.is_available():
        torch.cuda.set_device(local_rank())
        backend = "nccl"
    else:
        backend = "gloo"
    dist.init_process_group(backend, timeout=TIMEOUT)


def _dist():
    return sys.modules.get("torch.distributed")


def active() -> bool:
    """More than one process takes part in this run."""
    dist = _dist()
    return dist is not None and dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def rank() -> int:
    return _dist().get_rank() if active() else 0


def world_size() -> int:
    return _dist().get_world_size() if active() else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def is_main() -> bool:
    """Rank 0: the one process that writes, logs and decides."""
    return rank() == 0


def peer_stopped(error: BaseException) -> bool:
    """The error is a collective failing because another process of the run stopped (its own error is
    what the user needs, not this one)."""
    if not active():
        return False
    dist_error = getattr(_dist(), "DistBackendError", ())
    return isinstance(error, dist_error) or (isinstance(error, RuntimeError)
                                            and any(text in str(error) for text in PEER_GONE))


def before_reporting() -> None:
    """Ranks other than 0 wait a moment before they print an error of their own: if rank 0 met it too,
    rank 0 tells it and torchrun stops this process first, so the terminal reads one line, not N."""
    if active() and not is_main():
        import time

        time.sleep(REPORT_DELAY_S)


def barrier() -> None:
    if active():
        _dist().barrier()


def broadcast(value: Any, source: int = 0) -> Any:
    """`value` as `source` has it, on every rank (any picklable object)."""
    if not active():
        return value
    box = [value]
    _dist().broadcast_object_list(box, src=source)
    return box[0]


def gathered(value: Any) -> list:
    """Every rank's `value`, in rank order, on every rank (any picklable object): [value] on one process."""
    if not active():
        return [value]
    values: list = [None] * world_size()
    _dist().all_gather_object(values, value)
    return values


def any_rank(flag: bool) -> bool:
    """True on every rank if it is true on any (a non-finite loss on one rank stops them all)."""
    if not active():
        return flag
    import torch

    tensor = torch.tensor([1.0 if flag else 0.0], device=_collective_device())
    _dist().all_reduce(tensor, op=_dist().ReduceOp.MAX)
    return bool(tensor.item())


def total(*values: float) -> float | list[float]:
    """The sum of each value over the ranks, in one collective (a nan or inf on any rank makes it
    non-finite on all): one value back for one given, else a list."""
    if not active():
        return values[0] if len(values) == 1 else list(values)
    import torch

    tensor = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_collective_device())
    _dist().all_reduce(tensor)
    summed = tensor.tolist()
    return summed[0] if len(values) == 1 else summed


def my_part(batch: Sequence) -> tuple[Sequence, float]:
    """(this rank's rows of a global batch, their share of its rows): what a rank trains on and how much
    its gradients count (`sum_gradients`). One process: (the batch, 1.0)."""
    if not active():
        return batch, 1.0
    rows = share(batch)
    return rows, len(rows) / max(len(batch), 1)


def from_main(compute: Callable[[], Any]) -> Any:
    """`compute()` on rank 0, its result (or the error it raised) on every rank: a decision every rank
    must take alike (a dev score that selects an epoch or stops training) is taken once."""
    if not active():
        return compute()
    outcome: tuple[bool, Any] = (True, None)
    if is_main():
        try:
            outcome = (True, compute())
        except Exception as error:  # noqa: BLE001 - raised on every rank below, not swallowed
            outcome = (False, error)
    ok, value = broadcast(outcome)
    if not ok:
        raise value
    return value


def share(batch: Sequence) -> Sequence:
    """This rank's rows of a global batch: every n-th from the r-th (rank r of n), so each rank's part
    mixes the batch as a whole does (a balanced batch's two halves reach every rank). One process:
    all of it."""
    return batch[rank()::world_size()] if active() else batch


def sum_gradients(params: Sequence[torch.nn.Parameter], weight: float, bucket: int = 1 << 24) -> None:
    """Every rank's gradients of `params`, each scaled by its rank's `weight`, summed onto every rank:
    with weight = this rank's share of the global batch, the gradient of the global batch's mean loss
    (the arithmetic of DistributedDataParallel, done once per step over the parameters being trained,
    so a stage that unfreezes layers one by one, or a head whose parameters one loss never reaches,
    needs no wrapper rebuilt and no unused-parameter search). A parameter no rank gave a gradient keeps
    none, as on one process, so the optimiser leaves it alone."""
    if not active():
        return
    import torch

    for group in _buckets([p for p in params], bucket):
        grads = [p.grad.float() * weight if p.grad is not None else torch.zeros_like(p, dtype=torch.float32)
                 for p in group]
        present = torch.tensor([float(p.grad is not None) for p in group], device=grads[0].device)
        flat = torch.cat([g.reshape(-1) for g in grads] + [present])
        _dist().all_reduce(flat)
        offset, given = 0, flat[-len(group):].tolist()
        for index, p in enumerate(group):
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).to(p.dtype).clone() if given[index] > 0 else None
            offset += n


def _buckets(params: list, limit: int) -> list[list]:
    buckets, current, size = [], [], 0
    for p in params:
        if current and size + p.numel() > limit:
            buckets.append(current)
            current, size = [], 0
        current.append(p)
        size += p.numel()
    return buckets + ([current] if current else [])


def shutdown() -> None:
    dist = _dist()
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def _collective_device() -> torch.device:
    import torch

    return torch.device("cuda", local_rank()) if _dist().get_backend() == "nccl" else torch.device("cpu")
