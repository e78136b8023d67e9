"""An exported student (`distil export`, distil/serve/export.py) served by ONNX Runtime: numpy in, numpy out.

No torch: a saved student's inputs, from SavedStudent.encode_batch, are handed over as they are
(torch tensors on the CPU or numpy arrays), and the graph's outputs come back as numpy arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distil.errors import DistilError

ONNX_FILES = {"onnx": "model.onnx", "onnx-int8": "model.int8.onnx"}  # backend name -> file in the student folder
# what `distil export` measured of the student and its exports, in the student folder (the model card reads it)
EXPORT_RECORD = "export.json"


class OnnxLogits:
    """An exported student served by ONNX Runtime, on the CPU.

    `threads`: ONNX Runtime's intra-op threads (None: its default, one per physical core)."""

    def __init__(self, path: Path, threads: int | None = None):
        import onnxruntime

        path = Path(path)
        if not path.is_file():
            flag = " --int8" if path.name == ONNX_FILES["onnx-int8"] else ""
            raise DistilError(f"{path} does not exist; write it with `distil export <run dir>{flag}`")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3  # errors only: its graph-optimisation notes are not the user's business
        if threads is not None:
            options.intra_op_num_threads = threads
        try:
            self.session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        except Exception as error:  # onnxruntime's own errors (a truncated or changed file) have no common base
            cause = " ".join(str(error).split())[:200]
            raise DistilError(f"{path} is damaged ({cause}); export it again with `distil export <run dir>`") \
                from None
        self.inputs = [node.name for node in self.session.get_inputs()]
        self.outputs = [node.name for node in self.session.get_outputs()]

    def __call__(self, inputs: tuple) -> dict[str, np.ndarray]:
        """`inputs`: what SavedStudent.encode_batch(texts, one_request=False) gives, in its order ((ids,
        mask), (ids_a, mask_a, ids_b, mask_b), or a bag student's (ids, offsets[, ids_b, offsets_b])).
        Returns {"logits": [B, labels] or [B, T, tags]} and "representation" where the graph has it."""
        if len(inputs) != len(self.inputs):
            raise ValueError(f"the exported student takes {len(self.inputs)} inputs ({', '.join(self.inputs)}), "
                             f"not {len(inputs)}: give it encode_batch(texts, one_request=False)'s")
        feed = {name: np.asarray(value, dtype=np.int64) for name, value in zip(self.inputs, inputs, strict=True)}
        return dict(zip(self.outputs, self.session.run(self.outputs, feed), strict=True))
