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
# What an exported graph computes, stamped in its metadata (VERSION_KEY) by `distil export`; a graph of
# another version is exported again (the frontier tables) or refused (the API), never served as if current.
# 1: no stamp. 2: a Transformer student's pair reads its second segment as segment 1 (served students had
# every position in segment 0), and a bag student's mean is a running-sum difference (the index_add it
# replaces lost additions on ONNX Runtime's threads).
EXPORT_VERSION = 2
VERSION_KEY = "distil_export_version"


def export_version(path: Path) -> int:
    """The export version stamped in the graph at `path` (1: none)."""
    import onnx

    props = {prop.key: prop.value for prop in onnx.load(str(path), load_external_data=False).metadata_props}
    return int(props.get(VERSION_KEY, 1))


class OnnxLogits:
    """An exported student served by ONNX Runtime, on the CPU.

    `threads`: ONNX Runtime's intra-op threads (None: its default, one per physical core)."""

    def __init__(self, path: Path, threads: int | None = None):
        import onnxruntime

        path = Path(path)
        flag = " --int8" if path.name == ONNX_FILES["onnx-int8"] else ""  # the export that writes this file
        if not path.is_file():
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
        version = int(self.session.get_modelmeta().custom_metadata_map.get(VERSION_KEY, 1))
        if version != EXPORT_VERSION:
            raise DistilError(f"{path} was exported by another distil (export version {version}, this one "
                              f"{EXPORT_VERSION}), whose graph may not give the student's predictions; export it "
                              f"again with `distil export <run dir>{flag}`")
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
