"""`distil bench checkpoint` (part of `make bench`): what checkpointing costs a stage.

The default BiLSTM student (300-d embeddings over a 10.5k-wordpiece vocabulary, 300 units per
direction: 4.6M parameters) trains one stage step in one process, three times from the same
start: without a checkpoint, checkpointing every epoch (trainer.checkpoint_every_seconds=0), and
with the default throttle. Each checkpointed step also saves its end, as a schedule does. Two
stage sizes: a short labeled-set stage, where an epoch takes about as long as a save, and a
transfer-set stage. The overhead is the time spent in saving over the unchecked stage's time
(the total times are shown too, but they vary more than the saves cost on a shared machine).
Synthetic token ids and labels: only time is measured.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from omegaconf import OmegaConf

from distil.bench.harness import markdown
from distil.common.atomic import write_atomic
from distil.config.schema import DatasetConfig, StudentConfig, TrainerConfig
from distil.data.batching import shuffled_batches
from distil.students import build_student, count_params
from distil.tasks import make_task
from distil.training.checkpoint import Checkpoint, ScheduleCheckpoint
from distil.training.loop import fit

VOCAB, SEQ_LEN, BATCH, DEV = 10_500, 40, 64, 256
SIZES = {"labeled stage": 512, "transfer stage": 4096}
DEFAULT_EVERY = TrainerConfig.checkpoint_every_seconds


class TimedSaves:
    """Wraps Checkpoint.save to add up how long saving takes."""

    def __init__(self):
        self.seconds, self.count, self._save = 0.0, 0, Checkpoint.save

    def __enter__(self) -> TimedSaves:
        timed = self

        def save(checkpoint, state):
            start = time.perf_counter()
            timed._save(checkpoint, state)
            timed.seconds, timed.count = timed.seconds + time.perf_counter() - start, timed.count + 1
        Checkpoint.save = save
        return self

    def __exit__(self, *exc) -> None:
        Checkpoint.save = self._save


def student(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    task = make_task(OmegaConf.structured(DatasetConfig(name="bench")))
    cfg = OmegaConf.structured(StudentConfig(name="bilstm", kind="bilstm", recurrent_dropout=0.2))
    return build_student(cfg, VOCAB, 2, task)


def stage_step(examples: int, epochs: int, every: float | None, directory: Path) -> dict:
    """One stage step of `epochs` epochs; `every`: None (no checkpoint) or checkpoint_every_seconds."""
    model, rng = student(), np.random.default_rng(0)
    data = torch.from_numpy(np.random.default_rng(1).integers(2, VOCAB, (examples + DEV, SEQ_LEN)))
    labels = torch.from_numpy(np.random.default_rng(2).integers(0, 2, examples + DEV))
    mask = torch.ones(BATCH, SEQ_LEN, dtype=torch.long)

    def loss(rows):
        logits = model(data[rows], mask[: len(rows)])["logits"]
        return torch.nn.functional.cross_entropy(logits, labels[rows])

    @torch.no_grad()
    def dev_score() -> float:
        rows = np.arange(examples, examples + DEV)
        return -sum(loss(rows[i: i + BATCH]).item() for i in range(0, DEV, BATCH))

    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    schedule = None if every is None else ScheduleCheckpoint(directory / f"{examples}-{every}", every)
    with TimedSaves() as saves:
        start = time.perf_counter()
        fit(model, optimizer, lambda epoch: shuffled_batches(examples, BATCH, rng), loss, dev_score,
            epochs=epochs, patience=epochs, baseline=True,
            checkpoint=schedule.for_step("bench") if schedule else None, rng=rng)
        if schedule is not None:
            schedule.step_done(1, [], model, rng)
        seconds = time.perf_counter() - start
    return {"seconds": seconds, "saves": saves.count, "save_seconds": saves.seconds}


def run(epochs: int, sizes: dict[str, int]) -> pd.DataFrame:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for stage, examples in sizes.items():
            plain = stage_step(examples, epochs, None, Path(tmp))
            rows.append({"stage": stage, "examples": examples, "epochs": epochs, "checkpoint": "none", **plain})
            for every, label in ((0.0, "every epoch"), (DEFAULT_EVERY, f"every {DEFAULT_EVERY:g} s (default)")):
                timed = stage_step(examples, epochs, every, Path(tmp))
                rows.append({"stage": stage, "examples": examples, "epochs": epochs, "checkpoint": label, **timed})
    table = pd.DataFrame(rows)
    unchecked = table.groupby("stage")["seconds"].transform("first")
    table["overhead_%"] = 100 * table["save_seconds"] / unchecked
    return table


def bench(epochs: int, quick: bool, out: Path) -> None:
    """`distil bench checkpoint` (distil/cli/bench.py parses the arguments): measure, print, write."""
    sizes = {stage: 64 for stage in SIZES} if quick else SIZES
    table = run(epochs, sizes)
    params = count_params(student())
    text = "\n\n".join([
        "# Checkpoint cost", f"BiLSTM student, {params:,} parameters; batch {BATCH} x {SEQ_LEN} tokens; "
        f"{torch.get_num_threads()} threads; a checkpoint holds the model, Adam's state and the best weights",
        markdown(table)])
    write_atomic(out / "bench_checkpoint.md", text + "\n")
    write_atomic(out / "bench_checkpoint.csv", table.to_csv(index=False, float_format="%.4f"))
    print(text)
