"""Student families: `kind` in the student config picks the builder."""

from __future__ import annotations

import torch

from distil.config import StudentConfig
from distil.errors import DistilError
from distil.students.bilstm import BiLSTMClassifier

BUILDERS = {"bilstm": BiLSTMClassifier.from_config}


def build_student(cfg: StudentConfig, vocab_size: int, num_labels: int) -> torch.nn.Module:
    if cfg.kind not in BUILDERS:
        raise DistilError(
            f"student '{cfg.name}': unknown kind '{cfg.kind}'; use one of: {', '.join(BUILDERS)}"
        )
    return BUILDERS[cfg.kind](cfg, vocab_size, num_labels)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
