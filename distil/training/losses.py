"""Every loss of the runner, each a small function of (student output, target).

A schedule stage names losses from LOSSES with weights. Each loss declares what it reads
(the student's `logits`, its logit regression `scores`, or its projected `representation`) and which target it needs
(gold labels, or the teacher's outputs); `weighted_loss` applies it only to the rows that
have that target, so labeled and transfer examples share a batch. All losses are means
over those rows (examples, real tokens of a tagging batch, or each sentence's vector of a
pair: any leading dimensions are rows).

The squared-error and KL losses compare vectors; a stage's `reduction` says whether the
row's value sums or averages over the vector's units (classes, or hidden units). "mean" is
the papers' "element-wise mean-squared error" (Mukherjee & Awadallah eq. 5, 7; XtremeDistil
eq. 4) and keeps a 384-unit representation loss on the scale of a 2-class logit loss; "sum"
is the norm as written (Tang et al.'s ||.||^2; a KL divergence between distributions).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

IGNORE = -100  # padding and special-token positions of a tagging batch
REDUCTIONS = ("mean", "sum")  # over a vector's units: see the module docstring


def _per_row(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """Sum or average `values` over the last dimension, then average over every other (the rows)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction '{reduction}' is unknown; use one of {REDUCTIONS}")
    per_row = values.sum(dim=-1) if reduction == "sum" else values.mean(dim=-1)
    return per_row.mean()


# --- losses on the student's logits ------------------------------------------------------

def cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy on gold labels (Mukherjee & Awadallah eq. 3)."""
    return F.cross_entropy(logits, labels)


def squared_error(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean (prediction - gold score)^2 over examples: the supervised loss of a regression task,
    as BERT's regression head is trained (STS-B). `predicted` is [N, 1] or [N]."""
    return (predicted.reshape(-1) - target.reshape(-1).to(predicted.dtype)).pow(2).mean()


def hard_labels(labels: torch.Tensor, has_gold: torch.Tensor, teacher_logits: torch.Tensor) -> torch.Tensor:
    """The targets of hard distillation (Mukherjee & Awadallah 4.1, 6.3): the gold label where a
    row has one, the teacher's argmax only on rows without (the transfer set). The student then
    trains with one cross-entropy on the labeled set augmented by the auto-annotated one."""
    return torch.where(has_gold, labels, teacher_logits.argmax(dim=-1))


def logit_mse(logits: torch.Tensor, teacher_logits: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """1/2 ||r_s - logit_t||^2 per example (Mukherjee & Awadallah eq. 5; XtremeDistil eq. 4),
    divided by the number of classes with reduction "mean" (their "element-wise" MSE).
    Tang et al.'s ||.||^2 has no 1/2: bilstm-soft sums and doubles the weight."""
    return 0.5 * _per_row((logits - teacher_logits).pow(2), reduction)


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

def representation_mse(student: torch.Tensor, teacher: torch.Tensor, reduction: str = "mean") -> torch.Tensor:
    """1/2 ||z~_s - z_t||^2 per vector (Mukherjee & Awadallah eq. 7), divided by the number of
    hidden units with reduction "mean" (their "element-wise mean-squared error")."""
    return 0.5 * _per_row((student - teacher).pow(2), reduction)


def representation_kl(student: torch.Tensor, teacher: torch.Tensor, reduction: str = "sum") -> torch.Tensor:
    """KL(softmax(z_t) || softmax(z~_s)) over the hidden dimension (XtremeDistil eq. 6); "sum" is
    the divergence itself, "mean" divides it by the number of hidden units.

    Hidden states are not distributions. XtremeDistil's Keras `kld` clipped both vectors
    into [1e-7, 1], which zeroes the gradient of every negative unit; a softmax over the
    hidden units turns both into distributions and keeps every unit trainable."""
    target = F.log_softmax(teacher, dim=-1)
    return _per_row(target.exp() * (target - F.log_softmax(student, dim=-1)), reduction)


def representation_cosine(student: torch.Tensor, teacher: torch.Tensor) -> torch.Tensor:
    """1/2 (1 - cos(z~_s, z_t)) (Wu et al. 2019, SRA): 0 for parallel vectors, 1 for opposite."""
    return (0.5 * (1 - F.cosine_similarity(student, teacher, dim=-1))).mean()


@dataclass(frozen=True)
class LossSpec:
    fn: Callable[..., torch.Tensor]
    # "gold": rows with a gold label; "teacher": every row (teacher outputs are cached for all);
    # "gold_else_teacher": every row, its gold label or else the teacher's argmax
    needs: str
    # "logits" (the classifier W^s, XtremeDistil eq. 1), "scores" (the logit regression W^r, eq. 3: a
    # student's `scores` where W^r is its own layer, else its logits), or "representation" (compared
    # with the cached teacher layer)
    reads: str = "logits"
    tempered: bool = False  # takes the stage's temperature
    reduction: str | None = None  # compares vectors: the default reduction over their units; None: fixed


LOSSES: dict[str, LossSpec] = {
    "ce": LossSpec(cross_entropy, "gold"),
    "hard": LossSpec(cross_entropy, "gold_else_teacher"),
    "logit_mse": LossSpec(logit_mse, "teacher", reads="scores", reduction="mean"),
    "soft_ce": LossSpec(soft_cross_entropy, "teacher", tempered=True),
    "kl": LossSpec(kl_divergence, "teacher", tempered=True),
    "repr_mse": LossSpec(representation_mse, "teacher", reads="representation", reduction="mean"),
    "repr_kl": LossSpec(representation_kl, "teacher", reads="representation", reduction="sum"),
    "repr_cos": LossSpec(representation_cosine, "teacher", reads="representation"),
}
REDUCIBLE = tuple(name for name, spec in LOSSES.items() if spec.reduction is not None)


def reads_representation(losses) -> bool:
    """Whether any of these loss names compares the student with a teacher hidden layer."""
    return any(LOSSES[name].reads == "representation" for name in losses)


def reads_logits(losses) -> bool:
    """Whether any of these loss names reads an output layer (W^s's logits or W^r's scores)."""
    return any(LOSSES[name].reads in ("logits", "scores") for name in losses)


def outputs_read(losses) -> set[str]:
    """What these loss names read of the student: some of logits, scores, representation."""
    return {LOSSES[name].reads for name in losses}


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


TEACHER_ROWS = ("all", "transfer")


def example_has_gold(targets: Targets) -> torch.Tensor:
    """[B] bool: the example has a gold label (a tagged sentence: any of its tokens)."""
    if targets.has_gold is not None:
        return targets.has_gold
    labels = targets.labels
    return (labels >= 0).any(dim=1) if labels.dim() == 2 else labels >= 0


def weighted_loss(weights: dict[str, float], outputs: dict[str, torch.Tensor], targets: Targets,
                  temperature: float = 1.0, supervised: Callable[..., torch.Tensor] = cross_entropy,
                  reductions: dict[str, str] | None = None, teacher_rows: str = "all") -> torch.Tensor:
    """Sum of weight * loss over the stage's losses. `supervised` is what `ce` means for the
    task: cross-entropy on classes, squared error on a regression score. `reductions` (the
    stage's `reduction`) overrides a vector loss's default sum or mean over its units.
    `teacher_rows` "transfer" keeps the losses against the teacher to examples without a gold
    label (Mukherjee & Awadallah eq. 8, XtremeDistil eq. 7: CE over D_l, the rest over D_u)."""
    logits, labels, teacher_logits = outputs["logits"], targets.labels, targets.teacher_logits
    scores = outputs.get("scores", logits)  # W^r's r^s where it is its own layer, else the logits
    representation, teacher_hidden = outputs.get("representation"), targets.teacher_hidden
    unlabeled = ~example_has_gold(targets)  # [B]: examples of the transfer set
    logit_rows = repr_rows = unlabeled
    if logits.dim() == 3:
        # Tagging: one row per real wordpiece for logit losses; padding, [CLS] and [SEP] drop out.
        # Representation losses compare words' first pieces only: padding and 'X' drop out.
        real = labels != IGNORE
        per_token = unlabeled[:, None].expand_as(labels)
        logit_rows = per_token[real]
        logits, scores, labels, teacher_logits = logits[real], scores[real], labels[real], teacher_logits[real]
        if representation is not None and teacher_hidden is not None:
            repr_rows = per_token[targets.word_starts]
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
            if teacher_rows == "transfer":
                student, target = student[repr_rows], target[repr_rows]
        elif spec.needs == "gold":
            student, target = logits[has_gold], labels[has_gold]
        elif spec.needs == "gold_else_teacher":
            student, target = logits, hard_labels(labels, has_gold, teacher_logits)
        else:
            student, target = (scores if spec.reads == "scores" else logits), teacher_logits
            if teacher_rows == "transfer":
                student, target = student[logit_rows], target[logit_rows]
        if len(student) == 0:
            continue
        extra = {"temperature": temperature} if spec.tempered else {}
        if spec.reduction is not None:
            extra["reduction"] = (reductions or {}).get(name, spec.reduction)
        fn = supervised if name == "ce" else spec.fn
        total = total + weight * fn(student, target, **extra)
    return total
