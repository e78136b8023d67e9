"""Pieces shared by the recurrent students: a masked BiLSTM over embedded ids."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from distil.config import StudentConfig


class BiLSTMEncoder(nn.Module):
    """ids -> embedding -> dropout -> BiLSTM; padding never reaches the LSTM (packed).

    `recurrent_dropout` drops hidden-to-hidden weights while training (DropConnect, as in
    AWD-LSTM): PyTorch's fused LSTM has no per-step dropout of h(t-1), and this keeps the
    fused kernel while regularising the recurrence the way Mukherjee & Awadallah intend.
    """

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, dropout: float,
                 num_layers: int = 1, pad_id: int = 0, recurrent_dropout: float = 0.0):
        super().__init__()
        self.recurrent_dropout = recurrent_dropout
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
            states, (final, _) = self._lstm(embedded)
        else:
            lengths = mask.sum(dim=1).clamp(min=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(embedded, lengths, batch_first=True, enforce_sorted=False)
            states, (final, _) = self._lstm(packed)
            states, _ = nn.utils.rnn.pad_packed_sequence(states, batch_first=True, total_length=ids.shape[1])
        last = torch.cat([final[-2], final[-1]], dim=-1)  # top layer, forward and backward directions
        return states, last

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        return [("bilstm", self.lstm), ("embeddings", self.embedding)]

    def _lstm(self, inputs):
        if not (self.training and self.recurrent_dropout > 0):
            return self.lstm(inputs)
        weights = {name: F.dropout(param, self.recurrent_dropout) if name.startswith("weight_hh") else param
                   for name, param in self.lstm.named_parameters()}
        return torch.func.functional_call(self.lstm, weights, (inputs,))


def max_pool(states: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Max over time of the real positions: padding must never win the max."""
    return states.masked_fill(~mask.bool().unsqueeze(-1), float("-inf")).max(dim=1).values


class RecurrentStudent(nn.Module):
    """Embedding -> BiLSTM encoder -> dropout -> linear: the body every recurrent student shares.
    Subclasses decide what the classifier reads (max-pool, last state, every position)."""

    INPUTS: tuple[str, ...] = ()  # what it reads: "text", "pair" (joined), "tokens" (tagging)
    LINEAR_CLASSIFIER = True  # `classifier` is one nn.Linear over the state (a projection can go under it)

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_labels: int,
                 dropout: float, pad_id: int = 0, num_layers: int = 1, recurrent_dropout: float = 0.0):
        super().__init__()
        self.encoder = BiLSTMEncoder(vocab_size, embedding_dim, hidden_size, dropout, num_layers, pad_id,
                                     recurrent_dropout)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.encoder.output_size, num_labels)
        self.representation_size = self.encoder.output_size

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        """Top to bottom, the order gradual unfreezing follows (XtremeDistil Table 4)."""
        return [("classifier", self.classifier), *self.encoder.layer_groups()]

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout,
                   num_layers=cfg.num_layers, recurrent_dropout=cfg.recurrent_dropout)
