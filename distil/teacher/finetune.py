"""Fine-tune the teacher on the labeled split (early stopping on dev), once per content key."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from distil.config import TeacherConfig
from distil.data.batching import pad, shuffled_batches
from distil.data.split import TaskData
from distil.data.tokenize import encode
from distil.store import Artifact, ArtifactStore
from distil.teacher.inference import predict_logits
from distil.teacher.load import load_pretrained, source_identity
from distil.train import fit

log = logging.getLogger(__name__)


def teacher_spec(cfg: TeacherConfig, data: TaskData, seed: int) -> dict:
    return {
        "source": source_identity(cfg),
        "data": data.fingerprint("labeled", "dev"),
        "seed": seed,
        "max_length": cfg.max_length,
        "finetune": dict(cfg.finetune),
    }


def ensure_teacher(
    cfg: TeacherConfig, data: TaskData, store: ArtifactStore, seed: int, hub_offline: bool
) -> Artifact:
    artifact = store.get_or_build(
        "teachers", cfg.name, teacher_spec(cfg, data, seed),
        lambda out: _finetune(cfg, data, seed, hub_offline, out),
    )
    if artifact.reused:
        log.info("reusing fine-tuned teacher %s (dev accuracy %.4f); not fine-tuning again",
                 artifact.path, artifact.info["dev_accuracy"])
    else:
        log.info("fine-tuned teacher saved to %s", artifact.path)
    return artifact


def _finetune(cfg: TeacherConfig, data: TaskData, seed: int, hub_offline: bool, out: Path) -> dict:
    model, tokenizer = load_pretrained(cfg, data.num_labels, seed, hub_offline)
    hp = cfg.finetune
    train_ids = encode(tokenizer, data.splits["labeled"], cfg.max_length)
    train_labels = torch.tensor(data.splits["labeled"]["label"])
    dev_ids = encode(tokenizer, data.splits["dev"], cfg.max_length)
    dev_labels = np.asarray(data.splits["dev"]["label"])
    pad_id = tokenizer.pad_token_id
    rng = np.random.default_rng(seed)

    def loss_fn(rows: np.ndarray) -> torch.Tensor:
        ids, mask = pad([train_ids[i] for i in rows], pad_id)
        return torch.nn.functional.cross_entropy(
            model(input_ids=ids, attention_mask=mask).logits, train_labels[rows]
        )

    def dev_accuracy() -> float:
        logits = predict_logits(model, dev_ids, pad_id, cfg.eval_batch_size)
        return float((logits.argmax(-1).numpy() == dev_labels).mean())

    steps = hp.epochs * -(-len(train_ids) // hp.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(hp.warmup_fraction * steps), steps)
    result = fit(
        model, optimizer,
        lambda epoch: shuffled_batches(len(train_ids), hp.batch_size, rng),
        loss_fn, dev_accuracy,
        epochs=hp.epochs, patience=hp.patience, grad_clip=1.0, scheduler=scheduler,
        description=f"fine-tuning teacher {cfg.name}",
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "dev_accuracy": result.best_dev,
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "seconds": round(result.seconds, 1),
        "params": sum(p.numel() for p in model.parameters()),
        "history": result.history,
    }
