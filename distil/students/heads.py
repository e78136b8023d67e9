"""The representation head: the student's state mapped to the teacher's hidden size.

gelu(W z + b) (Mukherjee & Awadallah eq. 6; XtremeDistil Algorithm 1), on the pooled
vector of a sequence student or on every position of a tagger. The representation
losses of a schedule compare its output with the teacher's cached layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class WithRepresentation(nn.Module):
    """Wraps a student; adds `representation` to its outputs."""

    def __init__(self, student: nn.Module, teacher_hidden_size: int):
        super().__init__()
        self.student = student
        self.projection = nn.Linear(student.representation_size, teacher_hidden_size)

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        """The projection sits just under the classifier (XtremeDistil Table 4)."""
        classifier, *below = self.student.layer_groups()
        return [classifier, ("projection", self.projection), *below]

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.student(*inputs)
        state = out["states"] if "states" in out else out["pooled"]
        return {**out, "representation": F.gelu(self.projection(state))}
