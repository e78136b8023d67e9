"""Mukherjee & Awadallah (2019) student: embedding -> BiLSTM -> max-pool over time -> linear."""

from __future__ import annotations

import torch

from distil.students.encoders import RecurrentStudent, max_pool


class BiLSTMClassifier(RecurrentStudent):
    # A pair is read as the teacher reads it: [CLS] a [SEP] b [SEP] in one sequence.
    INPUTS = ("text", "pair")

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        states, _ = self.encoder(ids, mask)
        pooled = max_pool(states, mask)
        return {"pooled": pooled, "logits": self.classifier(self.dropout(pooled))}
