"""Checkpoints of training progress, so a killed run continues where it stopped.

`Checkpoint` is one state dict in one file: written atomically (tmp + os.replace), read with
`torch.load(weights_only=True)`, so it holds only tensors, numbers, strings and containers.

`ScheduleCheckpoint` is a student's progress through its schedule: the records of the steps it
finished, where it is (stage, unfreezing step), the model and random states at that step's
start, and, inside a step, `fit`'s own state after its last saved epoch. It lives in
`<paths.cache>/checkpoints/<hash>/`, keyed by everything that changes the student's training
(not by run directory: each invocation gets a new one), under the store's exclusive lock while
the student trains, and is removed when the schedule has finished.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distil.common import distributed
from distil.common.diskspace import disk_full, free_bytes

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ROOM_MARGIN = 1 << 20  # bytes kept free beyond a checkpoint's own size before writing a second one beside it


class Checkpoint:
    """One state dict in one file. With `every_seconds`, `due()` allows a save only that long
    after the previous one: saving costs time, replaying an epoch after a crash is exact."""

    def __init__(self, path: Path, every_seconds: float = 0.0):
        self.path, self.every_seconds = Path(path), every_seconds
        self._last_save = time.monotonic()

    def load(self) -> dict | None:
        if not self.path.is_file():
            return None
        # on the CPU whatever device wrote it: the caller moves what it restores (a GPU checkpoint
        # resumes on the CPU and the other way round)
        return torch.load(self.path, weights_only=True, map_location="cpu")

    def due(self) -> bool:
        """Rank 0's clock decides for every rank under torchrun (saving gathers every rank's state)."""
        return distributed.broadcast(time.monotonic() - self._last_save >= self.every_seconds)

    def save(self, state: dict) -> None:
        """Whole or absent; written by rank 0 alone under torchrun (every rank holds the same state).

        The new checkpoint is written beside the old one and renamed over it when the disk has room for
        both. When it has not, the old one is removed first: the checkpoint then replaces its predecessor
        instead of doubling the footprint, and a crash before the new one is whole loses the checkpoint (the
        training it saved is redone), never leaves a torn one. A failed write removes what it wrote."""
        if not distributed.is_main():
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_name(self.path.name + ".partial")
        if self._no_room_beside_old():
            self.path.unlink(missing_ok=True)
        try:
            with partial.open("wb") as handle:  # through a Python file: a full disk raises OSError(ENOSPC)
                torch.save(plain(state), handle)
            os.replace(partial, self.path)  # a checkpoint is whole or absent
        except BaseException as error:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)  # a partial file would keep the disk full
            if isinstance(error, Exception) and disk_full(error):  # torch's RuntimeError names no file
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self.path)) from error
            raise
        self._last_save = time.monotonic()

    def _no_room_beside_old(self) -> bool:
        """Whether the disk lacks room for a second checkpoint the size of the one there, with a margin for
        growth (a longer history, a best state added)."""
        try:
            old = self.path.stat().st_size
        except FileNotFoundError:
            return False
        free = free_bytes(self.path.parent)
        return free is not None and free < old + old // 4 + ROOM_MARGIN

    def __str__(self) -> str:
        return str(self.path)


def plain(value: Any) -> Any:
    """`value` with numpy scalars (numbers, and strings as a split's language keys) as Python's:
    what weights_only loading accepts."""
    if isinstance(value, dict):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    return value


def rng_states(rng: np.random.Generator | None = None) -> dict:
    """Every random state training reads: torch's on the CPU and on every CUDA GPU (dropout, word
    dropout, init) and the schedule's batches (`rng`)."""
    states = {"torch_rng": torch.get_rng_state(), "cuda_rng": cuda_rng_states(), **rank_rng_states()}
    if rng is not None:
        states["numpy_rng"] = rng.bit_generator.state
    return states


def rank_rng_states() -> dict:
    """Under torchrun, every rank's own torch generators (`rank_rng`, in rank order): each draws dropout
    for its own rows, so their states part once the ranks' shares of a batch differ, and a resumed rank
    must take up its own. Nothing on one process. Every rank calls it (a collective); rank 0 saves it."""
    if not distributed.active():
        return {}
    return {"rank_rng": distributed.gathered({"torch_rng": torch.get_rng_state(), "cuda_rng": cuda_rng_states()})}


def restore_rng_states(state: dict, rng: np.random.Generator | None = None) -> None:
    """As `rng_states` saved them. A checkpoint from a GPU resumes on the CPU (its CUDA states have
    nowhere to go, and the CPU run draws nothing from them) and one from the CPU on a GPU (the GPU
    keeps its seeded state): the CPU generator and the batches' order are what both share."""
    ranks = state.get("rank_rng") or []
    # the same number of processes: each takes up its own generators (the batches' order is everyone's)
    own = ranks[distributed.rank()] if len(ranks) == distributed.world_size() > 1 else state
    torch.set_rng_state(own["torch_rng"].cpu())
    cuda = own.get("cuda_rng") or []
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([s.cpu() for s in cuda])
    if rng is not None and state.get("numpy_rng") is not None:
        rng.bit_generator.state = state["numpy_rng"]


def cuda_rng_states() -> list[torch.Tensor]:
    """The CUDA generators' states, one per GPU (none on a machine without CUDA)."""
    return torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []


class ScheduleCheckpoint:
    """A student's place in its schedule. Steps are numbered in the order they run, over all
    stages; `next_step` is the first not finished (a stage stopped by a non-finite loss skips
    its remaining steps, so it can be beyond the number of records)."""

    def __init__(self, directory: Path, every_seconds: float = 0.0):
        self.directory = Path(directory)
        self.file = Checkpoint(self.directory / "schedule.pt", every_seconds)
        self.state: dict | None = self._readable()

    def _readable(self) -> dict | None:
        """The saved state, or None if there is none or it cannot be used (then training starts over)."""
        try:
            state = self.file.load()
        except Exception as error:  # noqa: BLE001 - any unreadable file: the schedule is only redone
            problem = f"unreadable ({type(error).__name__})"
        else:
            if state is None or state.get("format") == FORMAT_VERSION:
                return state
            problem = f"format {state.get('format')}, not {FORMAT_VERSION}"
        log.warning("checkpoint %s is %s: training the student from the start", self.file, problem)
        return None

    @property
    def next_step(self) -> int:
        return self.state["next_step"] if self.state else 0

    def at_step_start(self) -> bool:
        """Whether it was saved between two steps (else inside one, or never)."""
        return self.state is not None and self.state["fit"] is None

    def finished_records(self) -> list[dict]:
        return list(self.state["records"]) if self.state else []

    def restore_step_start(self, model: torch.nn.Module, rng: np.random.Generator) -> None:
        """The model and random states as the next step found them (a step's own epochs are fit's)."""
        model.load_state_dict(self.state["model"])
        restore_rng_states(self.state, rng)

    def step_done(self, next_step: int, records: list[dict], model: torch.nn.Module,
                  rng: np.random.Generator) -> None:
        """A step finished: its record is kept, and step `next_step` starts from here."""
        self.state = {"format": FORMAT_VERSION, "next_step": next_step, "records": records,
                      "model": model.state_dict(), **rng_states(rng), "fit": None}
        self.file.save(self.state)

    def for_step(self, description: str) -> StepCheckpoint:
        return StepCheckpoint(self, description)

    def remove(self) -> None:
        if distributed.is_main():
            shutil.rmtree(self.directory, ignore_errors=True)


class StepCheckpoint:
    """What `fit` sees of a ScheduleCheckpoint: its own state for the step in progress."""

    def __init__(self, schedule: ScheduleCheckpoint, description: str):
        self.schedule, self.description = schedule, description

    def load(self) -> dict | None:
        state = self.schedule.state
        return state["fit"] if state else None

    def due(self) -> bool:
        return self.schedule.file.due()

    def save(self, fit_state: dict) -> None:
        self.schedule.state = {**(self.schedule.state or {"format": FORMAT_VERSION, "next_step": 0, "records": []}),
                               "fit": fit_state}
        self.schedule.file.save(self.schedule.state)

    def __str__(self) -> str:
        return str(self.schedule.directory)


def training_key(recipe: dict, *parts: Any) -> str:
    """A hash of everything that changes a student's training: the run's `recipe` (run.plan.training_recipe:
    the config groups that do, and the seed) and `parts` (the language of a D0 student, the data it trains on)."""
    spec = {"format": FORMAT_VERSION, **recipe, "parts": list(parts)}
    return hashlib.sha256(json.dumps(spec, sort_keys=True, default=str).encode()).hexdigest()[:16]


@contextmanager
def schedule_checkpoint(cache: str, recipe: dict, every_seconds: float, *parts: Any) -> Iterator[ScheduleCheckpoint]:
    """The student's checkpoint, held under the cache's exclusive lock for its key while it trains
    (two identical runs never write one checkpoint: the second waits), removed once it finished.
    An interrupted or failed student leaves it for the next run of the same command."""
    from distil.store.artifacts import ArtifactStore  # the store's lock, so `distil cache` sees one lock scheme

    key = training_key(recipe, *parts)
    store = ArtifactStore(cache)
    if not store.can_write(f"checkpoint-{key}"):
        # a read-only cache still serves its teacher and targets: the student trains, checkpointed in a
        # temporary directory, so only a later run's resume is lost
        log.warning("the cache %s is read-only: the student's checkpoint goes to a temporary directory (an "
                    "interrupted run starts the student again)", store.root)
        with tempfile.TemporaryDirectory(prefix="distil-checkpoint-") as tmp:
            yield ScheduleCheckpoint(Path(tmp) / key, every_seconds)
        return
    # under torchrun rank 0 holds the lock for them all: another rank waiting on it would never reach
    # the collectives rank 0 waits in
    with store.lock(f"checkpoint-{key}") if distributed.is_main() else contextlib.nullcontext():
        checkpoint = ScheduleCheckpoint(store.root / "checkpoints" / key, every_seconds)
        yield checkpoint
        checkpoint.remove()
