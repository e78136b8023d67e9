"""Student families: `kind` in the student config picks the builder."""

from __future__ import annotations

import torch

from distil.config import StudentConfig
from distil.errors import DistilError
from distil.students.bilstm import BiLSTMClassifier
from distil.students.bilstm_tagger import BiLSTMTagger
from distil.students.heads import WithRepresentation
from distil.students.rnn import RNNClassifier
from distil.students.siamese import SiameseBiLSTM
from distil.students.transformer import TransformerStudent

FAMILIES = {
    "bilstm": BiLSTMClassifier,
    "bilstm_tagger": BiLSTMTagger,
    "rnn": RNNClassifier,
    "siamese": SiameseBiLSTM,
    "transformer": TransformerStudent,
}


def reads_pairs_apart(cfg: StudentConfig) -> bool:
    return getattr(FAMILIES[cfg.kind], "READS_PAIRS_APART", False)


def reads_words(cfg: StudentConfig) -> bool:
    return getattr(FAMILIES[cfg.kind], "READS_WORDS", False)


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


def embedding_size(cfg: StudentConfig) -> int:
    """Width of the student's token embeddings (a transformer embeds at its hidden size)."""
    return cfg.hidden_size if cfg.kind == "transformer" else cfg.embedding_dim


def word_embeddings(model: torch.nn.Module) -> torch.nn.Embedding:
    """The student's token embedding layer: the first nn.Embedding it holds."""
    return next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))


def build_student(
    cfg: StudentConfig, vocab_size: int, num_labels: int, task: str, teacher_hidden_size: int | None = None
) -> torch.nn.Module:
    """The student; with `teacher_hidden_size`, wrapped with a representation head."""
    check_student(cfg, task)
    student = FAMILIES[cfg.kind].from_config(cfg, vocab_size, num_labels, task)
    return student if teacher_hidden_size is None else WithRepresentation(student, teacher_hidden_size)


def count_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
