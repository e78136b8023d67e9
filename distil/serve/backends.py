"""What runs a saved student's model: torch, or its ONNX export (fp32, or int8-quantised).

Both read the inputs SavedStudent encodes (its one home of tokenisation and vocabulary mapping) and
give the model's outputs as CPU tensors: `logits`, and `representation` where asked and exported.
"""

from __future__ import annotations

from pathlib import Path

import torch

from distil.errors import DistilError, check_choice
from distil.serve.student import SavedStudent

BACKENDS = ("torch", "onnx", "onnx-int8")


class TorchBackend:
    """The student's own torch model, on SavedStudent's device."""

    def __init__(self, saved: SavedStudent):
        self.saved = saved

    def encode(self, texts: list[str], representation: bool = False) -> tuple[tuple, list]:
        """(the model's inputs, each text's decode context). A bag student serves bags, which give no
        representation: for one, its padded inputs (bag students do not tag: no contexts)."""
        if representation and self.saved.bags:
            return self.saved.padded_batch(texts), [None] * len(texts)
        return self.saved.encode_with_contexts(texts)

    def outputs(self, inputs: tuple, representation: bool = False) -> dict[str, torch.Tensor]:
        if representation:
            return self.saved.outputs(inputs)
        return {"logits": self.saved.logits(inputs)}


class OnnxBackend:
    """An ONNX export of the student (`distil export RUN_DIR`, --int8 for the quantised one), run by
    onnxruntime on the CPU. It reads the batched inputs only, one text as a batch of one."""

    def __init__(self, saved: SavedStudent, directory: Path, backend: str, threads: int | None = None):
        # onnxruntime only when an ONNX backend is asked for
        from distil.serve.onnx_session import ONNX_FILES, OnnxLogits

        path = Path(directory) / ONNX_FILES[backend]
        if not path.is_file():
            export = "distil export RUN_DIR --int8" if backend == "onnx-int8" else "distil export RUN_DIR"
            raise DistilError(f"{directory} has no {path.name} (backend {backend}); run `{export}` first")
        self.saved, self.session = saved, OnnxLogits(path, threads=threads)

    def encode(self, texts: list[str], representation: bool = False) -> tuple[tuple, list]:
        return self.saved.encode_with_contexts(texts, one_request=False)

    def outputs(self, inputs: tuple, representation: bool = False) -> dict[str, torch.Tensor]:
        return {name: torch.from_numpy(value) for name, value in self.session(inputs).items()}


def make_backend(saved: SavedStudent, directory: Path, backend: str,
                 threads: int | None = None) -> TorchBackend | OnnxBackend:
    check_choice("backend", backend, BACKENDS)
    if backend == "torch":
        return TorchBackend(saved)
    if saved.runtime.on_gpu:
        raise DistilError(f"backend {backend} runs on the CPU; load it without a GPU device, or use backend torch")
    return OnnxBackend(saved, directory, backend, threads)
