"""Mukherjee & Awadallah's RNN baseline: whitespace words, its own vocabulary, last state.

Unlike every other student it does not read the teacher's wordpieces: the runner gives it
lower-cased whitespace tokens mapped through a word vocabulary built from its training data.
"""

from __future__ import annotations

import torch

from distil.students.encoders import RecurrentStudent


class RNNClassifier(RecurrentStudent):
    INPUTS = ("text",)
    READS_WORDS = True  # whitespace tokens, not teacher wordpieces

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        _, last = self.encoder(ids, mask)  # the last hidden state, no pooling
        return {"pooled": last, "logits": self.classifier(self.dropout(last))}
