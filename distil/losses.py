"""Every loss of the runner, each a small function of (student output, target).

A schedule stage names losses from LOSSES with weights. Each loss declares what it reads
(the student's `logits` or its projected `representation`) and which target it needs
(gold labels, or the teacher's outputs); `weighted_loss` applies it only to the rows that
have that target, so labeled and transfer examples share a batch. All losses are means
over those rows (examples, or real tokens of a tagging batch).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

IGNORE = -100  # padding and special-token positions of a tagging batch


# --- losses on the student's logits ------------------------------------------------------

def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on gold labels (Mukherjee & Awadallah eq. 3)."""
    return F.cross_entropy(logits, labels)


def squared_error(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean (prediction - gold score)^2 over examples: the supervised loss of a regression task,
    as BERT's regression head is trained (STS-B). `predicted` is [N, 1] or [N]."""
    return (predicted.reshape(-1) - target.reshape(-1).to(predicted.dtype)).pow(2).mean()


def hard_distillation(logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on the teacher's argmax pseudo-labels (Mukherjee & Awadallah 4.1)."""
    return F.cross_entropy(logits, teacher_logits.argmax(dim=-1))


def logit_mse(logits: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """1/2 ||r_s - logit_t||^2 per example (Mukherjee & Awadallah eq. 5; XtremeDistil eq. 4).
    Tang et al. use ||.||^2 without the 1/2: their schedule gives this loss weight 2."""
    return 0.5 * (logits - teacher_logits).pow(2).sum(dim=-1).mean()


def soft_cross_entropy(logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """-sum_c p_t log p_s with p = softmax(z / T), times T^2 (Turc et al.; Hinton et al.).

    The T^2 factor keeps the gradient's size independent of T (the gradient of the
    tempered softmax scales as 1/T^2), so a stage's weights mean the same at any T."""
    target = F.softmax(teacher_logits / temperature, dim=-1)
    return -(target * F.log_softmax(logits / temperature, dim=-1)).sum(dim=-1).mean() * temperature**2


def kl_divergence(logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """KL(p_t || p_s) at temperature T, times T^2: soft cross-entropy minus the teacher's
    entropy, so it has the same gradient and reaches 0 when the student matches."""
    target = F.log_softmax(teacher_logits / temperature, dim=-1)
    student = F.log_softmax(logits / temperature, dim=-1)
    return F.kl_div(student, target, log_target=True, reduction="sum") / len(logits) * temperature**2


# --- losses on the student's projected representation vs a teacher layer --------------------

def representation_mse(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """1/2 ||z~_s - z_t||^2 per example (Mukherjee & Awadallah eq. 7)."""
    return 0.5 * (student - teacher).pow(2).sum(dim=-1).mean()


def representation_kl(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """KL(softmax(z_t) || softmax(z~_s)) over the hidden dimension (XtremeDistil eq. 6).

    Hidden states are not distributions. XtremeDistil's Keras `kld` clipped both vectors
    into [1e-7, 1], which zeroes the gradient of every negative unit; a softmax over the
    hidden units turns both into distributions and keeps every unit trainable."""
    return F.kl_div(F.log_softmax(student, dim=-1), F.log_softmax(teacher, dim=-1),
                    log_target=True, reduction="sum") / len(student)


def representation_cosine(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """1/2 (1 - cos(z~_s, z_t)) (Wu et al. 2019, SRA): 0 for parallel vectors, 1 for opposite."""
    return (0.5 * (1 - F.cosine_similarity(student, teacher, dim=-1))).mean()


@dataclass(frozen=True)
class LossSpec:
    fn: Callable[..., torch.Tensor]
    needs: str  # "gold": rows with a gold label; "teacher": every row (teacher outputs are cached for all)
    reads: str = "logits"  # "logits", or "representation" (compared with the cached teacher layer)
    tempered: bool = False  # takes the stage's temperature


LOSSES: dict[str, LossSpec] = {
    "ce": LossSpec(cross_entropy, "gold"),
    "hard": LossSpec(hard_distillation, "teacher"),
    "logit_mse": LossSpec(logit_mse, "teacher"),
    "soft_ce": LossSpec(soft_cross_entropy, "teacher", tempered=True),
    "kl": LossSpec(kl_divergence, "teacher", tempered=True),
    "repr_mse": LossSpec(representation_mse, "teacher", reads="representation"),
    "repr_kl": LossSpec(representation_kl, "teacher", reads="representation"),
    "repr_cos": LossSpec(representation_cosine, "teacher", reads="representation"),
}


def reads_representation(losses) -> bool:
    """Whether any of these loss names compares the student with a teacher hidden layer."""
    return any(LOSSES[name].reads == "representation" for name in losses)


def reads_logits(losses) -> bool:
    return any(LOSSES[name].reads == "logits" for name in losses)


@dataclass
class Targets:
    """What a batch is compared with. Sequence tasks: one row per example. Tagging: [B, T, ...]
    with `labels` IGNORE at padding and special tokens, and `word_starts` marking each word's
    first wordpiece (the only positions the representation losses compare)."""

    labels: torch.Tensor  # [B] or [B, T]; -1 where there is no gold label (transfer set)
    teacher_logits: torch.Tensor  # [B, C] or [B, T, C]
    teacher_hidden: torch.Tensor | None = None  # [B, H] or [B, T, H]
    word_starts: torch.Tensor | None = None  # [B, T] bool, tagging only
    has_gold: torch.Tensor | None = None  # [B] bool where labels holds a gold label; None: labels >= 0


def weighted_loss(weights: dict[str, float], outputs: dict[str, torch.Tensor], targets: Targets,
                  temperature: float = 1.0, supervised: Callable[..., torch.Tensor] = cross_entropy) -> torch.Tensor:
    """Sum of weight * loss over the stage's losses. `supervised` is what `ce` means for the
    task: cross-entropy on classes, squared error on a regression score."""
    logits, labels, teacher_logits = outputs["logits"], targets.labels, targets.teacher_logits
    representation, teacher_hidden = outputs.get("representation"), targets.teacher_hidden
    if logits.dim() == 3:
        # Tagging: one row per real wordpiece for logit losses; padding, [CLS] and [SEP] drop out.
        # Representation losses compare words' first pieces only: padding and 'X' drop out.
        real = labels != IGNORE
        logits, labels, teacher_logits = logits[real], labels[real], teacher_logits[real]
        if representation is not None and teacher_hidden is not None:
            representation, teacher_hidden = representation[targets.word_starts], teacher_hidden[targets.word_starts]
    has_gold = targets.has_gold if targets.has_gold is not None else labels >= 0
    total = logits.new_zeros(())
    for name, weight in weights.items():
        spec = LOSSES[name]
        if weight == 0:
            continue
        if spec.reads == "representation":
            if representation is None or teacher_hidden is None:
                raise ValueError(f"loss '{name}' needs the student's representation and the teacher's hidden layer")
            student, target = representation, teacher_hidden
        elif spec.needs == "gold":
            student, target = logits[has_gold], labels[has_gold]
        else:
            student, target = logits, teacher_logits
        if len(student) == 0:
            continue
        extra = {"temperature": temperature} if spec.tempered else {}
        fn = supervised if name == "ce" else spec.fn
        total = total + weight * fn(student, target, **extra)
    return total
