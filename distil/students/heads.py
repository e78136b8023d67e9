"""The representation head: the student's state mapped to the teacher's hidden size.

gelu(W z + b) (Mukherjee & Awadallah eq. 6; XtremeDistil Algorithm 1), on the pooled
vector of a sequence student, on every position of a tagger, or on each sentence of a pair
read apart ([B, 2, H]: Wu et al. §3.1 distils each sentence against its own teacher vector).
The representation losses of a schedule compare its output with the teacher's cached layer.
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
        return {**out, "representation": F.gelu(self.projection(projected_state(out)))}


def projected_state(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the head maps: a tagger's every position, else a pair's sentences apart, else the pooled vector."""
    return next(out[key] for key in ("states", "sentences", "pooled") if key in out)
