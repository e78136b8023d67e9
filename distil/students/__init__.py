"""Student families: `kind` in the student config picks the builder."""

from __future__ import annotations

import torch

from distil.config import StudentConfig
from distil.errors import DistilError
from distil.students.bilstm import BiLSTMClassifier
from distil.students.bilstm_tagger import BiLSTMTagger

FAMILIES = {"bilstm": BiLSTMClassifier, "bilstm_tagger": BiLSTMTagger}


def check_student(cfg: StudentConfig, task: str) -> None:
    """Fail before any training when the student cannot do the dataset's task."""
    if cfg.kind not in FAMILIES:
        raise DistilError(
            f"student '{cfg.name}': unknown kind '{cfg.kind}'; use one of: {', '.join(FAMILIES)}"
        )
    if task not in FAMILIES[cfg.kind].TASKS:
        fitting = sorted(kind for kind, family in FAMILIES.items() if task in family.TASKS)
        raise DistilError(
            f"student '{cfg.name}' cannot do {task} (it does {', '.join(FAMILIES[cfg.kind].TASKS)}); "
            f"choose a student of kind {', '.join(fitting)}"
        )


def build_student(cfg: StudentConfig, vocab_size: int, num_labels: int, task: str) -> torch.nn.Module:
    check_student(cfg, task)
    return FAMILIES[cfg.kind].from_config(cfg, vocab_size, num_labels)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
