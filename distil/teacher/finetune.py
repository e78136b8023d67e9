"""Fine-tune the teacher on the labeled split, once per content key, as the papers and BERT do.

Every paper fine-tunes the pre-trained teacher end-to-end on the labeled set with cross-entropy
(Mukherjee & Awadallah §3, XtremeDistil §3 eq. 2); the recipe is BERT's (Devlin et al. §4, A.3):
AdamW, a linear warm-up then linear decay, a few epochs. Three things make it work on the papers'
small labeled sets (100 sentences per language, XtremeDistil Table 6):

- a step budget, not an epoch count: `min_steps` raises the number of passes until the teacher
  takes that many optimiser steps however small the set (`max_steps` caps it); the decay spans
  the whole budget, and early stopping never ends it before `min_steps`, or with
  `min_steps_while=at_majority` (the default job's) only while the teacher is no better than the
  majority class on dev: a teacher that learned stops when dev stops improving, evaluated every
  pass, and one still at F1 0 (NER) keeps training. The warm-up is `warmup_fraction` of the whole
  budget, or with at_majority of the planned epochs alone (BERT's 10% of its passes): a budget
  that min_steps stretched to 19 passes over 250 articles otherwise warmed up for two of the six
  the teacher needs;
- selection on dev by the metric first and the dev loss second (`DevSelection`): a teacher whose
  F1 is still 0 while its dev loss falls is improving and is not stopped;
- Tang et al.'s learning-rate grid (`lr_grid`): one fine-tuning per rate, the best on dev kept.

A teacher whose loss or weights stop being finite is never cached: the run fails naming the step,
and the build directory goes (bad settings, not work to resume). A teacher no better on dev than
always predicting the majority class (all `O` for NER) is cached, but a run distilling from it
fails unless teacher.allow_weak=true (then a warning in the log and in metrics.json,
teacher.finetune.warning); a reused teacher is checked the same way, from its recorded scores.

Every dev evaluation is checkpointed in the build directory, so a fine-tuning killed half-way
resumes from its last evaluation on the next run (a grid, after its last finished rate); the
checkpoints are removed once the teacher is saved.
"""

from __future__ import annotations

import logging
import math
import pickle
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from distil.common import distributed
from distil.common.runtime import current, precision_key
from distil.config.schema import FineTuneConfig, TeacherConfig
from distil.data.batching import shuffled_batches
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
from distil.errors import DistilError
from distil.store.artifacts import Artifact, ArtifactStore
from distil.tasks import Task
from distil.teacher.inference import teacher_split_logits
from distil.teacher.load import load_pretrained, source_identity
from distil.training.checkpoint import Checkpoint
from distil.training.loop import fit

log = logging.getLogger(__name__)

CHECKPOINT = "finetune-checkpoint.pt"  # one learning rate's fine-tuning, after its last dev evaluation
GRID = "finetune-grid.pt"  # an lr_grid's finished rates and the best weights among them


# Settings added after teachers were cached, at the value that keeps the old behaviour: left out of
# the key, so every teacher fine-tuned before them is still found.
KEEPS_OLD_KEYS = {("min_steps_while", "always")}


def teacher_spec(cfg: TeacherConfig, data: TaskData, seed: int) -> dict:
    """The fine-tuned teacher's key. The precision of its training (the active runtime's, which also
    trains it) is in it only when not fp32: fp32 keys are those from before runtimes; the device never is."""
    return {
        "source": source_identity(cfg),
        "data": data.fingerprint("labeled", "dev"),
        "seed": seed,
        "max_length": cfg.max_length,
        "finetune": {k: v for k, v in dict(cfg.finetune).items() if (k, v) not in KEEPS_OLD_KEYS},
        "selected_on": data.task.metric,  # the dataset's metric picks the best dev epoch
        **precision_key(current().precision),
    }


def ensure_teacher(cfg: TeacherConfig, task: Task, data: TaskData, prepared: dict[str, PreparedSplit],
                   store: ArtifactStore, seed: int, hub_offline: bool) -> Artifact:
    check_finetune(cfg.finetune)
    describe = {"teacher": cfg.name, "dataset": data.name, "task": task.name,
                "examples": {"labeled": len(prepared["labeled"]), "dev": len(prepared["dev"])}}
    artifact = store.get_or_build(
        "teachers", cfg.name, teacher_spec(cfg, data, seed),
        lambda out: _finetune(cfg, task, data, prepared, seed, hub_offline, out), describe=describe,
    )
    if artifact.reused:
        log.info("reusing fine-tuned teacher %s (dev %s %.4f); not fine-tuning again",
                 artifact.path, task.metric, artifact.info["dev_score"])
    else:
        log.info("fine-tuned teacher saved to %s", artifact.path)
    check_strong_enough(cfg, artifact.info)
    return artifact


def check_strong_enough(cfg: TeacherConfig, info: dict) -> None:
    """A teacher no better than the majority class on dev stops the run (a student would learn
    nothing from it) unless teacher.allow_weak; then every run distilled from it says so."""
    if "baseline_dev_score" not in info or info["dev_score"] > info["baseline_dev_score"]:
        return  # better than the baseline, or a task without classes (regression)
    if cfg.allow_weak:
        log.warning(info["warning"])
        return
    raise DistilError(
        f"the fine-tuned teacher is no better than the majority class on dev ({info['metric']} "
        f"{info['dev_score']:.4f} vs {info['baseline_dev_score']:.4f}): the student would learn nothing from it; "
        f"give it more labels or steps (dataset.split.*, teacher.finetune.min_steps), "
        f"a better {lr_setting(cfg.finetune)}, or set teacher.allow_weak=true to go on anyway")


def lr_setting(hp: FineTuneConfig) -> str:
    """The learning-rate setting a fix names, with its value."""
    if hp.lr_grid:
        return f"teacher.finetune.lr_grid (now {[float(r) for r in hp.lr_grid]})"
    return f"teacher.finetune.lr (now {hp.lr:g})"


def check_finetune(hp: FineTuneConfig) -> None:
    """A budget that cannot train is one clear error before anything loads."""
    problems = [
        (hp.epochs < 1, f"teacher.finetune.epochs={hp.epochs}: fine-tuning needs at least 1 epoch"),
        (hp.batch_size < 1, f"teacher.finetune.batch_size={hp.batch_size} must be at least 1"),
        (hp.patience < 1, f"teacher.finetune.patience={hp.patience} must be at least 1"),
        (hp.min_steps < 0, f"teacher.finetune.min_steps={hp.min_steps} must be 0 (no minimum) or more"),
        (hp.max_steps is not None and hp.max_steps < 1,
         f"teacher.finetune.max_steps={hp.max_steps} must be at least 1, or null for no cap"),
        (hp.max_steps is not None and hp.max_steps < hp.min_steps,
         f"teacher.finetune.max_steps={hp.max_steps} is below min_steps={hp.min_steps}; raise it or lower min_steps"),
        (hp.eval_every_steps < 0,
         f"teacher.finetune.eval_every_steps={hp.eval_every_steps} must be 0 (every pass) or more"),
        (hp.lr_grid is not None and (not hp.lr_grid or min(hp.lr_grid) <= 0),
         f"teacher.finetune.lr_grid={list(hp.lr_grid) if hp.lr_grid is not None else None} needs one or more "
         f"positive rates, e.g. [2e-5,3e-5,4e-5,5e-5], or null to use teacher.finetune.lr"),
        (not 0 <= hp.warmup_fraction < 1, f"teacher.finetune.warmup_fraction={hp.warmup_fraction} must be in [0, 1)"),
        (hp.min_steps_while not in MIN_STEPS_WHILE,
         f"teacher.finetune.min_steps_while={hp.min_steps_while}: choose always or at_majority"),
    ]
    for failed, message in problems:
        if failed:
            raise DistilError(message)


MIN_STEPS_WHILE = ("always", "at_majority")  # teacher.finetune.min_steps_while


@dataclass(frozen=True)
class StepBudget:
    """How many optimiser steps, in how many passes, with a dev evaluation after every round of passes."""

    steps: int  # optimiser steps in all
    steps_per_pass: int  # batches in one pass over the labeled set
    passes_per_round: int  # passes between two dev evaluations (fit's "epochs" are rounds)
    min_steps: int

    @classmethod
    def plan(cls, hp: FineTuneConfig, examples: int) -> StepBudget:
        steps_per_pass = math.ceil(examples / hp.batch_size)
        steps = max(hp.epochs * steps_per_pass, hp.min_steps)
        if hp.max_steps is not None:
            steps = min(steps, hp.max_steps)
        # at_majority lets dev stop a teacher that learned as soon as it stops improving: every pass
        passes_per_round = 1 if hp.min_steps_while == "at_majority" else max(1, math.ceil(hp.eval_every_steps /
                                                                                           steps_per_pass))
        return cls(steps, steps_per_pass, passes_per_round, min(hp.min_steps, steps))

    def warmup_steps(self, hp: FineTuneConfig) -> int:
        """The warm-up: a fraction of the whole budget, or with at_majority of the planned epochs (min_steps
        only lengthens the training of a teacher still at the majority class)."""
        planned = min(hp.epochs * self.steps_per_pass, self.steps)
        return int(hp.warmup_fraction * (planned if hp.min_steps_while == "at_majority" else self.steps))

    @property
    def steps_per_round(self) -> int:
        return self.steps_per_pass * self.passes_per_round

    @property
    def rounds(self) -> int:
        return math.ceil(self.steps / self.steps_per_round)

    def patience(self, configured: int) -> int:
        """Rounds without improvement before stopping, never so few that fit could stop before
        min_steps (fit's earliest stop is round 1 + patience)."""
        return max(configured, math.ceil(self.min_steps / self.steps_per_round) - 1)

    def round_batches(self, round_: int, examples: int, batch_size: int, rng: np.random.Generator) -> list:
        """The batches of round `round_` (1-based): whole shuffled passes, the last cut at the budget."""
        batches = [b for _ in range(self.passes_per_round) for b in shuffled_batches(examples, batch_size, rng)]
        return batches[: self.steps - (round_ - 1) * self.steps_per_round]

    def steps_run(self, rounds_run: int) -> int:
        return min(self.steps, rounds_run * self.steps_per_round)


class DevSelection(float):
    """A dev evaluation: the metric (a float, so fit logs, stores and compares it as before) and
    the dev loss beside it. One evaluation beats another when its metric is higher, or when the
    metric has not moved and the dev loss is lower: F1 often stays at exactly 0 for the first
    epochs of NER fine-tuning, and a metric-only rule stops a teacher that is still learning."""

    loss: float

    def __new__(cls, metric: float, loss: float) -> DevSelection:
        selection = super().__new__(cls, metric)
        selection.loss = loss
        return selection

    def __gt__(self, other) -> bool:
        if isinstance(other, DevSelection) and float(self) == float(other):
            return self.loss < other.loss
        return float(self) > float(other)

    def __reduce__(self):  # pickled in fit's checkpoints
        return DevSelection, (float(self), self.loss)


# Checkpoints hold DevSelections; torch.load(weights_only=True) rebuilds only allowed types.
torch.serialization.add_safe_globals([DevSelection])


def _finetune(cfg: TeacherConfig, task: Task, data: TaskData, prepared: dict[str, PreparedSplit], seed: int,
              hub_offline: bool, out: Path) -> dict:
    hp = cfg.finetune
    rates = list(hp.lr_grid) if hp.lr_grid else [hp.lr]
    budget = StepBudget.plan(hp, len(prepared["labeled"]))
    grid = _load_grid(out)
    model = tokenizer = None
    for index, lr in enumerate(rates):
        if index < len(grid["runs"]):
            continue  # finished before an interruption
        model, tokenizer = load_pretrained(cfg, task, data.label_names, seed, hub_offline)
        name = f"fine-tuning teacher {cfg.name}" + (f" lr {lr:g}" if len(rates) > 1 else "")
        run = _train_once(model, task, prepared, tokenizer.pad_token_id, seed, budget, cfg, data.label_names, lr=lr,
                          checkpoint=Checkpoint(out / CHECKPOINT), description=name)
        if grid["best"] is None or run["selection"] > grid["runs"][grid["best"]]["selection"]:
            grid["best"], grid["best_state"] = index, model.state_dict()
        grid["runs"].append(run)
        if len(rates) > 1:
            Checkpoint(out / GRID).save(grid)  # atomic: this rate is done even if the next is interrupted
        if distributed.is_main():  # under torchrun: the one process that writes the build directory
            (out / CHECKPOINT).unlink(missing_ok=True)
    best = grid["runs"][grid["best"]]
    if model is None or grid["best"] != len(rates) - 1:
        model, tokenizer = load_pretrained(cfg, task, data.label_names, seed, hub_offline)
        model.load_state_dict(grid["best_state"])
    check_finite_weights(model, best["steps"], lr_setting(hp))
    if distributed.is_main():
        model.save_pretrained(out)
        tokenizer.save_pretrained(out)
        (out / GRID).unlink(missing_ok=True)
    info = {
        "dev_score": float(best["selection"]),
        "dev_loss": best["selection"].loss,
        "metric": task.metric,
        **{k: v for k, v in best.items() if k != "selection"},
        "params": sum(p.numel() for p in model.parameters()),
        # not in the key, as the device is not: the same recipe on every global batch, one teacher for all
        **({"processes": distributed.world_size()} if distributed.active() else {}),
    }
    if len(rates) > 1:
        info["lr_grid"] = [{"lr": r["lr"], "dev": float(r["selection"]), "dev_loss": r["selection"].loss,
                            "best_epoch": r["best_epoch"]} for r in grid["runs"]]
    return {**info, **_baseline_check(task, data, prepared["dev"], info["dev_score"])}


def _train_once(model, task: Task, prepared: dict[str, PreparedSplit], pad_id: int, seed: int,
                budget: StepBudget, cfg: TeacherConfig, label_names: list[str], *, lr: float, checkpoint: Checkpoint,
                description: str) -> dict:
    """One fine-tuning at learning rate `lr`; the model ends at its best dev evaluation."""
    hp, train, dev = cfg.finetune, prepared["labeled"], prepared["dev"]
    rng = np.random.default_rng(seed)
    runtime = current()

    step = [0]  # the optimiser step the next batch makes, 1-based over the whole budget

    def round_batches(round_: int) -> list:
        step[0] = (round_ - 1) * budget.steps_per_round  # a resumed fine-tuning starts mid-budget
        return budget.round_batches(round_, len(train), hp.batch_size, rng)

    def loss_fn(rows: np.ndarray):
        step[0] += 1
        ids, mask = train.ids.pad(rows, pad_id)
        labels = task.batch_labels(train, rows, ids.shape[1])
        ids, mask, labels = runtime.put((ids, mask, labels))  # the batch's one copy to the device
        logits = model(input_ids=ids, attention_mask=mask).logits  # under fit's autocast
        return task.teacher_loss(logits.float(), labels)  # the loss in fp32 whatever the forward's precision

    def diverged(what: str) -> DistilError:
        return DistilError(f"teacher fine-tuning diverged at step {step[0]} ({what})"
                           f"{f' at lr {lr:g}' if hp.lr_grid else ''}; lower {lr_setting(hp)}")

    def evaluate() -> DevSelection:
        logits = teacher_split_logits(model, task, dev, pad_id, cfg.eval_batch_size)
        if not fits_float16(logits):  # its targets would be cached as inf: as diverged as a nan loss
            raise diverged("dev logits beyond float16's range")
        metric = task.score(logits, dev, label_names)[task.metric]
        return DevSelection(metric, split_loss(task, logits, dev))

    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=hp.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, budget.warmup_steps(hp), budget.steps)
    if hp.min_steps_while == "at_majority":  # min_steps only while no better than the majority class
        baseline = majority_dev_score(task, dev, label_names)
        stopping = {"patience": hp.patience, "min_steps": budget.min_steps,
                    "hold_min_steps": lambda best: baseline is None or not float(best) > baseline}
    else:  # always: patience stretched so that no stop comes before min_steps
        stopping = {"patience": budget.patience(hp.patience)}
    result = fit(
        model, optimizer,
        round_batches, loss_fn, evaluate,
        epochs=budget.rounds, grad_clip=1.0, scheduler=scheduler,
        description=description, checkpoint=checkpoint, rng=rng, **stopping,
        on_nonfinite=lambda value: diverged(f"loss {value:g}"),  # never train on, select or cache a diverged teacher
    )
    return {
        "selection": result.best_dev,
        "lr": lr,
        "best_epoch": result.best_epoch,  # counts dev evaluations, as patience does
        "best_step": budget.steps_run(result.best_epoch),
        "epochs_run": math.ceil(budget.steps_run(result.epochs_run) / budget.steps_per_pass),  # passes
        "steps": budget.steps_run(result.epochs_run),
        "seconds": round(result.seconds, 1),
        "history": [{**h, "step": budget.steps_run(h["epoch"]), "dev": float(h["dev"]), "dev_loss": h["dev"].loss}
                    for h in result.history],
    }


def fits_float16(logits: torch.Tensor | list[torch.Tensor]) -> bool:
    """Whether every logit is finite in float16, the precision the targets are cached in."""
    return all(torch.isfinite(rows.half()).all() for rows in (logits if isinstance(logits, list) else [logits]))


def check_finite_weights(model: torch.nn.Module, steps: int, lr: str) -> None:
    """The selected teacher's weights are all finite, or it diverged and is not saved."""
    for name, weights in model.state_dict().items():
        if weights.is_floating_point() and not torch.isfinite(weights).all():
            raise DistilError(f"teacher fine-tuning diverged: {name} is not finite after step {steps}; lower {lr}")


def split_loss(task: Task, logits, split: PreparedSplit) -> float:
    """The teacher's training loss over a whole split from its logits (tagging: every labeled
    wordpiece of the split counts once, as in training)."""
    rows = np.arange(len(split))
    if task.per_token:
        width = max(len(row) for row in logits)
        logits = torch.nn.utils.rnn.pad_sequence(logits, batch_first=True)
        return float(task.teacher_loss(logits, task.batch_labels(split, rows, width)))
    return float(task.teacher_loss(logits, task.batch_labels(split, rows, logits.shape[-1])))


def majority_logits(task: Task, split: PreparedSplit, label_names: list[str]):
    """Logits of the trivial teacher: the split's most frequent gold label everywhere (for NER, `O`),
    in the shape the task scores; None where a task has no classes (regression)."""
    if not label_names:
        return None
    classes = task.num_outputs(label_names)
    gold = split.labels.values if task.per_token else split.labels.numpy()
    gold = gold[(gold >= 0) & (gold < len(label_names))]  # no special tokens, no 'X' continuations
    one_hot = torch.nn.functional.one_hot(torch.tensor(int(np.bincount(gold).argmax())), classes).float()
    if task.per_token:
        return [one_hot.expand(int(n), classes) for n in split.ids.lengths()]
    return one_hot.expand(len(split), classes)


def majority_dev_score(task: Task, dev: PreparedSplit, label_names: list[str]) -> float | None:
    """Dev score of always predicting dev's most frequent label (None: a task without classes)."""
    logits = majority_logits(task, dev, label_names)
    return None if logits is None or len(dev) == 0 else task.score(logits, dev, label_names)[task.metric]


def _baseline_check(task: Task, data: TaskData, dev: PreparedSplit, dev_score: float) -> dict:
    """The majority baseline's dev score and, when the teacher does no better, the warning."""
    baseline = majority_dev_score(task, dev, data.label_names)
    if baseline is None:
        return {}
    found = {"baseline_dev_score": baseline}
    if not dev_score > baseline:
        found["warning"] = (
            f"the fine-tuned teacher is no better than the majority baseline on dev ({task.metric} "
            f"{dev_score:.4f} vs {baseline:.4f}, always predicting the most frequent label): the student would "
            f"learn nothing from it; give it more labeled data or steps (teacher.finetune.min_steps, "
            f"teacher.finetune.lr_grid) or a stronger teacher")  # logged by check_strong_enough
    return found


def _load_grid(out: Path) -> dict:
    """An lr_grid's progress: each finished rate's result, and the best weights among them."""
    if (out / GRID).is_file():
        try:
            grid = torch.load(out / GRID, weights_only=True, map_location="cpu")  # never unpickles code
        except pickle.UnpicklingError as error:
            first_line = str(error).strip().splitlines()[0]
            raise DistilError(f"{out / GRID} is not a plain weights checkpoint ({first_line}); "
                              f"delete it to fine-tune the learning-rate grid again") from error
        log.info("fine-tuning: resuming the learning-rate grid after %d rates", len(grid["runs"]))
        return grid
    return {"runs": [], "best": None, "best_state": None}
