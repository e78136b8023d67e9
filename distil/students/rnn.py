"""Mukherjee & Awadallah's RNN baseline: whitespace words, its own vocabulary, last state.

Unlike every other student it does not read the teacher's wordpieces: the runner gives it
lower-cased whitespace tokens mapped through a word vocabulary built from its training data.
"""

from __future__ import annotations

import torch
from torch import nn

from distil.config import StudentConfig
from distil.students.encoders import BiLSTMEncoder


class RNNClassifier(nn.Module):
    TASKS = ("classification",)
    READS_WORDS = True  # whitespace tokens, not teacher wordpieces

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_labels: int,
                 dropout: float, pad_id: int = 0, num_layers: int = 1):
        super().__init__()
        self.encoder = BiLSTMEncoder(vocab_size, embedding_dim, hidden_size, dropout, num_layers, pad_id)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.encoder.output_size, num_labels)
        self.representation_size = self.encoder.output_size

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: str):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout,
                   num_layers=cfg.num_layers)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        _, last = self.encoder(ids, mask)  # the last hidden state, no pooling
        return {"pooled": last, "logits": self.classifier(self.dropout(last))}
