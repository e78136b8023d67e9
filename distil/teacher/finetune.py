"""Fine-tune the teacher on the labeled split (early stopping on dev), once per content key.

Every finished epoch is checkpointed in the build directory, so a fine-tuning killed half-way
resumes from its last epoch on the next run; the checkpoint is removed once the teacher is saved.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from distil.config import TeacherConfig
from distil.data.batching import shuffled_batches
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
from distil.store import Artifact, ArtifactStore
from distil.tasks import Task
from distil.teacher.inference import teacher_split_logits
from distil.teacher.load import load_pretrained, source_identity
from distil.train import fit

log = logging.getLogger(__name__)

CHECKPOINT = "finetune-checkpoint.pt"


def teacher_spec(cfg: TeacherConfig, data: TaskData, seed: int) -> dict:
    return {
        "source": source_identity(cfg),
        "data": data.fingerprint("labeled", "dev"),
        "seed": seed,
        "max_length": cfg.max_length,
        "finetune": dict(cfg.finetune),
        "selected_on": data.task.metric,  # the dataset's metric picks the best dev epoch
    }


def ensure_teacher(cfg: TeacherConfig, task: Task, data: TaskData, prepared: dict[str, PreparedSplit],
                   store: ArtifactStore, seed: int, hub_offline: bool) -> Artifact:
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
    return artifact


def _finetune(cfg: TeacherConfig, task: Task, data: TaskData, prepared: dict[str, PreparedSplit], seed: int,
              hub_offline: bool, out: Path) -> dict:
    model, tokenizer = load_pretrained(cfg, task, data.label_names, seed, hub_offline)
    hp = cfg.finetune
    train, dev = prepared["labeled"], prepared["dev"]
    pad_id = tokenizer.pad_token_id
    rng = np.random.default_rng(seed)

    def loss_fn(rows: np.ndarray):
        ids, mask = train.ids.pad(rows, pad_id)
        logits = model(input_ids=ids, attention_mask=mask).logits
        return task.teacher_loss(logits, task.batch_labels(train, rows, ids.shape[1]))

    def dev_score() -> float:
        logits = teacher_split_logits(model, task, dev, pad_id, cfg.eval_batch_size)
        return task.score(logits, dev, data.label_names)[task.metric]

    steps = hp.epochs * -(-len(train) // hp.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(hp.warmup_fraction * steps), steps)
    result = fit(
        model, optimizer,
        lambda epoch: shuffled_batches(len(train), hp.batch_size, rng),
        loss_fn, dev_score,
        epochs=hp.epochs, patience=hp.patience, grad_clip=1.0, scheduler=scheduler,
        description=f"fine-tuning teacher {cfg.name}", checkpoint=out / CHECKPOINT, rng=rng,
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / CHECKPOINT).unlink()
    return {
        "dev_score": result.best_dev,
        "metric": task.metric,
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "seconds": round(result.seconds, 1),
        "params": sum(p.numel() for p in model.parameters()),
        "history": result.history,
    }
