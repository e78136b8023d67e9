"""Mukherjee & Awadallah (2019) student: embedding -> BiLSTM -> max-pool over time -> linear."""

from __future__ import annotations

import torch
from torch import nn

from distil.config import StudentConfig
from distil.students.encoders import BiLSTMEncoder, max_pool


class BiLSTMClassifier(nn.Module):
    # A pair is read as the teacher reads it: [CLS] a [SEP] b [SEP] in one sequence.
    TASKS = ("classification", "pair")

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 num_labels: int, dropout: float, pad_id: int = 0, num_layers: int = 1):
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
        states, _ = self.encoder(ids, mask)
        pooled = max_pool(states, mask)
        return {"pooled": pooled, "logits": self.classifier(self.dropout(pooled))}
