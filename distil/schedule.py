"""Run a schedule: its stages, in order, each a `fit` with the stage's weighted losses."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np
import torch

from distil.config import ScheduleConfig, StageConfig, TrainerConfig
from distil.data.batching import pad, shuffled_batches
from distil.errors import DistilError
from distil.evaluate import accuracy, student_logits
from distil.losses import LOSSES, weighted_loss
from distil.train import fit

log = logging.getLogger(__name__)

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
STAGE_DATA = ("labeled", "transfer")


@dataclass
class StudentSplit:
    """One split as the student sees it: trimmed-vocabulary ids plus targets."""

    ids: list[list[int]]
    labels: torch.Tensor  # gold label, or -1 where there is none (transfer set)
    teacher_logits: torch.Tensor

    @staticmethod
    def concat(parts: list[StudentSplit]) -> StudentSplit:
        return StudentSplit(
            [seq for p in parts for seq in p.ids],
            torch.cat([p.labels for p in parts]),
            torch.cat([p.teacher_logits for p in parts]),
        )


def validate_schedule(schedule: ScheduleConfig, trainer: TrainerConfig) -> None:
    """Fail before any training on a schedule or trainer setting that cannot run."""
    if trainer.optimizer not in OPTIMIZERS:
        raise DistilError(
            f"trainer.optimizer '{trainer.optimizer}' is unknown; use one of: {', '.join(OPTIMIZERS)}"
        )
    for stage in schedule.stages:
        unknown = sorted(set(stage.losses) - set(LOSSES))
        if unknown:
            raise DistilError(
                f"schedule '{schedule.name}' stage {stage.name}: unknown loss {unknown}; "
                f"use any of: {', '.join(LOSSES)}"
            )
        bad_data = sorted(set(stage.data) - set(STAGE_DATA))
        if bad_data or not stage.data:
            raise DistilError(
                f"schedule '{schedule.name}' stage {stage.name}: data must list some of "
                f"{', '.join(STAGE_DATA)} (got {list(stage.data)})"
            )


def run_schedule(
    schedule: ScheduleConfig,
    trainer: TrainerConfig,
    model: torch.nn.Module,
    splits: dict[str, StudentSplit],
    seed: int,
    pad_id: int = 0,
) -> list[dict]:
    """Train `model` stage by stage; returns per-stage dev/test accuracy (test only reported)."""
    rng = np.random.default_rng(seed)
    return [train_stage(schedule.name, stage, trainer, model, splits, rng, pad_id)
            for stage in schedule.stages]


def train_stage(
    schedule_name: str,
    stage: StageConfig,
    trainer: TrainerConfig,
    model: torch.nn.Module,
    splits: dict[str, StudentSplit],
    rng: np.random.Generator,
    pad_id: int,
) -> dict:
    pool = StudentSplit.concat([splits[name] for name in stage.data])
    if len(pool.ids) == 0:
        raise DistilError(
            f"schedule '{schedule_name}' stage {stage.name} has no examples in {list(stage.data)}; "
            f"choose a transfer_size above 0x or a schedule without the transfer set"
        )
    weights = dict(stage.losses)
    optimizer = OPTIMIZERS[trainer.optimizer](
        [p for p in model.parameters() if p.requires_grad], lr=trainer.lr
    )

    def loss_fn(rows: np.ndarray) -> torch.Tensor:
        ids, mask = pad([pool.ids[i] for i in rows], pad_id)
        logits = model(ids, mask)["logits"]
        return weighted_loss(weights, logits, pool.labels[rows], pool.teacher_logits[rows])

    def split_accuracy(name: str) -> float:
        split = splits[name]
        return accuracy(student_logits(model, split.ids, pad_id, trainer.eval_batch_size), split.labels)

    result = fit(
        model, optimizer,
        lambda epoch: shuffled_batches(len(pool.ids), trainer.batch_size, rng),
        loss_fn, lambda: split_accuracy("dev"),
        epochs=stage.epochs or trainer.epochs,
        patience=stage.patience or trainer.patience,
        grad_clip=trainer.grad_clip,
        description=f"{schedule_name} {stage.name} ({'+'.join(weights)})",
    )
    test_accuracy = split_accuracy("test")  # reported only; never used to select
    log.info("stage %s: dev accuracy %.4f (epoch %d), test accuracy %.4f",
             stage.name, result.best_dev, result.best_epoch, test_accuracy)
    return {
        "name": stage.name, "losses": weights, "data": list(stage.data),
        "examples": len(pool.ids), "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run, "seconds": round(result.seconds, 1),
        "dev": {"accuracy": result.best_dev}, "test": {"accuracy": test_accuracy},
        "history": result.history,
    }
