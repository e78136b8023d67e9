"""Tang et al. (2019) single-sentence student, Fig. 1.

(a) embeddings -> (b) BiLSTM -> (c, d) the last backward and forward hidden states, concatenated
(no pooling over time) -> (e) a fully connected ReLU layer -> (g, h) a linear layer to the logits.

It reads lower-cased whitespace words by default, as Tang's word2vec student does, or the teacher's
wordpieces with `student.tokens=wordpieces` (the runner decides which through `reads_words`).
"""

from __future__ import annotations

import torch
from torch import nn

from distil.config.schema import StudentConfig
from distil.students.encoders import RecurrentStudent
from distil.tasks import Task


class TangStudent(RecurrentStudent):
    INPUTS = ("text",)  # sentence pairs are Tang's siamese model (Fig. 2): student=siamese
    LINEAR_CLASSIFIER = False  # a ReLU layer, then the output layer

    def __init__(self, vocab_size: int, embedding_dim: int, hidden_size: int, num_labels: int, dropout: float,
                 relu_size: int, pad_id: int = 0, num_layers: int = 1, recurrent_dropout: float = 0.0):
        # Dropout only after the ReLU layer, as the authors' released SST-2 model has it: the shared body's
        # embedding dropout is off.
        super().__init__(vocab_size, embedding_dim, hidden_size, num_labels, dropout=0.0, pad_id=pad_id,
                         num_layers=num_layers, recurrent_dropout=recurrent_dropout)
        # Replaces the body's single linear layer: Fig. 1 (e) then (g).
        self.classifier = nn.Sequential(
            nn.Linear(self.encoder.output_size, relu_size), nn.ReLU(),
            nn.Dropout(dropout), nn.Linear(relu_size, num_labels),
        )

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task):
        return cls(vocab_size, cfg.embedding_dim, cfg.hidden_size, num_labels, cfg.dropout, cfg.mlp_hidden_size,
                   num_layers=cfg.num_layers, recurrent_dropout=cfg.recurrent_dropout)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        _, last = self.encoder(ids, mask)  # [forward state after the last token, backward after the first]
        return {"pooled": last, "logits": self.classifier(last)}
