"""Cache the fine-tuned teacher's outputs for every split, so students never run it again.

One safetensors file per split, fp16. Classification and pairs: `logits` [N, C]. Tagging:
every wordpiece's logits flattened to `logits` [tokens, C] with `offsets` [N + 1] marking
each sentence. Only when the schedule has a representation loss, `hidden` holds layer
`teacher.layer`: the [CLS] vector [N, H], or every wordpiece [tokens, H] for tagging
(a whole transfer set of per-token states runs to gigabytes, so never by default).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from distil.config import TeacherConfig
from distil.data.encode import encode, model_labels
from distil.data.split import SPLITS, TaskData
from distil.progress import progress_bar
from distil.store import Artifact, ArtifactStore
from distil.teacher.inference import run_teacher
from distil.teacher.load import load_finetuned

log = logging.getLogger(__name__)


def ensure_targets(
    cfg: TeacherConfig, teacher: Artifact, data: TaskData, store: ArtifactStore, with_hidden: bool = False
) -> Artifact:
    """The teacher's logits for every split, plus layer `cfg.layer` when `with_hidden`."""
    def spec(layer: int | None) -> dict:
        return {"teacher": teacher.key, "data": data.fingerprint(*SPLITS), "max_length": cfg.max_length,
                "layer": layer, "dtype": "float16"}

    if not with_hidden:
        # Logits are the same bytes in a cache that also holds a hidden layer: reuse it.
        superset = store.find("targets", cfg.name, spec(cfg.layer))
        if superset is not None:
            log.info("reusing cached teacher targets %s (logits only needed)", superset.path)
            return superset
    layer = cfg.layer if with_hidden else None
    artifact = store.get_or_build(
        "targets", cfg.name, spec(layer), lambda out: _cache(cfg, teacher.path, data, out, layer)
    )
    if artifact.reused:
        log.info("reusing cached teacher targets %s; not running the teacher again", artifact.path)
    else:
        log.info("cached teacher targets in %s", artifact.path)
    return artifact


def _cache(cfg: TeacherConfig, teacher_dir: Path, data: TaskData, out: Path, layer: int | None) -> dict:
    model, tokenizer = load_finetuned(teacher_dir, data.task)
    num_outputs = len(model_labels(data.task, data.label_names))
    hidden_size = model.config.hidden_size
    shapes = {}
    with progress_bar() as progress:
        for split in SPLITS:
            encoded = encode(data.task, tokenizer, data.splits[split], cfg.max_length, len(data.label_names))
            task = progress.add_task(f"caching teacher outputs: {split}", total=len(encoded), status="")
            logits, hidden = run_teacher(
                model, encoded.ids, tokenizer.pad_token_id, cfg.eval_batch_size, layer,
                progress=lambda n, task=task: progress.advance(task, n),
            )
            how = torch.cat if data.task == "tagging" else torch.stack
            tensors = {"logits": _join(logits, num_outputs, how)}
            if hidden is not None:
                tensors["hidden"] = _join(hidden, hidden_size, how)
            if data.task == "tagging":
                tensors["offsets"] = torch.tensor([0] + [len(seq) for seq in encoded.ids]).cumsum(0)
            save_file({k: v.contiguous() for k, v in tensors.items()}, out / f"{split}.safetensors")
            shapes[split] = {k: list(v.shape) for k, v in tensors.items()}
    return {"shapes": shapes, "layer": layer}


def _join(rows: list[torch.Tensor], width: int, how) -> torch.Tensor:
    return how(rows).half() if rows else torch.zeros((0, width), dtype=torch.float16)


def load_targets(artifact: Artifact, split: str) -> dict[str, torch.Tensor]:
    return load_file(artifact.path / f"{split}.safetensors")


def teacher_logits(cached: dict[str, torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """[N, C] for sequence tasks; a list of per-sentence [len_i, C] for tagging."""
    return _per_example(cached, "logits")


def teacher_hidden(cached: dict[str, torch.Tensor]) -> torch.Tensor | list[torch.Tensor] | None:
    """[N, H] for sequence tasks; a list of per-sentence [len_i, H] for tagging; None if not cached."""
    return _per_example(cached, "hidden") if "hidden" in cached else None


def _per_example(cached: dict[str, torch.Tensor], name: str):
    values = cached[name].float()
    if "offsets" not in cached:
        return values
    offsets = cached["offsets"].tolist()
    return [values[start:end] for start, end in zip(offsets[:-1], offsets[1:], strict=True)]
