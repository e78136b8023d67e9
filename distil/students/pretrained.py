"""Where a Transformer student starts when it is not random: a pre-trained compact BERT.

Two sources (Turc et al. 2019): the masked-LM pre-training of distil/pretrain (schedules pf, pd,
pdf: schedule.student_init=pretrained), or a released compact checkpoint (student.name_or_path, e.g.
google/bert_uncased_L-4_H-256_A-4, or a local directory). Either is an encoder over the teacher
tokenizer's full wordpiece vocabulary; the student keeps the rows of its trimmed vocabulary.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

import torch
from omegaconf import open_dict

from distil.errors import DistilError, check_choice
from distil.students.vocab import PAD, UNK, TrimmedVocab

log = logging.getLogger(__name__)

INIT = ("random", "pretrained")
PRETRAINABLE = ("transformer", "sra")  # how each is pre-trained: distil/pretrain/mlm.py, distil/pretrain/sra.py
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


@dataclass
class PretrainedStart:
    """Pre-trained weights by name over the teacher tokenizer's whole vocabulary (a BertModel's, or an
    SRA student's without its classifier), and where they came from. A student token's row in
    them: [PAD] at `pad_row`, [UNK] at `unk_row`, teacher wordpiece t at t + `offset`."""

    encoder: dict[str, torch.Tensor]
    layers: int
    hidden: int
    pad_row: int
    unk_row: int
    source: str
    embedding_key: str = WORD_EMBEDDINGS
    offset: int = 0
    info: dict = field(default_factory=dict)  # what the pre-training reported: metrics.json student.pretrained

    def rows(self, vocab: TrimmedVocab) -> list[int]:
        """The pre-trained row of each student token: [PAD], [UNK], then the trimmed vocabulary."""
        rows = [0] * len(vocab)
        rows[PAD], rows[UNK] = self.pad_row, self.unk_row
        rows[2:] = [t + self.offset for t in vocab.teacher_ids]
        return rows

    def apply(self, module: torch.nn.Module, vocab: TrimmedVocab) -> None:
        """Load every weight into `module`, the word embeddings at the student's rows; a task head
        (`classifier`) the pre-training did not have keeps its random initialisation (Wu §3.2)."""
        state = dict(self.encoder)
        state[self.embedding_key] = self.encoder[self.embedding_key][torch.as_tensor(self.rows(vocab))]
        missing, unexpected = module.load_state_dict(state, strict=False)
        missing = [name for name in missing if not name.endswith("position_ids") and not name.startswith("classifier.")]
        if missing or unexpected:
            raise DistilError(f"the pre-trained student from {self.source} does not fit a BERT encoder of "
                              f"{self.layers} layers x {self.hidden} (missing {missing[:3]}, unexpected "
                              f"{unexpected[:3]}); use a BERT-style checkpoint")


def vocab_digest(tokenizer) -> str:
    """The tokenizer's wordpiece -> id table, for keys and for comparing vocabularies."""
    return hashlib.sha256(json.dumps(sorted(tokenizer.get_vocab().items())).encode()).hexdigest()


def check_student_init(schedule_init: str, student_cfg) -> None:
    check_choice("schedule.student_init", schedule_init, INIT)
    starts_pretrained = schedule_init == "pretrained" or student_cfg.name_or_path is not None
    if student_cfg.name_or_path is not None and student_cfg.kind != "transformer":
        raise DistilError(f"student.name_or_path starts a Transformer student from a pre-trained BERT, and student "
                          f"'{student_cfg.name}' is a {student_cfg.kind}; choose student=transformer-tiny, "
                          f"transformer-mini (or any transformer-*), or leave student.name_or_path unset")
    if starts_pretrained and student_cfg.kind not in PRETRAINABLE:
        raise DistilError(f"schedule.student_init=pretrained starts a Transformer student (masked-LM pre-training, "
                          f"Turc et al.) or an SRA student (task-agnostic distillation, Wu et al.), and student "
                          f"'{student_cfg.name}' is a {student_cfg.kind}; choose student=transformer-*, student=sra, "
                          f"or a schedule without pre-training")


def from_checkpoint(student_cfg, teacher_tokenizer, hub_offline: bool) -> PretrainedStart:
    """A released compact BERT (student.name_or_path): a local directory or a hub name. It must read
    the teacher's wordpieces, since the student is trained on the teacher's tokenisation."""
    from transformers import AutoTokenizer, BertModel

    source = student_cfg.name_or_path
    local_only = hub_offline and not Path(source).is_dir()
    try:
        model = BertModel.from_pretrained(source, local_files_only=local_only, add_pooling_layer=False)
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local_only)
    except OSError as error:
        if local_only:
            raise DistilError(
                f"student.name_or_path={source} is not available offline: download it where a hub is "
                f"reachable (e.g. `huggingface-cli download {source} --local-dir <dir>`) and set "
                f"student.name_or_path=<dir>, or set hub_offline=false") from error
        raise DistilError(f"student.name_or_path={source}: cannot load a BERT checkpoint ({error})") from error
    if vocab_digest(tokenizer) != vocab_digest(teacher_tokenizer):
        raise DistilError(f"student.name_or_path={source} has its own wordpiece vocabulary ({len(tokenizer)} "
                          f"entries), not the teacher's ({len(teacher_tokenizer)}): the student reads the "
                          f"teacher's wordpieces; choose a checkpoint with the teacher's vocabulary (Turc et "
                          f"al.'s uncased compact BERTs share bert-base-uncased's, as MiniLM does)")
    config = model.config
    if config.intermediate_size != 4 * config.hidden_size:
        raise DistilError(f"student.name_or_path={source}: a {config.intermediate_size}-wide feed-forward layer is "
                          f"not the 4H of Turc et al.'s students (H={config.hidden_size}); use one of their "
                          f"compact BERTs")
    return PretrainedStart({k: v.detach().clone() for k, v in model.state_dict().items()},
                           config.num_hidden_layers, config.hidden_size, teacher_tokenizer.pad_token_id,
                           teacher_tokenizer.unk_token_id, source)


def adopt_architecture(student_cfg, start: PretrainedStart) -> None:
    """The checkpoint sets the student's depth and width (student.num_layers and hidden_size)."""
    if (student_cfg.num_layers, student_cfg.hidden_size) != (start.layers, start.hidden):
        log.info("student %s: %d layers x %d from %s (not the config's %d x %d)", student_cfg.name, start.layers,
                 start.hidden, start.source, student_cfg.num_layers, student_cfg.hidden_size)
    with open_dict(student_cfg):
        student_cfg.num_layers, student_cfg.hidden_size = start.layers, start.hidden
