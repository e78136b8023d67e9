"""Mukherjee & Awadallah (2019) student: embedding -> BiLSTM -> max-pool over time -> linear."""

from __future__ import annotations

import torch
from torch import nn

from distil.config import StudentConfig


class BiLSTMClassifier(nn.Module):
    # A pair is read as the teacher reads it: [CLS] a [SEP] b [SEP] in one sequence.
    TASKS = ("classification", "pair")

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int,
                 num_labels: int, dropout: float, pad_id: int = 0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, batch_first=True, bidirectional=True)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(2 * hidden_size, num_labels)

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        lengths = mask.sum(dim=1).clamp(min=1).cpu()
        embedded = self.dropout(self.embedding(ids))
        packed = nn.utils.rnn.pack_padded_sequence(
            embedded, lengths, batch_first=True, enforce_sorted=False
        )
        states, _ = self.lstm(packed)
        states, _ = nn.utils.rnn.pad_packed_sequence(
            states, batch_first=True, total_length=ids.shape[1]
        )
        # Padding must never win the max: it would leak batch composition into the features.
        states = states.masked_fill(~mask.bool().unsqueeze(-1), float("-inf"))
        pooled = states.max(dim=1).values
        return {"pooled": pooled, "logits": self.classifier(self.dropout(pooled))}
