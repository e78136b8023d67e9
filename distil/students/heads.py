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

from distil.errors import DistilError, check_choice

PLACES = ("side", "path")


class WithRepresentation(nn.Module):
    """Wraps a student; adds `representation` to its outputs.

    `place` says where the projection sits. "side": a head beside the classifier, used only
    by the representation losses and dropped at deployment (Mukherjee & Awadallah eq. 6).
    "path": the classifier reads the projected vector, logits = W^r gelu(W^f h + b^f) — what
    XtremeDistil's Table 4 implies (unfreezing the projection in the logit stage moves F1), so
    the projection is trained by every loss and deployed with the student."""

    def __init__(self, student: nn.Module, teacher_hidden_size: int, place: str = "side"):
        super().__init__()
        self.student, self.place = student, place
        self.projection = nn.Linear(student.representation_size, teacher_hidden_size)
        if self.in_path:
            # the output layer reads the projected vector; the student's own classifier goes
            self.output = nn.Linear(teacher_hidden_size, student.classifier.out_features)
            student.classifier = nn.Identity()

    @property
    def in_path(self) -> bool:
        return self.place == "path"

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        """The projection sits just under the classifier (XtremeDistil Table 4)."""
        classifier, *below = self.student.layer_groups()
        if self.in_path:
            classifier = ("classifier", self.output)
        return [classifier, ("projection", self.projection), *below]

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._with_representation(self.student(*inputs))

    @property
    def serves_bags(self) -> bool:
        return getattr(self.student, "serves_bags", False)

    def forward_bags(self, *bags: torch.Tensor) -> dict[str, torch.Tensor]:
        """Serving a bag-of-wordpieces student (StaticStudent.forward_bags): its logits, through the
        projection when it is in the path; a side projection serves no prediction and is skipped."""
        out = self.student.forward_bags(*bags)
        return self._with_representation(out) if self.in_path else out

    def folded_classifier(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The student's (StaticStudent.folded_classifier) unless a projection in the path classifies."""
        return None if self.in_path else self.student.folded_classifier()

    def _with_representation(self, out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        representation = F.gelu(self.projection(projected_state(out)))
        if not self.in_path:
            return {**out, "representation": representation}
        return {**out, "representation": representation, "logits": self.output(self.student.dropout(representation))}


def check_projection_place(place: str, family: type, inputs: str | None = None) -> None:
    """`path` needs a student whose classifier is one linear layer over the state it projects
    (families say so with LINEAR_CLASSIFIER), and one state per example: a student reading a pair's
    sentences apart projects each sentence, and its classifier reads both."""
    check_choice("schedule.projection", place, PLACES)
    if place == "path" and inputs == "pair" and getattr(family, "READS_PAIRS_APART", False):
        raise DistilError(f"schedule.projection=path puts the projection under the classifier, but "
                          f"{family.__name__} projects each sentence of a pair apart while its classifier reads "
                          f"both; use schedule.projection=side")
    if place == "path" and not getattr(family, "LINEAR_CLASSIFIER", False):
        raise DistilError(f"schedule.projection=path needs a student whose classifier is one linear layer "
                          f"(bilstm, bilstm-tagger, rnn, transformer), not {family.__name__}; "
                          f"use schedule.projection=side")


def projected_state(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the head maps: a tagger's every position, else a pair's sentences apart, else the pooled vector."""
    return next(out[key] for key in ("states", "sentences", "pooled") if key in out)
