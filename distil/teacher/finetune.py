"""Fine-tune the teacher on the labeled split (early stopping on dev), once per content key."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import torch
from transformers import get_linear_schedule_with_warmup

from distil.config import TeacherConfig
from distil.data.batching import pad, pad_labels, shuffled_batches
from distil.data.encode import encode, model_labels
from distil.data.split import TaskData
from distil.evaluate import PRIMARY_METRIC, score
from distil.store import Artifact, ArtifactStore
from distil.teacher.inference import run_teacher
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
    metric = PRIMARY_METRIC[data.task]
    if artifact.reused:
        log.info("reusing fine-tuned teacher %s (dev %s %.4f); not fine-tuning again",
                 artifact.path, metric, artifact.info["dev_score"])
    else:
        log.info("fine-tuned teacher saved to %s", artifact.path)
    return artifact


def _finetune(cfg: TeacherConfig, data: TaskData, seed: int, hub_offline: bool, out: Path) -> dict:
    names = model_labels(data.task, data.label_names)
    model, tokenizer = load_pretrained(cfg, data.task, len(names), seed, hub_offline)
    x_label = len(data.label_names)
    hp = cfg.finetune
    train = encode(data.task, tokenizer, data.splits["labeled"], cfg.max_length, x_label)
    dev = encode(data.task, tokenizer, data.splits["dev"], cfg.max_length, x_label)
    gold = (train.token_labels if data.task == "tagging"
            else torch.as_tensor(data.splits["labeled"]["label"][:]))
    pad_id = tokenizer.pad_token_id
    rng = np.random.default_rng(seed)
    metric = PRIMARY_METRIC[data.task]

    def loss_fn(rows: np.ndarray) -> torch.Tensor:
        ids, mask = pad([train.ids[i] for i in rows], pad_id)
        logits = model(input_ids=ids, attention_mask=mask).logits
        if data.task == "tagging":
            labels = pad_labels([gold[i] for i in rows], ids.shape[1])
            return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=-100)
        return torch.nn.functional.cross_entropy(logits, gold[rows])

    def dev_score() -> float:
        logits, _ = run_teacher(model, dev.ids, pad_id, cfg.eval_batch_size)
        if data.task != "tagging":
            logits = torch.stack(logits)
        return score(data.task, logits, data.splits["dev"], dev, data.label_names)[metric]

    steps = hp.epochs * -(-len(train) // hp.batch_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=hp.lr, weight_decay=hp.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(hp.warmup_fraction * steps), steps)
    result = fit(
        model, optimizer,
        lambda epoch: shuffled_batches(len(train), hp.batch_size, rng),
        loss_fn, dev_score,
        epochs=hp.epochs, patience=hp.patience, grad_clip=1.0, scheduler=scheduler,
        description=f"fine-tuning teacher {cfg.name}",
    )
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "dev_score": result.best_dev,
        "metric": metric,
        "best_epoch": result.best_epoch,
        "epochs_run": result.epochs_run,
        "seconds": round(result.seconds, 1),
        "params": sum(p.numel() for p in model.parameters()),
        "history": result.history,
    }
