"""Run a schedule: its stages, in order, each a `fit` with the stage's weighted losses."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from distil.config import ScheduleConfig, StageConfig, TrainerConfig
from distil.data.batching import Example, model_inputs, pad_labels, shuffled_batches
from distil.errors import DistilError
from distil.losses import LOSSES, weighted_loss
from distil.train import fit

log = logging.getLogger(__name__)

OPTIMIZERS = {"adam": torch.optim.Adam, "adamw": torch.optim.AdamW, "sgd": torch.optim.SGD}
STAGE_DATA = ("labeled", "transfer")


@dataclass
class StudentSplit:
    """One split as the student sees it: trimmed-vocabulary ids plus targets.

    Sequence tasks: labels [N] and teacher_logits [N, C]. Tagging: per sentence, a list
    of wordpiece labels and a [len, C] tensor. A missing gold label is -1 (transfer set).
    """

    ids: list[Example]
    labels: torch.Tensor | list[list[int]]
    teacher_logits: torch.Tensor | list[torch.Tensor]

    @property
    def per_token(self) -> bool:
        return isinstance(self.labels, list)

    def batch(self, rows, pad_id: int):
        """(model inputs, labels, teacher_logits) for these rows, padded to the longest."""
        inputs = model_inputs([self.ids[i] for i in rows], pad_id)
        if not self.per_token:
            return inputs, self.labels[rows], self.teacher_logits[rows]
        width = inputs[0].shape[1]
        labels = pad_labels([self.labels[i] for i in rows], width)
        teacher = torch.zeros((len(rows), width, self.teacher_logits[rows[0]].shape[-1]))
        for k, row in enumerate(rows):
            teacher[k, : len(self.teacher_logits[row])] = self.teacher_logits[row]
        return inputs, labels, teacher

    @staticmethod
    def concat(parts: list[StudentSplit]) -> StudentSplit:
        ids = [seq for p in parts for seq in p.ids]
        if parts[0].per_token:
            return StudentSplit(ids, [row for p in parts for row in p.labels],
                                [row for p in parts for row in p.teacher_logits])
        return StudentSplit(ids, torch.cat([p.labels for p in parts]),
                            torch.cat([p.teacher_logits for p in parts]))


# (model, split name) -> scores of that split, e.g. {"accuracy": 0.9}; built by the pipeline
SplitEvaluator = Callable[[torch.nn.Module, str], dict]


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
    evaluate: SplitEvaluator,
    metric: str,
    seed: int,
    pad_id: int = 0,
) -> list[dict]:
    """Train `model` stage by stage; returns per-stage dev/test scores (test only reported)."""
    rng = np.random.default_rng(seed)
    return [train_stage(schedule.name, stage, trainer, model, splits, evaluate, metric, rng, pad_id)
            for stage in schedule.stages]


def train_stage(
    schedule_name: str,
    stage: StageConfig,
    trainer: TrainerConfig,
    model: torch.nn.Module,
    splits: dict[str, StudentSplit],
    evaluate: SplitEvaluator,
    metric: str,
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
        inputs, labels, teacher = pool.batch(rows, pad_id)
        return weighted_loss(weights, model(*inputs)["logits"], labels, teacher)

    result = fit(
        model, optimizer,
        lambda epoch: shuffled_batches(len(pool.ids), trainer.batch_size, rng),
        loss_fn, lambda: evaluate(model, "dev")[metric],
        epochs=stage.epochs or trainer.epochs,
        patience=stage.patience or trainer.patience,
        grad_clip=trainer.grad_clip,
        description=f"{schedule_name} {stage.name} ({'+'.join(weights)})",
    )
    dev, test = evaluate(model, "dev"), evaluate(model, "test")  # test is reported, never selects
    log.info("stage %s: dev %s %.4f (epoch %d), test %s %.4f",
             stage.name, metric, dev[metric], result.best_epoch, metric, test[metric])
    return {
        "name": stage.name, "losses": weights, "data": list(stage.data),
        "examples": len(pool.ids), "batch_size": trainer.batch_size, "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run, "seconds": round(result.seconds, 1),
        "dev": dev, "test": test,
        "history": result.history,
    }
