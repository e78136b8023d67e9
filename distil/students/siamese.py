"""Siamese BiLSTM for sentence pairs (Tang et al. 2019, Fig. 2; Wu et al. 2019).

Both sentences go through one shared encoder; the classifier sees the comparison
features [h1, h2, h1 * h2, |h1 - h2|] through a ReLU layer. `sentences` ([B, 2, 2H]) is what
a representation head projects: each sentence on its own, compared with the teacher's
vector of that sentence alone (Wu et al. §3.1, Fig. 1c).
"""

from __future__ import annotations

import torch
from torch import nn

from distil.config.schema import StudentConfig
from distil.students.encoders import BiLSTMEncoder
from distil.tasks import Task


class SiameseBiLSTM(nn.Module):
    INPUTS = ("pair",)
    READS_PAIRS_APART = True  # the runner hands it (ids_a, mask_a, ids_b, mask_b)

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_labels: int,
                 dropout: float, mlp_hidden_size: int, pad_id: int = 0, num_layers: int = 1):
        super().__init__()
        self.encoder = BiLSTMEncoder(vocab_size, embedding_dim, hidden_size, dropout, num_layers, pad_id)
        width = self.encoder.output_size
        self.classifier = nn.Sequential(
            nn.Dropout(dropout), nn.Linear(4 * width, mlp_hidden_size), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(mlp_hidden_size, num_labels),
        )
        self.representation_size = width  # a representation head maps each sentence's vector

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout,
                   cfg.mlp_hidden_size, num_layers=cfg.num_layers)

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        return [("classifier", self.classifier), *self.encoder.layer_groups()]

    def forward(self, ids_a: torch.Tensor, mask_a: torch.Tensor,
                ids_b: torch.Tensor, mask_b: torch.Tensor) -> dict[str, torch.Tensor]:
        _, h1 = self.encoder(ids_a, mask_a)  # final forward and backward states (Tang)
        _, h2 = self.encoder(ids_b, mask_b)
        features = torch.cat([h1, h2, h1 * h2, (h1 - h2).abs()], dim=-1)
        return {"pooled": torch.cat([h1, h2], dim=-1), "sentences": torch.stack([h1, h2], dim=1),
                "logits": self.classifier(features)}
