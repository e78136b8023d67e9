"""A student in operations ONNX exporters trace: the recurrent encoder rebuilt for export, and the bag mean.

BiLSTMEncoder.forward branches on the data (`bool(mask.all())`: no padding, the fused bidirectional
kernel) and calls its one-way LSTMs through torch.func.functional_call with the bidirectional LSTM's
weights; torch's dynamo exporter stops at the branch and the TorchScript one cannot trace the call.
ExportEncoder exports the encoder as one ONNX LSTM operator per layer, both directions, reading each
row within its length (the operator's `sequence_lens`): the states of the encoder's padded path, in
one fused operator that ONNX Runtime runs and quantises as such. In PyTorch it is the encoder itself.
(Through one-way nn.LSTMs instead, the export takes three to four times as long, and a second export
in one process fixes the length to its example's: the LSTM's registration for a free length is cached.)

A bag student's mean of each bag (StaticStudent.forward_bags) is torch's embedding_bag, which the
exporter writes as a loop over the bags that ONNX Runtime's shape inference (and with it int8
quantisation) cannot read; bag_means here is the same mean as differences of a running sum. Served from
bags, a side representation head is skipped (it serves no prediction); the export keeps it, so the
graph gives a bag student's `representation` as it gives every other family's.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from distil.students.encoders import BiLSTMEncoder
from distil.students.heads import WithRepresentation
from distil.students.static import StaticStudent

DIRECTIONS = ("", "_reverse")  # nn.LSTM's suffix of each direction's weights


class ExportEncoder(nn.Module):
    """A trained BiLSTMEncoder, serving only (no dropout): in PyTorch the encoder itself; exported to ONNX,
    its eval forward as ONNX LSTM operators. (states [B, T, 2H], zeros at padding; last states [B, 2H],
    the forward one at each row's end and the backward one at its start.)"""

    def __init__(self, encoder: BiLSTMEncoder):
        super().__init__()
        self.encoder = encoder.eval()

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if not torch.onnx.is_in_onnx_export():
            return self.encoder(ids, mask)
        lstm, hidden = self.encoder.lstm, self.encoder.lstm.hidden_size
        batch, steps = ids.shape
        lengths = mask.sum(dim=1).clamp(min=1).to(torch.int32)  # as the encoder: an empty row is one position
        states = self.encoder.embedding(ids).transpose(0, 1)  # ONNX's LSTM reads time first
        for layer in range(lstm.num_layers):
            weights = [torch.stack([onnx_gates(getattr(lstm, f"{kind}_l{layer}{suffix}")) for suffix in DIRECTIONS])
                       for kind in ("weight_ih", "weight_hh")]
            bias = torch.stack([torch.cat([onnx_gates(getattr(lstm, f"bias_{kind}_l{layer}{suffix}"))
                                           for kind in ("ih", "hh")]) for suffix in DIRECTIONS])
            # [T, 2, B, H] (zeros past each row's length), and the last states [2, B, H]
            states, last, _ = torch.onnx.ops.symbolic_multi_out(
                "LSTM", (states, *weights, bias, lengths), {"direction": "bidirectional", "hidden_size": hidden},
                dtypes=(states.dtype,) * 3, shapes=((steps, 2, batch, hidden), (2, batch, hidden), (2, batch, hidden)))
            states = states.permute(0, 2, 1, 3).reshape(steps, batch, 2 * hidden)
        return states.transpose(0, 1), last.transpose(0, 1).reshape(batch, 2 * hidden)


def onnx_gates(weight: torch.Tensor) -> torch.Tensor:
    """PyTorch's LSTM weights or biases, gates stacked input, forget, cell, output, in ONNX's order:
    input, output, forget, cell."""
    input_, forget, cell, output = weight.chunk(4)
    return torch.cat([input_, output, forget, cell])


def bag_means(table: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """[bags, E]: embedding_bag's mean row of `table` over each bag (ids laid end to end, offsets where
    each begins, the first at 0; an empty bag gives zeros), as differences of a running sum: a bag's sum
    is the running sum where the next bag begins less the one where it begins. Running sums, gathers and
    subtractions only: an index_add (ONNX ScatterND with reduction add) loses additions when ONNX
    Runtime runs it on several threads and two tokens of a bag meet. The running sum is in float64, so
    the difference of two large sums keeps float32's digits of the bag's own."""
    rows = table.index_select(0, ids).to(torch.float64)
    running = torch.cat([torch.zeros(1, table.shape[1], dtype=torch.float64, device=table.device),
                         rows.cumsum(0)])
    ends = torch.cat([offsets[1:], torch.full((1,), ids.shape[0], dtype=offsets.dtype, device=offsets.device)])
    sums = (running.index_select(0, ends) - running.index_select(0, offsets)).to(table.dtype)
    counts = (ends - offsets).clamp(min=1).to(table.dtype)
    return sums / counts.unsqueeze(1)


def exportable(model: nn.Module) -> nn.Module:
    """An eval-mode copy of `model` in operations ONNX exporters trace, with the same outputs: every
    BiLSTMEncoder replaced by its ExportEncoder, a bag student's mean by bag_means, and a bag
    student's representation served beside its logits. `model` itself is unchanged."""
    model = copy.deepcopy(model).eval()
    for name, module in list(model.named_modules()):
        if isinstance(module, BiLSTMEncoder):
            parent, _, attribute = name.rpartition(".")
            setattr(model.get_submodule(parent), attribute, ExportEncoder(module))
        elif isinstance(module, StaticStudent):
            module.bag_means = bag_means
        elif isinstance(module, WithRepresentation):
            module.represent_bags = True
    return model
