"""A BiLSTM tagger over the teacher's wordpieces: one label per wordpiece (XtremeDistil)."""

from __future__ import annotations

import torch

from distil.students.encoders import RecurrentStudent


class BiLSTMTagger(RecurrentStudent):
    INPUTS = ("tokens",)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        states, _ = self.encoder(ids, mask)
        return {"states": states, "logits": self.classifier(self.dropout(states))}
