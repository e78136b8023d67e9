"""Wu et al. (2019) sentence representation approximation (SRA) student.

BiLSTM -> max-pool -> linear without bias -> tanh gives a sentence vector the size of the
teacher's [CLS] vector (tanh because BERT's [CLS] values lie almost all in (-1, 1)); the
task-agnostic stage trains it against the teacher with the cosine loss. A small ReLU MLP
classifies one sentence, or [s1, s2, |s1-s2|, s1*s2] for a pair read apart (§3.2, Fig. 1c); there
the representation is [B, 2, H], each sentence's vector, each distilled against the teacher's
[CLS] vector of that sentence alone (§3.1: T_x and S_x are vectors of one sentence x).
"""

from __future__ import annotations

import torch
from torch import nn

from distil.config.schema import StudentConfig
from distil.students.encoders import BiLSTMEncoder, max_pool
from distil.students.pairs import pair_features
from distil.tasks import Task


class SRAStudent(nn.Module):
    INPUTS = ("text", "pair")
    READS_PAIRS_APART = True
    NEEDS_TEACHER_SIZE = True  # its sentence vector has the teacher's hidden size
    HAS_REPRESENTATION = True  # ... and is the representation the losses compare: no extra projection

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_labels: int, dropout: float,
                 mlp_hidden_size: int, sentence_size: int, pair: bool, pad_id: int = 0, num_layers: int = 1):
        super().__init__()
        self.encoder = BiLSTMEncoder(vocab_size, embedding_dim, hidden_size, dropout, num_layers, pad_id)
        self.to_sentence = nn.Linear(self.encoder.output_size, sentence_size, bias=False)
        self.pair = pair
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear((4 if pair else 1) * sentence_size, mlp_hidden_size), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(mlp_hidden_size, num_labels),
        )
        self.representation_size = sentence_size  # per sentence

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task,
                    teacher_hidden_size: int = 768):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout, cfg.mlp_hidden_size,
                   teacher_hidden_size, pair=task.inputs == "pair", num_layers=cfg.num_layers)

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        return [("classifier", self.classifier), ("sentence", self.to_sentence), *self.encoder.layer_groups()]

    def sentence(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        states, _ = self.encoder(ids, mask)
        return torch.tanh(self.to_sentence(max_pool(states, mask)))

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        if not self.pair:
            s = self.sentence(*inputs)
            return {"pooled": s, "sentence": s, "representation": s, "logits": self.classifier(s)}
        s1, s2 = self.sentence(*inputs[:2]), self.sentence(*inputs[2:])
        features = pair_features(s1, s2)
        sentences = torch.stack([s1, s2], dim=1)  # [B, 2, H]: both sentences are distilled
        return {"pooled": torch.cat([s1, s2], dim=-1), "sentence": sentences, "representation": sentences,
                "logits": self.classifier(features)}
