"""Fit a peer on the run's splits and teacher, score it as a student is scored, save it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from distil.errors import DistilError, check_choice
from distil.peers.base import TARGETS, check_regresses, make_peer, save_peer
from distil.teacher.load import resolve_source

PROBABILITY_FLOOR = 1e-9  # log(0) would be -inf logits for a class a peer never predicts


@dataclass
class PeerResult:
    student: dict  # metrics.json's student record: dev, test (and extra tests), params
    dev_classes: int


def train_peer(student_cfg, teacher_cfg, seed: int, task, data, prepared, views, out: Path) -> PeerResult:
    name, targets = student_cfg.peer, student_cfg.targets
    if task.inputs != "text" or not data.label_names:
        raise DistilError(f"student=peer-{name} classifies single texts, and {data.name} is a {task.name} "
                          f"dataset of {task.inputs}; use a runner student (e.g. student=static)")
    check_choice("student.targets", targets, TARGETS)
    check_regresses(name, targets)
    texts = {split: list(data.splits[split]["text"]) for split in data.splits}
    train_texts, train_labels = texts["labeled"], prepared["labeled"].labels.numpy()
    dev_labels = prepared["dev"].labels.numpy()
    if targets == "teacher":  # gold labels where there are some, the teacher's argmax on the transfer set
        pseudo = views["transfer"].all_logits().argmax(dim=-1).numpy()
        train_texts, train_labels = train_texts + texts["transfer"], np.concatenate([train_labels, pseudo])
    elif targets == "logits":  # the teacher's logits, as vectors to regress, on labeled + transfer; dev the same
        train_texts = train_texts + texts["transfer"]
        train_labels = torch.cat([views[split].all_logits() for split in ("labeled", "transfer")]).float().numpy()
        dev_labels = views["dev"].all_logits().float().numpy()
    peer = make_peer(name, seed, resolve_source(teacher_cfg))
    peer.fit(train_texts, train_labels, texts["dev"], dev_labels)
    scores = {}
    for split in ("dev", "test", *data.extra_tests):
        probabilities = peer.predict_proba(texts[split])
        logits = torch.from_numpy(np.log(np.maximum(probabilities, PROBABILITY_FLOOR))).float()
        scores[split] = task.score(logits, prepared[split], data.label_names)
        if split == "dev":
            dev_classes = len(np.unique(probabilities.argmax(axis=1)))
    labels = task.output_names(data.label_names)
    save_peer(peer, out, labels)
    config = {"student": OmegaConf.to_container(student_cfg), "task": task.name, "inputs": task.inputs,
              "labels": labels, "max_length": teacher_cfg.max_length}
    (out / "config.json").write_text(json.dumps(config, indent=2))
    params = peer.param_count()
    student = {**scores, "stages": [], "params": params, "trained_on": {"examples": len(train_texts),
               "targets": targets},
               # a peer has no embedding matrix over the teacher's wordpieces: only its own count applies
               "param_counts": {"deployed": params, "full_teacher_vocab": None, "without_embeddings": None,
                                "training_only": 0}}
    return PeerResult(student, dev_classes)
