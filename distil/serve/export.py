"""A saved student as ONNX (`distil export`): the graph, its int8 copy, and their check against PyTorch.

The graph takes what SavedStudent.encode_batch(texts, one_request=False) gives (padded ids and mask
per sentence column, or a bag student's ids and offsets), the batch and every length free, and gives
`logits`, and `representation` where the student's forward has one. It is torch's dynamo exporter's
trace of the student made exportable (distil/students/exportable.py: a recurrent student's encoder
as ONNX LSTM operators, a bag student's mean in sums): the same outputs. serve/onnx_session.py
serves the files with ONNX Runtime alone.

The int8 copy is ONNX Runtime's dynamic quantisation after its pre-processing (shape inference and
graph optimisation, which folds the LSTM's weights into constants): without it the LSTM operators
stay in fp32. Measured on a BiLSTM of 300 + 300 units and 20,000 wordpieces (2 cores): 2.1x as fast
as fp32 in batches of 2 and of 32, 7.5 MB instead of 29.8, 255 of 256 predictions the same. A
PyTorch-quantised LSTM does not export at all.

What the check measured (each form's examples per second on the test split and its test scores, the
exports' agreement with PyTorch) goes to the student folder's export.json, which the model card lists.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from distil import __version__
from distil.data.prepared import PreparedSplit
from distil.serve.onnx_session import EXPORT_RECORD, EXPORT_VERSION, VERSION_KEY, OnnxLogits
from distil.serve.student import SavedStudent
from distil.students.exportable import exportable
from distil.tasks.text import PAIR_SEPARATOR

OUTPUTS = ("logits", "representation")  # what the graph gives, where the student's forward has it
# Texts whose inputs give the exporter a batch of 3 and lengths above 1 (a size of 0 or 1 it takes for a
# constant): each column's sentences have 2, 1 and 1 words, a pair's second ones 4, 1 and 1 (with
# [CLS] and [SEP], 4 and 6 wordpieces); one wordpiece a word in any vocabulary.
EXAMPLE_TEXTS = (("a a", "a a a a"), ("a", "a"), ("a", "a"))


class Served(nn.Module):
    """The student's serving forward as a module of tensors in, tensors out (what the exporter traces)."""

    def __init__(self, model: nn.Module, bags: bool, outputs: Sequence[str]):
        super().__init__()
        self.model, self.bags, self.outputs = model, bags, tuple(outputs)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = self.model.forward_bags(*inputs) if self.bags else self.model(*inputs)
        return tuple(out[name] for name in self.outputs)


def example_inputs(student: SavedStudent) -> tuple[torch.Tensor, ...]:
    """encode_batch's inputs for three example texts: the format, names and sizes the export traces."""
    pair = student.task.inputs == "pair"
    return student.encode_batch([f"{a} {PAIR_SEPARATOR} {b}" if pair else a for a, b in EXAMPLE_TEXTS],
                                one_request=False)


def input_names(student: SavedStudent, count: int) -> list[str]:
    """(ids, mask) per sentence column, or a bag student's (ids, offsets); `_a`/`_b` for a pair read apart."""
    second = "offsets" if student.bags else "mask"
    if count == 2:
        return ["ids", second]
    return [f"{name}_{column}" for column in "ab" for name in ("ids", second)]


def dynamic_shapes(names: list[str], bags: bool) -> tuple[dict, ...]:
    """The batch and every length free: one batch for all inputs, a length per sentence column (for a
    bag student, the count of its sentences' tokens laid end to end)."""
    batch, sizes, shapes = torch.export.Dim("batch"), {}, []
    for name in names:
        kind, _, column = name.partition("_")
        size = sizes.setdefault(column, torch.export.Dim("_".join(filter(None, ("tokens" if bags else "length",
                                                                                column)))))
        shapes.append({0: batch} if kind == "offsets" else {0: size} if bags else {0: batch, 1: size})
    return tuple(shapes)


def export_onnx(student: SavedStudent, path: Path) -> None:
    """The student's serving forward as an ONNX graph at `path`, written whole or not at all."""
    model = exportable(student.model).cpu()
    inputs = example_inputs(student)
    names = input_names(student, len(inputs))
    with torch.no_grad():
        out = model.forward_bags(*inputs) if student.bags else model(*inputs)
    outputs = [name for name in OUTPUTS if name in out]
    with quiet_exporter():
        program = torch.onnx.export(Served(model, student.bags, outputs).eval(), inputs, dynamo=True,
                                    input_names=names, output_names=outputs, verbose=False,
                                    dynamic_shapes=(dynamic_shapes(names, student.bags),))
    graph = program.model_proto
    fixed = [f"{node.name}[{axis}]" for node in graph.graph.input
             for axis, dim in enumerate(node.type.tensor_type.shape.dim) if not dim.dim_param]
    if fixed:
        raise RuntimeError(f"the exported graph fixed the size of {', '.join(fixed)}: it would serve only "
                           f"the example's shape")
    import onnx

    stamp(graph)
    _write(path, lambda tmp: onnx.save(graph, tmp))


def stamp(graph) -> None:
    """Mark an ONNX model with the export version it computes (onnx_session.EXPORT_VERSION)."""
    kept = [prop for prop in graph.metadata_props if prop.key != VERSION_KEY]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    entry = graph.metadata_props.add()
    entry.key, entry.value = VERSION_KEY, str(EXPORT_VERSION)


def quantise_int8(fp32: Path, int8: Path) -> None:
    """ONNX Runtime's int8 weights (dynamic quantisation: activations quantised as they come), after
    its pre-processing, which lets the LSTM operators be quantised too."""
    from onnxruntime.quantization.shape_inference import quant_pre_process

    fp32, int8 = fp32.resolve(), int8.resolve()
    with (tempfile.TemporaryDirectory(dir=int8.parent, prefix=".quantising-") as work, quiet_exporter(),
          working_directory(Path(work))):
        prepared = Path(work) / "prepared.onnx"
        # auto_merge: a Transformer's or an SRA student's shapes (a length capped by max_length) leave the
        # symbolic shape inference incomplete without it; it changes no file that quantised before
        quant_pre_process(str(fp32), str(prepared), auto_merge=True)
        _write(int8, lambda tmp: quantised(prepared, tmp))


def quantised(prepared: Path, out: Path) -> None:
    """quantize_dynamic's int8 weights at `out`, stamped with the export version as the fp32 graph is."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(prepared), str(out), weight_type=QuantType.QInt8)
    graph = onnx.load(str(out))
    stamp(graph)
    onnx.save(graph, str(out))


@contextmanager
def working_directory(path: Path) -> Iterator[None]:
    """ONNX Runtime's shape inference leaves its partial model (sym_shape_infer_temp.onnx and a file of
    weights per call) in the working directory when it cannot finish: there, the temporary one."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _write(path: Path, write: Callable[[Path], object]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


EXPORTER_LOGGERS = ("torch.onnx", "onnxscript", "onnx_ir", "onnxruntime")


@contextmanager
def quiet_exporter() -> Iterator[None]:
    """The exporter's and the quantiser's notes (operators skipped, attributes guessed) are not the user's."""
    loggers = [logging.getLogger(name) for name in EXPORTER_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


# --- checking an export on a split -----------------------------------------------------------------

@dataclass
class Pass:
    """One model's outputs over a split: per example, [labels] or [length, tags]; and the model's seconds."""

    logits: list[np.ndarray]
    seconds: float


def split_texts(split: PreparedSplit, inputs: str) -> list[str]:
    """A split's examples as a user gives them to a saved student: a text, 'first ||| second' for a
    pair, a tagged sentence's words joined by spaces."""
    examples = split.examples
    if inputs == "tokens":
        return [" ".join(words) for words in examples["tokens"][:]]
    if inputs == "pair":
        return [f"{a} {PAIR_SEPARATOR} {b}" for a, b in zip(examples["text"][:], examples["text_pair"][:],
                                                              strict=True)]
    return list(examples["text"][:])


BATCH = 32  # the check's batch size


def encoded_batches(student: SavedStudent, texts: list[str], batch_size: int = BATCH) -> list[tuple]:
    """The texts' model inputs in batches of `batch_size` (one text too in the batched layout, which is
    what an exported model reads), encoded once, before any model is timed."""
    return [student.encode_batch(texts[start:start + batch_size], one_request=False)
            for start in range(0, len(texts), batch_size)]


def run_pass(forward: Callable[[tuple], np.ndarray], batches: list[tuple], min_seconds: float = 0.0,
             max_passes: int = 5) -> Pass:
    """`forward` (a batch's inputs -> its logits) over every batch, after one warm-up batch; the seconds of
    the fastest pass, passes repeated (up to `max_passes`) until `min_seconds` have gone: a small split
    is timed more than once, and a pass the machine's other work slowed down is not the one counted."""
    if batches:
        forward(batches[0])
    passes, spent = [], 0.0
    while not passes or (spent < min_seconds and len(passes) < max_passes):
        start = time.perf_counter()
        outputs = [forward(inputs) for inputs in batches]
        passes.append(time.perf_counter() - start)
        spent += passes[-1]
        if len(passes) == 1:
            logits = per_example(batches, outputs)
    return Pass(logits, min(passes))


def per_example(batches: list[tuple], outputs: list[np.ndarray]) -> list[np.ndarray]:
    """Each example's logits from its batch's: a row, or for one output per token the real positions only."""
    logits = []
    for inputs, out in zip(batches, outputs, strict=True):
        if out.ndim == 3:
            lengths = np.asarray(inputs[1]).sum(axis=1)
            logits += [row[:length] for row, length in zip(out, lengths, strict=True)]
        else:
            logits += list(out)
    return logits


def torch_forward(student: SavedStudent) -> Callable[[tuple], np.ndarray]:
    return lambda inputs: student.logits(inputs).float().numpy()


def onnx_forward(path: Path) -> Callable[[tuple], np.ndarray]:
    session = OnnxLogits(path)
    return lambda inputs: session(inputs)["logits"]


@dataclass
class Agreement:
    max_difference: float  # the largest absolute difference of two logits
    agreeing: int | None  # predictions that agree; None: a regression, whose logit is its prediction
    compared: int
    unit: str  # what a prediction is of: "examples", or "wordpieces" for a tagger

    @property
    def share(self) -> float | None:
        return None if self.agreeing is None else self.agreeing / max(self.compared, 1)


def agreement(reference: Pass, other: Pass) -> Agreement:
    """How far `other`'s logits are from `reference`'s: the largest difference, and how many predictions
    (the arg max of each example's logits, or of each wordpiece's for a tagger) are the same."""
    unit = "wordpieces" if reference.logits and reference.logits[0].ndim == 2 else "examples"
    if not reference.logits:
        return Agreement(0.0, 0, 0, unit)
    a, b = (np.concatenate([x.reshape(-1, x.shape[-1]) for x in outputs.logits]) for outputs in (reference, other))
    difference = float(np.abs(a - b).max()) if a.size else 0.0
    if a.shape[-1] == 1:
        return Agreement(difference, None, len(a), unit)
    return Agreement(difference, int((a.argmax(-1) == b.argmax(-1)).sum()), len(a), unit)


def score(task, outputs: Pass, split: PreparedSplit, names: list[str]) -> dict:
    """The task's scores of these logits on the split, as the run scored its student."""
    logits = [torch.from_numpy(np.ascontiguousarray(x)) for x in outputs.logits]
    return task.score(logits if task.per_token else torch.stack(logits), split, names)


# --- what the check measured: export.json --------------------------------------------------------

def measured(outputs: Pass, texts: int, scores: dict, reference: Pass | None = None) -> dict:
    """One served form's record: examples/s (model time on inputs encoded before the clock, batches of
    BATCH, the fastest pass), its test scores and, against PyTorch's `reference`, how far its logits are."""
    record = {"ex_per_s": texts / max(outputs.seconds, 1e-9), "test": scores}
    if reference is not None:
        found = agreement(reference, outputs)
        record.update(max_logit_difference=found.max_difference, agreeing=found.agreeing,
                      compared=found.compared, unit=found.unit)
    return record


def write_export_record(folder: Path, forms: dict[str, dict], metric: str, texts: int) -> Path:
    """<folder>/export.json, whole or absent: `forms` (eager, onnx and, with --int8, int8: measured's
    records) on the `texts` examples of the run's test split, `metric` the task's primary one."""
    record = {"measured_by": "distil export", "distil_version": __version__, "split": "test", "texts": texts,
              "batch_size": BATCH, "timed": "model time only, inputs encoded before the clock, the fastest pass",
              "metric": metric, **forms}
    path = folder / EXPORT_RECORD
    _write(path, lambda tmp: tmp.write_text(json.dumps(record, indent=1)))
    return path
