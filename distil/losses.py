"""Every loss of the runner, each a small function of (student outputs, batch targets).

A schedule stage names losses from LOSSES with weights. Each loss declares which
target it needs ("gold" labels or "teacher" outputs); the stage applies it only to
the examples that have that target, so labeled and transfer examples can share a batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on gold labels (Mukherjee & Awadallah eq. 3), mean over examples."""
    return F.cross_entropy(logits, labels)


def hard_distillation(logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the teacher's argmax pseudo-labels (Mukherjee & Awadallah 4.1)."""
    return F.cross_entropy(logits, teacher_logits.argmax(dim=-1))


def logit_mse(logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """1/2 ||r_s - logit_t||^2 per example (Mukherjee & Awadallah eq. 5), mean over examples."""
    return 0.5 * (logits - teacher_logits.float()).pow(2).sum(dim=-1).mean()


@dataclass(frozen=True)
class LossSpec:
    fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    needs: str  # "gold": examples with a label; "teacher": examples with teacher targets


LOSSES: dict[str, LossSpec] = {
    "ce": LossSpec(cross_entropy, "gold"),
    "hard": LossSpec(hard_distillation, "teacher"),
    "logit_mse": LossSpec(logit_mse, "teacher"),
}


IGNORE = -100  # special-token positions of a tagging batch


def flatten_tokens(logits: torch.Tensor, labels: torch.Tensor, teacher_logits: torch.Tensor):
    """Tagging batches ([B, T, C]) become one row per real wordpiece, so every loss below
    works on [rows, C] alike; padding and special tokens are dropped here."""
    if logits.dim() == 2:
        return logits, labels, teacher_logits
    keep = labels != IGNORE
    return logits[keep], labels[keep], teacher_logits[keep]


def weighted_loss(
    weights: dict[str, float],
    logits: torch.Tensor,
    labels: torch.Tensor,
    teacher_logits: torch.Tensor,
) -> torch.Tensor:
    """Sum of weight * loss, each loss averaged over the batch examples (or tokens) it applies to."""
    logits, labels, teacher_logits = flatten_tokens(logits, labels, teacher_logits)
    has_gold = labels >= 0
    total = logits.new_zeros(())
    for name, weight in weights.items():
        spec = LOSSES[name]
        if spec.needs == "gold":
            if has_gold.any():
                total = total + weight * spec.fn(logits[has_gold], labels[has_gold])
        else:
            total = total + weight * spec.fn(logits, teacher_logits)
    return total
