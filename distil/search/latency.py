"""A trial's latency and size, measured as the frontier tables measure them (distil.tables.timing).

A student is timed in the form its backend serves (eager PyTorch, or its `distil export` ONNX graph or
int8 copy under ONNX Runtime), end to end on the dev texts, interleaved pass by pass with the search's
reference student. Its latency is the median of its per-pass ratios to the reference times the
reference's own median, measured once when the search starts (`reference-<cell>-<latency>-<threads>.json`
in the search directory): a busy machine slows both within a pass, so it biases no trial, and every worker of a search
reads the one reference number.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

from distil.common.atomic import write_json_atomic
from distil.search.preset import TIMING_FIELDS, median_ms
from distil.serve.onnx_session import ONNX_FILES, OnnxLogits
from distil.serve.speed import torch_threads
from distil.serve.student import SavedStudent
from distil.store.admin import build_lock
from distil.tables.timing import DEPLOYED, DISK_FILES, Timed, TimedStudent, disk_mb, exported, time_models

FORMS = {backend: form for form, backend in DEPLOYED.items()}  # serving backend -> timing.json key (onnx, int8)


@dataclass
class Served:
    """A student folder as one backend serves it: `timed` for the harness, `student` for scoring it."""

    timed: Timed
    student: TimedStudent
    backend: str
    folder: Path

    @property
    def weights(self) -> str:
        """The file the backend loads (its size is the student's, with the vocabulary)."""
        return DISK_FILES[0] if self.backend == "eager" else ONNX_FILES[self.backend]

    def size_mb(self) -> float:
        return disk_mb(self.folder, self.weights)


def served(folder: Path, backend: str, threads: int) -> Served:
    """The student in `folder` as `backend` serves it; an ONNX form is exported there the first time, as
    `distil export --int8` writes it (the eager form exports nothing)."""
    student = SavedStudent(folder, device="cpu")
    eager = Timed(student.encode_batch, lambda *inputs: student.logits(inputs))
    if backend == "eager":
        return Served(eager, TimedStudent(eager, student), backend, folder)
    form = FORMS[backend]
    path = exported(student, folder)[form]
    timed = TimedStudent(eager, student, {form: (path, OnnxLogits(path, threads))})
    return Served(timed.models("student")[f"student/{form}"], timed, backend, folder)


def reference_ms(path: Path, reference: Timed, texts: list[str], latency: str, threads: int) -> float:
    """The reference's median latency, measured by the first worker of the search and read by every other
    (and by a resumed search) from `path`: the one number every trial's ratio is multiplied by."""
    while not path.is_file():
        with build_lock(path.parent, path.stem) as ours:
            if ours and not path.is_file():
                with torch_threads(threads):
                    row = time_models({"reference": reference}, texts)["reference"]
                write_json_atomic(path, {"latency": latency, "ms": median_ms(row, latency), "texts": len(texts),
                                         "threads": threads})
        if not path.is_file():
            time.sleep(1)  # another worker is measuring it
    return json.loads(path.read_text())["ms"]


def relative_ms(model: Timed, reference: Timed, texts: list[str], latency: str, reference_median: float,
                threads: int) -> tuple[float, float]:
    """(latency in ms per text, its ratio to the reference): the median of the per-pass ratios of the
    model's seconds to the reference's on the same texts, times the reference's median."""
    with torch_threads(threads):
        result = time_models({"reference": reference, "model": model}, texts)
    field = TIMING_FIELDS[latency]
    ratio = statistics.median(own / ref for own, ref in zip(result["model"]["per_pass"][field],
                                                            result["reference"]["per_pass"][field], strict=True))
    return ratio * reference_median, ratio
