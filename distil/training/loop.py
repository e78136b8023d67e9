"""The one training loop: teacher fine-tuning and every schedule stage run through `fit`.

Early stopping and model selection use the dev score only; the best weights seen on
dev are restored before `fit` returns.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import torch

from distil.common import distributed, tracking
from distil.common.progress import progress_bar
from distil.common.runtime import current
from distil.errors import DistilError
from distil.training.checkpoint import restore_rng_states, rng_states

log = logging.getLogger(__name__)

# A training loss this many times its first batch's (or than 1, if that is smaller) has diverged: a
# learning rate far too high (trainer.lr=1e10 gives losses near 1e22, all finite) trains nothing, and
# must not end as an "ok" run of an untrained student.
DIVERGED_GROWTH = 1e6

Batch = Any


@dataclass
class FitResult:
    best_dev: float
    best_epoch: int
    epochs_run: int
    seconds: float
    history: list[dict[str, float]] = field(default_factory=list)
    # where a non-finite training loss stopped training ("epoch 2, batch 17"), or None
    nonfinite: str | None = None


class CheckpointLike(Protocol):
    """Where `fit` keeps its state between epochs (distil.training.checkpoint.Checkpoint, StepCheckpoint)."""

    def load(self) -> dict | None: ...
    def due(self) -> bool: ...
    def save(self, state: dict) -> None: ...


def fit(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batches: Callable[[int], Sequence[Batch]],
    loss_fn: Callable[[Batch], torch.Tensor],
    evaluate: Callable[[], float],
    *,
    epochs: int,
    patience: int,
    min_steps: int = 0,
    min_improvement: float = 0.0,
    hold_min_steps: Callable[[Any], bool] | None = None,
    grad_clip: float | None = None,
    scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
    description: str = "training",
    baseline: bool = False,
    checkpoint: CheckpointLike | None = None,
    rng: np.random.Generator | None = None,
    on_nonfinite: Callable[[float], Exception] | None = None,
    lr_setting: str = "the learning rate",
) -> FitResult:
    """Train for up to `epochs`, stop after `patience` epochs without a better dev score, but never
    before `min_steps` optimiser steps: on a few hundred labels an epoch is a dozen steps, and a
    model whose dev score first falls (a tagger learning to tag everything O, a classifier
    predicting one class) would be stopped before it learned anything. An epoch is better only when
    it beats the best by more than `min_improvement` x |best| (0: any gain). With `hold_min_steps`,
    `min_steps` holds only while it says so of the best dev score so far (a teacher: while it is no
    better than the majority class).

    `batches(epoch)` gives that epoch's batches, `loss_fn(batch)` the scalar loss,
    `evaluate()` the dev score (higher is better). With `baseline`, the model as it
    comes in is scored first and counts as epoch 0: if no epoch beats it, it is restored.
    With `checkpoint` (e.g. distil.training.checkpoint.Checkpoint(path): it says when a save is due), finished
    epochs are saved there (model, optimiser, scheduler, the torch and `rng` random states,
    early-stopping state), and a run that finds one continues after that epoch exactly as if it
    had never stopped. A non-finite training loss stops training at once, before it changes the
    weights; the best weights so far are restored and `FitResult.nonfinite` says where it was, or,
    with `on_nonfinite`, the error it makes of the loss is raised (every process sees the same loss).
    A finite loss DIVERGED_GROWTH times its first batch's has diverged: `on_nonfinite`'s error, or a
    DistilError naming `lr_setting` (the setting to lower).

    On several processes (torchrun: distil.common.distributed) every process runs `fit` alike: each
    trains on its rows of every global batch and steps with the gradients of them all, rank 0 alone
    evaluates dev (its score decides for all) and saves checkpoints.
    """
    start = time.perf_counter()
    runtime = current()  # the device the model is on, and the precision of its forward passes
    scaler = runtime.grad_scaler()
    state = checkpoint.load() if checkpoint is not None else None
    if state is not None:
        _restore(state, model, optimizer, scheduler, rng, scaler)
        log.info("resuming %s after epoch %d from %s", description, state["epoch"], checkpoint)
        best_dev, best_epoch, best_state = state["best_dev"], state["best_epoch"], state["best_state"]
        history, first_epoch, stopped = state["history"], state["epoch"] + 1, state["stopped"]
        steps = state.get("steps", 0)
    else:
        best_dev, best_epoch, best_state = float("-inf"), 0, None
        history, first_epoch, stopped, steps = [], 1, False, 0
        if baseline:
            model.eval()
            best_dev = distributed.from_main(evaluate)
            best_state = _snapshot(model)
            history.append({"epoch": 0, "dev": best_dev})
    nonfinite, first_loss = None, None
    trainable = [p for p in model.parameters() if p.requires_grad]
    with progress_bar() as progress:
        task = progress.add_task(description, total=None, status="")
        for epoch in range(first_epoch, epochs + 1):
            if stopped:
                break
            epoch_batches = batches(epoch)
            # reset, not update(completed=0): a finished epoch leaves the task marked finished, and
            # its time left would read 0 for every later epoch
            progress.reset(task, total=len(epoch_batches), description=f"{description} epoch {epoch}/{epochs}")
            model.train()
            running, seen = 0.0, 0
            for number, batch in enumerate(epoch_batches, 1):
                # several processes: each takes its rows of the global batch, weighted by its share
                rows, weight = distributed.my_part(batch)  # batches are row indices under several processes
                loss, value = None, 0.0
                if weight > 0:
                    with runtime.autocast():
                        loss = loss_fn(rows)
                    value = loss.item()
                value = distributed.total(value * weight)  # the global batch's mean loss, on every rank
                if not math.isfinite(value):  # stop before it reaches the weights
                    if on_nonfinite is not None:
                        raise on_nonfinite(value)
                    nonfinite = f"epoch {epoch}, batch {number}"
                    log.warning("%s: training loss is %s at epoch %d, batch %d: stopping, keeping the best "
                                "weights so far (epoch %d)", description, value, epoch, number, best_epoch)
                    break
                first_loss = value if first_loss is None else first_loss
                if value > DIVERGED_GROWTH * max(first_loss, 1.0):
                    if on_nonfinite is not None:
                        raise on_nonfinite(value)
                    raise DistilError(f"{description} diverged at epoch {epoch}, batch {number}: its training loss "
                                      f"grew to {value:.3g} from {first_loss:.3g} at its first batch; lower "
                                      f"{lr_setting}")
                optimiser_step(loss, optimizer, trainable, grad_clip, scheduler, scaler, weight)
                running, seen, steps = running + value, seen + 1, steps + 1
                progress.update(task, advance=1, status=f"loss {running / seen:.4f}")
            if nonfinite:
                break
            model.eval()
            dev = distributed.from_main(evaluate)  # one score decides for every process
            history.append({"epoch": epoch, "train_loss": running / max(seen, 1), "dev": dev})
            tracking.current().log_epoch(description, epoch, {"train_loss": running / max(seen, 1), "dev": dev})
            log.info("%s epoch %d: train loss %.4f, dev %.4f", description, epoch,
                     running / max(seen, 1), dev)
            # without a threshold the score's own order decides (a teacher's DevSelection: the metric,
            # then the dev loss on a tie); with one, the gain must pass min_improvement x |best|
            if dev > best_dev and (not min_improvement or math.isinf(best_dev)
                                   or dev - best_dev > min_improvement * abs(best_dev)):
                best_dev, best_epoch = dev, epoch
                best_state = _snapshot(model)
            elif epoch - best_epoch >= patience and (steps >= min_steps or not (hold_min_steps is None
                                                                                or hold_min_steps(best_dev))):
                log.info("%s: no dev improvement for %d epochs, stopping", description, patience)
                stopped = True
            if checkpoint is not None and checkpoint.due():  # every rank: the state gathers theirs
                checkpoint.save({
                    "epoch": epoch, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict() if scheduler is not None else None,
                    "scaler": scaler.state_dict() if scaler.is_enabled() else None, **rng_states(rng),
                    "best_dev": best_dev, "best_epoch": best_epoch, "best_state": best_state,
                    "history": history, "stopped": stopped, "steps": steps})
            if stopped:
                break
    if best_state is not None:
        model.load_state_dict(best_state)  # restore the best model on dev
    model.eval()
    epochs_run = sum(1 for h in history if h["epoch"] > 0)
    return FitResult(best_dev, best_epoch, epochs_run, time.perf_counter() - start, history, nonfinite)


def optimiser_step(loss: torch.Tensor | None, optimizer: torch.optim.Optimizer, params: Sequence[torch.nn.Parameter],
                   grad_clip: float | None = None,
                   scheduler: torch.optim.lr_scheduler.LRScheduler | None = None,
                   scaler: torch.amp.GradScaler | None = None, weight: float = 1.0) -> None:
    """One optimiser step, the same everywhere (`fit`, and the pre-training loops, which cannot use
    `fit`: see distil/pretrain/mlm.py and sra.py): gradients from `loss`, clipped to `grad_clip` in
    total norm over `params`, then the optimiser's and the scheduler's step. With an enabled `scaler`
    (fp16, Runtime.grad_scaler) the loss is scaled before backward and the gradients unscaled before
    clipping; a step whose gradients overflowed is skipped, and the scale lowered. On several processes
    (distil.common.distributed) each one's gradients count by its `weight`, its share of the global
    batch, and every process steps with their sum; `loss` is None on a process with no rows of it."""
    optimizer.zero_grad(set_to_none=True)
    if scaler is None or not scaler.is_enabled():
        if loss is not None:
            loss.backward()
        distributed.sum_gradients(params, weight)
        if grad_clip:
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        optimizer.step()
    else:
        if loss is not None:
            scaler.scale(loss).backward()
        distributed.sum_gradients(params, weight)
        if grad_clip:
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(params, grad_clip)
        scaler.step(optimizer)
        scaler.update()
    if scheduler is not None:
        scheduler.step()


def _restore(state: dict, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
             scheduler: torch.optim.lr_scheduler.LRScheduler | None, rng: np.random.Generator | None,
             scaler: torch.amp.GradScaler) -> None:
    model.load_state_dict(state["model"])  # onto the model's own device, wherever the checkpoint was written
    optimizer.load_state_dict(state["optimizer"])  # torch moves its state to its parameters' device
    if scheduler is not None:
        scheduler.load_state_dict(state["scheduler"])
    if scaler.is_enabled() and state.get("scaler"):
        scaler.load_state_dict(state["scaler"])
    restore_rng_states(state, rng)


def _snapshot(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
