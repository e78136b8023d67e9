"""Pieces shared by the recurrent students: a masked BiLSTM over embedded ids."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from distil.config.schema import StudentConfig


class BiLSTMEncoder(nn.Module):
    """ids -> embedding -> dropout -> BiLSTM; padding never reaches the recurrence.

    A batch with padding runs each direction as a one-way LSTM over the padded batch, the backward
    one over each row reversed within its own length, so every real position sees only real
    positions: the states of `pack_padded_sequence`, from the fused kernel. PyTorch's packed LSTM
    on the CPU takes 2-4x as long to train (its backward steps through the shrinking batch one
    time step at a time; tests/test_students.py holds the two paths equal, gradients included).

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
        # One direction of each layer, only ever called with self.lstm's weights: a tuple, so no
        # submodules and no state-dict entries, and built on a forked RNG so that adding them
        # changed no initialisation or dropout mask drawn after them.
        with torch.random.fork_rng(devices=[]):
            self._one_way = tuple(nn.LSTM(embedding_dim if layer == 0 else 2 * hidden_size, hidden_size,
                                          batch_first=True) for layer in range(num_layers))

    def _apply(self, fn, recurse: bool = True):
        """nn.Module's walk behind .to() / .cuda() / .half() does not see the tuple of one-way LSTMs:
        move them with the rest (their own weights are never read, but the LSTM kernel checks them)."""
        super()._apply(fn, recurse)
        for one_way in self._one_way:
            one_way._apply(fn, recurse)
        return self

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(states [B, T, 2H] with zeros at padding, last states [B, 2H]: forward end + backward start)."""
        embedded = self.dropout(self.embedding(ids))
        weights = self._weights()
        if bool(mask.all()):
            # No padding in this batch: the bidirectional kernel in one call.
            states, (final, _) = torch.func.functional_call(self.lstm, weights, (embedded,))
            return states, torch.cat([final[-2], final[-1]], dim=-1)
        return self._padded(embedded, mask, weights)

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        return [("bilstm", self.lstm), ("embeddings", self.embedding)]

    def _weights(self) -> dict[str, torch.Tensor]:
        weights = dict(self.lstm.named_parameters())
        if self.training and self.recurrent_dropout > 0:
            weights = {name: F.dropout(param, self.recurrent_dropout) if name.startswith("weight_hh") else param
                       for name, param in weights.items()}
        return weights

    def _padded(self, inputs: torch.Tensor, mask: torch.Tensor, weights: dict[str, torch.Tensor]):
        lengths = mask.sum(dim=1).clamp(min=1)  # as packing: an empty row is read as one position
        steps = torch.arange(inputs.shape[1], device=inputs.device)
        real = steps < lengths.unsqueeze(1)  # [B, T]
        # position t of a row read backwards within its length; padding stays where it is
        flip = torch.where(real, lengths.unsqueeze(1) - 1 - steps, steps).unsqueeze(-1)
        rows = torch.arange(inputs.shape[0], device=inputs.device)
        layer_input = inputs
        for layer, one_way in enumerate(self._one_way):
            if layer > 0:
                layer_input = F.dropout(layer_input, self.lstm.dropout, self.training)
            onward = self._run(one_way, weights, layer, "", layer_input)
            reversed_input = layer_input.gather(1, flip.expand(-1, -1, layer_input.shape[-1]))
            backward = self._run(one_way, weights, layer, "_reverse", reversed_input)
            backward = backward.gather(1, flip.expand(-1, -1, backward.shape[-1]))
            layer_input = torch.cat([onward, backward], dim=-1) * real.unsqueeze(-1)
        last = torch.cat([onward[rows, lengths - 1], backward[:, 0]], dim=-1)
        return layer_input, last

    @staticmethod
    def _run(one_way: nn.LSTM, weights: dict[str, torch.Tensor], layer: int, suffix: str, inputs: torch.Tensor):
        own = {f"{kind}_l0": weights[f"{kind}_l{layer}{suffix}"]
               for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")}
        return torch.func.functional_call(one_way, own, (inputs,))[0]


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
