"""Pieces shared by the recurrent students: a masked BiLSTM over embedded ids."""

from __future__ import annotations

import torch
from torch import nn


class BiLSTMEncoder(nn.Module):
    """ids -> embedding -> dropout -> BiLSTM; padding never reaches the LSTM (packed)."""

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, dropout: float,
                 num_layers: int = 1, pad_id: int = 0):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        self.lstm = nn.LSTM(embedding_dim, hidden_size, num_layers=num_layers, batch_first=True,
                            bidirectional=True, dropout=dropout if num_layers > 1 else 0.0)
        self.dropout = nn.Dropout(dropout)
        self.output_size = 2 * hidden_size

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(states [B, T, 2H] with zeros at padding, last states [B, 2H]: forward end + backward start)."""
        embedded = self.dropout(self.embedding(ids))
        if bool(mask.all()):
            # No padding in this batch: packing would give the same states, only slower.
            states, (final, _) = self.lstm(embedded)
        else:
            lengths = mask.sum(dim=1).clamp(min=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
            states, (final, _) = self.lstm(packed)
            states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=ids.shape[1])
        last = torch.cat([final[-2], final[-1]], dim=-1)  # top layer, forward and backward directions
        return states, last


def max_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over time of the real positions: padding must never win the max."""
    return states.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(dim=1).values
