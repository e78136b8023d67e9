"""Run a schedule: its stages in order, each one or more `fit` steps with the stage's losses.

A stage trains every parameter at once, or unfreezes gradually (XtremeDistil Algorithm 1;
Mukherjee & Awadallah 5.2): everything frozen, then the top layer group trains, then one
more group below joins per step, down to the embeddings. Every step keeps the best model
on dev, counting the model it started from, so a step never leaves the student worse on
dev than it found it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from distil.common.runtime import current
from distil.config.schema import ScheduleConfig, StageConfig, TrainerConfig
from distil.data.batching import balanced_batch_count, balanced_batches, pad_labels, shuffled_batches
from distil.data.ragged import Ragged, Tokens
from distil.errors import DistilError, check_choice
from distil.students.heads import OUTPUT_HEADS, predicting_view
from distil.tasks import Task
from distil.teacher.cache import TargetView
from distil.training.checkpoint import ScheduleCheckpoint
from distil.training.loop import fit
from distil.training.losses import (
    LOSSES,
    REDUCIBLE,
    REDUCTIONS,
    TEACHER_ROWS,
    Targets,
    outputs_read,
    reads_logits,
    reads_representation,
    weighted_loss,
)

log = logging.getLogger(__name__)

OPTIMIZERS = {
    "adam": lambda params, t: torch.optim.Adam(params, lr=t.lr),
    "adamw": lambda params, t: torch.optim.AdamW(params, lr=t.lr),
    "sgd": lambda params, t: torch.optim.SGD(params, lr=t.lr),
    "adadelta": lambda params, t: torch.optim.Adadelta(params, lr=t.lr, rho=t.rho),
}
LR_SCHEDULES = ("constant", "cosine")
STAGE_DATA = ("labeled", "transfer")
UNFREEZE = ("none", "gradual")
SELECT = ("auto", "metric", "loss")
SAMPLERS = ("shuffle", "balanced")


@dataclass
class StudentSplit:
    """One split as the student sees it: its tokens in the student's vocabulary, gold labels,
    and the teacher's cached outputs, read lazily from the cache shards.

    Sequence tasks: labels [N] (a class id, or a score for regression; missing where `gold`
    is False), teacher hidden [B, H], or [B, 2, H] for a pair read apart (each sentence's own
    teacher vector, as the student's representation). Tagging: wordpiece labels per sentence,
    and each word's first wordpiece (the only positions the representation losses compare)."""

    tokens: Tokens
    labels: torch.Tensor | Ragged
    gold: torch.Tensor | None  # sequence tasks: [N] bool, has a gold label (the transfer set has none)
    targets: TargetView
    word_starts: Ragged | None = None

    @property
    def per_token(self) -> bool:
        return isinstance(self.labels, Ragged)

    def __len__(self) -> int:
        return len(self.tokens)

    def batch(self, rows, pad_id: int) -> tuple[tuple[torch.Tensor, ...], Targets]:
        """(model inputs, targets) for these rows, padded to the longest."""
        inputs = self.tokens.pad(rows, pad_id)
        hidden = self.targets.hidden(rows)
        if not self.per_token:
            index = torch.as_tensor(rows, dtype=torch.long)
            return inputs, Targets(self.labels[index], self.targets.logits(rows), hidden, has_gold=self.gold[index])
        width = inputs[0].shape[1]
        targets = Targets(pad_labels([self.labels[i] for i in rows], width),
                          _pad_rows(self.targets.logits(rows), width))
        if hidden is not None:
            # cached at each word's first wordpiece only: put them back at those positions
            targets.teacher_hidden = torch.zeros((len(rows), width, hidden[0].shape[-1]))
            targets.word_starts = torch.zeros((len(rows), width), dtype=torch.bool)
            for k, row in enumerate(rows):
                starts = self.word_starts[row]
                positions = torch.from_numpy(starts[starts >= 0].astype(np.int64))
                targets.teacher_hidden[k, positions] = hidden[k]
                targets.word_starts[k, positions] = True
        return inputs, targets

    @staticmethod
    def concat(parts: list[StudentSplit]) -> StudentSplit:
        def join(values):
            if values[0] is None:
                return None
            return torch.cat(values) if isinstance(values[0], torch.Tensor) else type(values[0]).concat(values)
        return StudentSplit(join([p.tokens for p in parts]), join([p.labels for p in parts]),
                            join([p.gold for p in parts]), TargetView.concat([p.targets for p in parts]),
                            join([p.word_starts for p in parts]))


def _pad_rows(rows: list[torch.Tensor], width: int) -> torch.Tensor:
    out = torch.zeros((len(rows), width, rows[0].shape[-1]))
    for k, row in enumerate(rows):
        out[k, : len(row)] = row
    return out


# (model, split name) -> scores of that split, e.g. {"accuracy": 0.9}; built by the pipeline
SplitEvaluator = Callable[[torch.nn.Module, str], dict]


def needs_teacher_hidden(schedule: ScheduleConfig) -> bool:
    """Whether any stage compares the student with a teacher hidden layer (then it is cached)."""
    return any(reads_representation(stage.losses) for stage in schedule.stages)


def stage_epochs(stage: StageConfig, trainer: TrainerConfig) -> int:
    """Epochs for a stage, or for each of its unfreezing steps."""
    if stage.epochs:
        return stage.epochs
    return trainer.labels_only_epochs if list(stage.data) == ["labeled"] else trainer.epochs


def validate_schedule(schedule: ScheduleConfig, trainer: TrainerConfig, task: Task, batch_size: int) -> None:
    """Fail before any training on a schedule or trainer setting that cannot run. `batch_size`: the
    training batch the run will use (plan.training_batch_size: trainer.batch_size is None unless
    set on the command line)."""
    check_choice("trainer.optimizer", trainer.optimizer, OPTIMIZERS)
    check_choice("trainer.lr_schedule", trainer.lr_schedule, LR_SCHEDULES)
    for stage in schedule.stages:
        where = f"schedule '{schedule.name}' stage {stage.name}"
        unknown = sorted(set(stage.losses) - set(LOSSES))
        if unknown or not stage.losses:
            raise DistilError(f"{where}: unknown or no loss {unknown}; use any of: {', '.join(LOSSES)}")
        bad_data = sorted(set(stage.data) - set(STAGE_DATA))
        if bad_data or not stage.data:
            raise DistilError(f"{where}: data must list some of {', '.join(STAGE_DATA)} (got {list(stage.data)})")
        task.check_losses(stage.losses, where)
        check_choice("unfreeze", stage.unfreeze, UNFREEZE, where)
        check_choice("select", stage.select, SELECT, where)
        _check_reductions(stage, where)
        check_choice("teacher_rows", stage.teacher_rows, TEACHER_ROWS, where)
        _check_sampler(stage, batch_size, where)
    _check_output_layers(schedule)


def _check_output_layers(schedule: ScheduleConfig) -> None:
    """A W^r of its own (schedule.shared_output_layer=false) lives in the representation head, and the
    student predicts with W^s: the schedule must have a representation loss, and its last stage must
    train W^s (a loss on the logits: ce, hard, soft_ce, kl), or the student would predict with an
    untrained layer."""
    if schedule.shared_output_layer:
        return
    if not needs_teacher_hidden(schedule):
        raise DistilError(f"schedule '{schedule.name}': shared_output_layer=false separates W^r from W^s in the "
                          f"representation head, and no stage has a representation loss; "
                          f"use schedule.shared_output_layer=true")
    last = schedule.stages[-1]
    if "logits" not in outputs_read(last.losses):
        raise DistilError(f"schedule '{schedule.name}' stage {last.name}: with shared_output_layer=false the "
                          f"student predicts with W^s, which its last stage does not train (no ce, hard, soft_ce "
                          f"or kl); add one, or use schedule.shared_output_layer=true")


def _check_reductions(stage: StageConfig, where: str) -> None:
    for name, reduction in stage.reduction.items():
        if name not in REDUCIBLE:
            raise DistilError(f"{where}: reduction applies to {', '.join(REDUCIBLE)} (got '{name}'); remove it")
        if name not in stage.losses:
            raise DistilError(f"{where}: reduction names {name}, which the stage does not use; "
                              f"remove it or add the loss")
        check_choice(f"{name} reduction", reduction, REDUCTIONS, where)


def _check_sampler(stage: StageConfig, batch_size: int, where: str) -> None:
    check_choice("sampler", stage.sampler, SAMPLERS, where)
    if stage.sampler == "balanced" and sorted(stage.data) != sorted(STAGE_DATA):
        raise DistilError(f"{where}: sampler 'balanced' needs data [labeled, transfer] "
                          f"(got {list(stage.data)}); use sampler: shuffle")
    if stage.sampler == "balanced" and batch_size < 2:
        raise DistilError(f"{where}: sampler 'balanced' needs a training batch of 2 or more (got {batch_size}); "
                          f"set trainer.batch_size=2 or more")


def run_schedule(
    schedule: ScheduleConfig,
    trainer: TrainerConfig,
    model: torch.nn.Module,
    splits: dict[str, StudentSplit],
    evaluate: SplitEvaluator,
    task: Task,
    seed: int,
    pad_id: int = 0,
    checkpoint: ScheduleCheckpoint | None = None,
) -> list[dict]:
    """Train `model` stage by stage; one record per stage step with its dev and test scores
    (test is only reported, never used to choose). With `checkpoint`, every finished step and
    (as trainer.checkpoint_every_seconds allows) epoch is saved, and a schedule that was
    interrupted continues from there: steps already finished are not run again."""
    rng = np.random.default_rng(seed)
    records, first = (checkpoint.finished_records(), checkpoint.next_step) if checkpoint else ([], 0)
    at_step_start = checkpoint is not None and checkpoint.at_step_start()
    if at_step_start:
        checkpoint.restore_step_start(model, rng)
    number = 0  # steps over all stages, in the order they run
    for stage in schedule.stages:
        stage_trainer = StageTrainer(schedule.name, stage, trainer, model, splits, evaluate, task, rng, pad_id)
        steps = stage_trainer.steps()
        for index, (name, trainable) in enumerate(steps):
            number += 1
            if number <= first:
                continue  # finished before an interruption
            if at_step_start and number == first + 1:
                log.info("resuming %s at its start from %s", stage_trainer.description(name), checkpoint.directory)
            record = stage_trainer.step(name, trainable, checkpoint)
            records.append(record)
            if record.get("nonfinite"):
                number += len(steps) - index - 1  # the stage stops: its later steps are skipped
            if checkpoint is not None:
                checkpoint.step_done(number, records, model, rng)
            if record.get("nonfinite"):
                break
        for p in model.parameters():
            p.requires_grad_(True)
    return records


def unfreezing_groups(model: torch.nn.Module, stage: StageConfig) -> list[tuple[str, list[torch.nn.Parameter]]]:
    """The student's layer groups, top to bottom, that get an unfreezing step: those the stage's
    losses can reach. A representation-only stage starts at the projection: it has no output
    layer (XtremeDistil Algorithm 1, stage 1). A logit stage steps through the projection only
    where it sits under the classifier (schedule.projection: path, XtremeDistil Table 4); a side
    head (path: side) could not change a logit loss, so it gets no step there."""
    skip = set()
    groups = model.layer_groups()
    if any(name == "regression" for name, _ in groups):
        # W^r of its own (schedule.shared_output_layer=false): a stage steps through the output layers its
        # losses read, W^r for the logit loss, W^s for the cross-entropy (XtremeDistil Table 4: Linear
        # (W^r) in stage 2, Softmax (W^s) in stage 3), both at once in one "classifier" step
        read = outputs_read(stage.losses)
        skip.update(name for name, output in OUTPUT_HEADS.items() if output not in read)
    elif not reads_logits(stage.losses):
        skip.add("classifier")
    projection_reaches_logits = getattr(model, "in_path", False)  # schedule.projection: path
    if not (reads_representation(stage.losses) or projection_reaches_logits):
        skip.add("projection")
    kept = [(name, list(module.parameters())) for name, module in groups if name not in skip]
    heads = [params for name, params in kept if name in OUTPUT_HEADS]
    if not heads:
        return kept
    # the stage's output layer(s) make its top step, "classifier" whichever they are
    return [("classifier", [p for params in heads for p in params]),
            *[(name, params) for name, params in kept if name not in OUTPUT_HEADS]]


def selects_on_loss(stage: StageConfig) -> bool:
    """Whether the stage keeps its best epoch by its own loss on dev rather than the dev metric.
    "auto": by loss where the stage unfreezes gradually (XtremeDistil 5.3: each step restores
    "the best configuration based on validation loss") or reads no logits (its classifier is
    untrained, so the metric says nothing); by the metric otherwise."""
    if stage.select != "auto":
        return stage.select == "loss"
    return stage.unfreeze == "gradual" or not reads_logits(stage.losses)


class StageTrainer:
    """One stage: its example pool, its losses, and its steps (one, or one per layer group)."""

    def __init__(self, schedule_name: str, stage: StageConfig, trainer: TrainerConfig, model: torch.nn.Module,
                 splits: dict[str, StudentSplit], evaluate: SplitEvaluator, task: Task,
                 rng: np.random.Generator, pad_id: int):
        self.stage, self.trainer, self.model, self.task = stage, trainer, model, task
        self.splits, self.evaluate, self.metric, self.rng, self.pad_id = splits, evaluate, task.metric, rng, pad_id
        self.weights = {name: float(w) for name, w in stage.losses.items()}
        self.reductions = dict(stage.reduction)
        self.sizes = tuple(len(splits[name]) for name in stage.data)
        self.pool = StudentSplit.concat([splits[name] for name in stage.data])
        empty = len(self.pool) == 0 or (stage.sampler == "balanced" and min(self.sizes) == 0)
        if empty:
            raise DistilError(
                f"schedule '{schedule_name}' stage {stage.name} has no examples in {list(stage.data)}; "
                f"choose a transfer_size above 0x or a schedule without the transfer set"
            )
        self.select_on_loss = selects_on_loss(stage)
        self.label = f"{schedule_name} {stage.name} ({'+'.join(self.weights)})"
        # what the stage's dev and test scores read: the student, or, in a stage that trains only a W^r
        # of its own, the student predicting by W^r (students.heads.predicting_view)
        self.predictor = predicting_view(model, outputs_read(stage.losses))

    def loss(self, split: StudentSplit, rows, teacher_rows: str | None = None) -> torch.Tensor:
        runtime = current()
        inputs, targets = runtime.put(split.batch(rows, self.pad_id))  # the batch's one copy to the device
        with runtime.autocast():  # fit's own autocast covers training; dev_loss runs outside fit
            outputs = self.model(*inputs)
        # the losses in fp32: a softmax, a KL or a squared error in bf16 would round away what it compares
        outputs = {name: value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value
                   for name, value in outputs.items()}
        return weighted_loss(self.weights, outputs, targets, self.stage.temperature,
                             supervised=self.task.supervised_loss, reductions=self.reductions,
                             teacher_rows=teacher_rows or self.stage.teacher_rows)

    def effective_reductions(self) -> dict[str, str]:
        """Each vector loss of the stage and whether it sums or averages over units, as trained."""
        return {name: self.reductions.get(name, LOSSES[name].reduction) for name in self.weights
                if name in REDUCIBLE}

    def batches(self, epoch: int) -> list[np.ndarray]:
        """One epoch of row indices into the pool, by the stage's sampler."""
        if self.stage.sampler == "balanced":
            return balanced_batches(self.sizes, self.trainer.batch_size, self.rng)
        return shuffled_batches(len(self.pool), self.trainer.batch_size, self.rng)

    def batches_per_epoch(self) -> int:
        if self.stage.sampler == "balanced":
            return balanced_batch_count(self.sizes, self.trainer.batch_size)
        return -(-len(self.pool) // self.trainer.batch_size)

    @torch.no_grad()
    def dev_loss(self) -> float:
        """The stage's loss on dev (model in eval mode), averaged over examples."""
        dev = self.splits["dev"]
        total, size = 0.0, self.trainer.eval_batch_size
        for start in range(0, len(dev), size):
            rows = np.arange(start, min(start + size, len(dev)))
            # every dev row has a gold label: the teacher's losses read them all, or they would vanish
            total += self.loss(dev, rows, teacher_rows="all").item() * len(rows)
        return total / max(len(dev), 1)

    def dev_score(self) -> float:
        """What selects the best epoch: higher is better."""
        return -self.dev_loss() if self.select_on_loss else self.evaluate(self.predictor, "dev")[self.metric]

    def description(self, step: str) -> str:
        return self.label if step == "all" else f"{self.label} unfreeze {step}"

    def steps(self) -> list[tuple[str, list[torch.nn.Parameter]]]:
        """(name, parameters it trains) of each step: one, or one per layer group."""
        if self.stage.unfreeze == "none":
            return [("all", list(self.model.parameters()))]
        steps, unfrozen = [], []
        for name, params in unfreezing_groups(self.model, self.stage):
            unfrozen = unfrozen + params  # once a layer is unfrozen it stays so (Algorithm 1)
            steps.append((name, unfrozen))
        return steps

    def step(self, name: str, trainable: list[torch.nn.Parameter],
             checkpoint: ScheduleCheckpoint | None = None) -> dict:
        trainable_ids = {id(p) for p in trainable}
        for p in self.model.parameters():
            p.requires_grad_(id(p) in trainable_ids)
        params = [p for p in self.model.parameters() if p.requires_grad]
        optimizer = OPTIMIZERS[self.trainer.optimizer](params, self.trainer)  # fresh per step
        # trainer.min_steps: a step that would end before that many optimiser steps gets the epochs to reach them
        epochs = max(stage_epochs(self.stage, self.trainer), -(-self.trainer.min_steps // self.batches_per_epoch()))
        batch_size = self.trainer.batch_size
        scheduler = None
        if self.trainer.lr_schedule == "cosine":
            steps = epochs * self.batches_per_epoch()
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=steps, eta_min=self.trainer.lr_min)
        description = self.description(name)
        result = fit(
            self.model, optimizer,
            self.batches,
            lambda rows: self.loss(self.pool, rows), self.dev_score,
            epochs=epochs, patience=self.stage.patience or self.trainer.patience, min_steps=self.trainer.min_steps,
            min_improvement=self.trainer.min_improvement,
            grad_clip=self.trainer.grad_clip, scheduler=scheduler, description=description,
            baseline=True, checkpoint=checkpoint.for_step(description) if checkpoint else None, rng=self.rng,
            lr_setting=f"trainer.lr (now {self.trainer.lr:g})",
        )
        dev, test = self.evaluate(self.predictor, "dev"), self.evaluate(self.predictor, "test")
        dev_loss = -result.best_dev if self.select_on_loss else self.dev_loss()
        log.info("%s: dev %s %.4f, dev loss %.4f (epoch %d), test %s %.4f", description, self.metric,
                 dev[self.metric], dev_loss, result.best_epoch, self.metric, test[self.metric])
        return {
            "name": self.stage.name, "step": name, "losses": self.weights, "data": list(self.stage.data),
            "reduction": self.effective_reductions(), "sampler": self.stage.sampler,
            "teacher_rows": self.stage.teacher_rows,
            "examples": len(self.pool), "trainable_params": sum(p.numel() for p in params),
            "batch_size": batch_size, "optimizer": self.trainer.optimizer, "lr_schedule": self.trainer.lr_schedule,
            "selected_on": "dev loss" if self.select_on_loss else f"dev {self.metric}",
            "best_epoch": result.best_epoch, "epochs_run": result.epochs_run, "seconds": round(result.seconds, 1),
            "dev": dev, "dev_loss": dev_loss, "test": test, "history": result.history,
            **({"nonfinite": result.nonfinite} if result.nonfinite else {}),
        }
