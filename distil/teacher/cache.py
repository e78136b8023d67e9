"""Cache the fine-tuned teacher's outputs for every split, so students never run it again.

One safetensors file per split, fp16. Classification and pairs: `logits` [N, C] and the
[CLS] vector of `teacher.layer` as `hidden` [N, H]. Tagging: every wordpiece's logits
flattened to `logits` [tokens, C] with `offsets` [N + 1] marking each sentence.
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
    cfg: TeacherConfig, teacher: Artifact, data: TaskData, store: ArtifactStore
) -> Artifact:
    spec = {
        "teacher": teacher.key,
        "data": data.fingerprint(*SPLITS),
        "max_length": cfg.max_length,
        "layer": cached_layer(cfg, data.task),
        "dtype": "float16",
    }
    artifact = store.get_or_build(
        "targets", cfg.name, spec, lambda out: _cache(cfg, teacher.path, data, out)
    )
    if artifact.reused:
        log.info("reusing cached teacher targets %s; not running the teacher again", artifact.path)
    else:
        log.info("cached teacher targets in %s", artifact.path)
    return artifact


def cached_layer(cfg: TeacherConfig, task: str) -> int | None:
    # Per-token hidden states of a whole transfer set run to gigabytes; they are cached
    # only once a schedule with a token-level representation loss asks for them.
    return None if task == "tagging" else cfg.layer


def _cache(cfg: TeacherConfig, teacher_dir: Path, data: TaskData, out: Path) -> dict:
    model, tokenizer = load_finetuned(teacher_dir, data.task)
    num_outputs = len(model_labels(data.task, data.label_names))
    layer = cached_layer(cfg, data.task)
    shapes = {}
    with progress_bar() as progress:
        for split in SPLITS:
            encoded = encode(data.task, tokenizer, data.splits[split], cfg.max_length, len(data.label_names))
            task = progress.add_task(f"caching teacher outputs: {split}", total=len(encoded), status="")
            logits, hidden = run_teacher(
                model, encoded.ids, tokenizer.pad_token_id, cfg.eval_batch_size, layer,
                progress=lambda n, task=task: progress.advance(task, n),
            )
            if data.task == "tagging":
                lengths = torch.tensor([0] + [len(seq) for seq in encoded.ids])
                tensors = {"logits": _join(logits, num_outputs, torch.cat), "offsets": lengths.cumsum(0)}
            else:
                tensors = {"logits": _join(logits, num_outputs, torch.stack),
                           "hidden": _join(hidden, model.config.hidden_size, torch.stack)}
            save_file({k: v.contiguous() for k, v in tensors.items()}, out / f"{split}.safetensors")
            shapes[split] = {k: list(v.shape) for k, v in tensors.items()}
    return {"shapes": shapes, "layer": layer}


def _join(rows: list[torch.Tensor], width: int, how) -> torch.Tensor:
    return how(rows).half() if rows else torch.zeros((0, width), dtype=torch.float16)


def load_targets(artifact: Artifact, split: str) -> dict[str, torch.Tensor]:
    return load_file(artifact.path / f"{split}.safetensors")


def teacher_logits(cached: dict[str, torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """[N, C] for sequence tasks; a list of per-sentence [len_i, C] for tagging."""
    logits = cached["logits"].float()
    if "offsets" not in cached:
        return logits
    offsets = cached["offsets"].tolist()
    return [logits[start:end] for start, end in zip(offsets[:-1], offsets[1:], strict=True)]
