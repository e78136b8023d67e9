"""The representation head: the student's state mapped to the teacher's hidden size.

gelu(W z + b) (Mukherjee & Awadallah eq. 6; XtremeDistil Algorithm 1), on the pooled
vector of a sequence student, on every position of a tagger, or on each sentence of a pair
read apart ([B, 2, H]: Wu et al. §3.1 distils each sentence against its own teacher vector).
The representation losses of a schedule compare its output with the teacher's cached layer.

The head can also hold the logit regression layer W^r apart from the softmax layer W^s. XtremeDistil
has two matrices (eq. 1: p^s = softmax(h W^s), read by the cross-entropy; eq. 3: r^s = W^r h + b^r,
read by the logit loss, eq. 4; §5.2: stage 2 "learns the corresponding parameters W^s and
<W^r, b^r>"; Table 4 unfreezes "Linear (W^r)" in stage 2 and "Softmax (W^s)" in stage 3), as do
Mukherjee & Awadallah (eq. 2 and 4). With `shared_output=False` the student outputs `scores` (W^r)
beside `logits` (W^s, what a prediction reads); `shared_output=True` is one layer for both, the
runner's earlier shared layer (schedule.shared_output_layer).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from distil.errors import DistilError, check_choice

PLACES = ("side", "path")
OUTPUT_HEADS = {"classifier": "logits", "regression": "scores"}  # layer group -> the output it gives


def output_size(classifier: nn.Module) -> int:
    """The number of outputs of a student's classifier: a Linear's, or an MLP's last Linear's (the
    siamese, SRA and Tang students end in one)."""
    linears = [m for m in classifier.modules() if isinstance(m, nn.Linear)]
    if not linears:
        raise DistilError(f"the student's classifier ({type(classifier).__name__}) has no linear output layer")
    return linears[-1].out_features


class WithRepresentation(nn.Module):
    """Wraps a student; adds `representation` to its outputs.

    `place` says where the projection sits. "side": a head beside the classifier, used only
    by the representation losses and dropped at deployment (Mukherjee & Awadallah eq. 6).
    "path": the classifier reads the projected vector, logits = W^s gelu(W^f h + b^f) — what
    XtremeDistil's Table 4 implies (unfreezing the projection in the logit stage moves F1), so
    the projection is trained by every loss and deployed with the student.

    `shared_output` False adds `regression`, W^r (eq. 3), beside the classifier W^s (eq. 1), reading
    what the classifier reads (the projected vector in the path, the student's state beside it): the
    logit loss trains W^r (`scores`), the cross-entropy and every prediction read W^s (`logits`).
    W^r serves no prediction, so it is not deployed (students.training_only_params)."""

    def __init__(self, student: nn.Module, teacher_hidden_size: int, place: str = "side",
                 shared_output: bool = True):
        super().__init__()
        self.student, self.place = student, place
        # forward_bags gives `representation` beside the logits (set on an export's copy: exportable.py)
        self.represent_bags = False
        self.projection = nn.Linear(student.representation_size, teacher_hidden_size)
        num_labels = output_size(student.classifier)
        if self.in_path:
            # the output layer reads the projected vector; the student's own classifier goes
            self.output = nn.Linear(teacher_hidden_size, num_labels)
            student.classifier = nn.Identity()
        self.regression = None
        if not shared_output:
            # drawn from its own generator (the run's seed + 1), so the global random stream, and with it
            # every other layer's start and every dropout mask, is the one-shared-layer student's
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed((torch.initial_seed() + 1) % 2**63)
                self.regression = nn.Linear(teacher_hidden_size if self.in_path else student.representation_size,
                                            num_labels)

    @property
    def shared_output(self) -> bool:
        """Whether one output layer serves the logit loss and the cross-entropy (W^r = W^s)."""
        return self.regression is None

    @property
    def in_path(self) -> bool:
        return self.place == "path"

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        """The projection sits just under the classifier (XtremeDistil Table 4); W^r, when it is its
        own layer, beside the classifier (`regression`: both are the top layer, each of its stage)."""
        classifier, *below = self.student.layer_groups()
        if self.in_path:
            classifier = ("classifier", self.output)
        regression = [] if self.shared_output else [("regression", self.regression)]
        return [classifier, *regression, ("projection", self.projection), *below]

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        return self._with_representation(self.student(*inputs))

    @property
    def serves_bags(self) -> bool:
        return getattr(self.student, "serves_bags", False)

    def forward_bags(self, *bags: torch.Tensor) -> dict[str, torch.Tensor]:
        """Serving a bag-of-wordpieces student (StaticStudent.forward_bags): its logits, through the
        projection when it is in the path; a side projection serves no prediction and is skipped,
        unless `represent_bags` asks for the representation (an ONNX export gives it as an output)."""
        if not (self.in_path or self.represent_bags):
            return self.student.forward_bags(*bags)
        return self._with_representation(self.student.forward_bags(*bags, sentences=True))

    def folded_classifier(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The student's (StaticStudent.folded_classifier) unless a projection in the path classifies."""
        return None if self.in_path else self.student.folded_classifier()

    def _with_representation(self, out: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        representation = F.gelu(self.projection(projected_state(out)))
        out = {**out, "representation": representation}
        if self.in_path:
            # one dropout under both output layers: they read the same vector
            classified = self.student.dropout(representation)
            out["logits"] = self.output(classified)
        elif not self.shared_output:
            classified = self.student.dropout(classified_state(out))
        if not self.shared_output:
            out["scores"] = self.regression(classified)
        return out


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


def check_output_layers(shared: bool, family: type) -> None:
    """A W^r of its own (schedule.shared_output_layer=false) is one linear layer beside a linear
    classifier: a student whose classifier is more (tang, siamese) has no single W^s to stand beside."""
    if not shared and not getattr(family, "LINEAR_CLASSIFIER", False):
        raise DistilError(f"schedule.shared_output_layer=false adds a logit layer W^r beside a linear classifier "
                          f"W^s (bilstm, bilstm-tagger, rnn, transformer, static), not {family.__name__}'s; "
                          f"use schedule.shared_output_layer=true")


class PredictingWithScores(nn.Module):
    """A student with its own W^r, seen as a stage that trains only W^r sees it: its predictions
    are r^s (eq. 3), the output that stage trains (Algorithm 1, stage 2: output = r^s(x_u)), since
    W^s is not trained yet. XtremeDistil Table 4 scores stage 2's steps this way. Shares every
    parameter with the student; nothing is copied."""

    def __init__(self, model: WithRepresentation):
        super().__init__()
        self.model = model

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        out = self.model(*inputs)
        return {**out, "logits": out["scores"]}


def predicting_view(model: nn.Module, reads: set[str]) -> nn.Module:
    """What a stage's scores are measured on: the student, or, where W^r is its own layer and the
    stage's losses read only W^r's `scores` (no loss on W^s's `logits`), the student predicting by W^r."""
    if isinstance(model, WithRepresentation) and not model.shared_output and "scores" in reads \
            and "logits" not in reads:
        return PredictingWithScores(model)
    return model


def classified_state(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """What a linear classifier beside the head reads: a tagger's every position, else the pooled vector."""
    return out["states"] if "states" in out else out["pooled"]


def projected_state(out: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the head maps: a tagger's every position, else a pair's sentences apart, else the pooled vector."""
    return next(out[key] for key in ("states", "sentences", "pooled") if key in out)
