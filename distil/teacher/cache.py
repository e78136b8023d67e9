"""Cache the fine-tuned teacher's logits and one hidden layer for every split.

One safetensors file per split (fp16), so students never run the teacher again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from distil.config import TeacherConfig
from distil.data.split import SPLITS, TaskData
from distil.data.tokenize import encode
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
        "layer": cfg.layer,
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


def _cache(cfg: TeacherConfig, teacher_dir: Path, data: TaskData, out: Path) -> dict:
    model, tokenizer = load_finetuned(teacher_dir)
    shapes = {}
    with progress_bar() as progress:
        for split in SPLITS:
            ids = encode(tokenizer, data.splits[split], cfg.max_length)
            task = progress.add_task(f"caching teacher outputs: {split}", total=len(ids), status="")
            logits, hidden = run_teacher(
                model, ids, tokenizer.pad_token_id, cfg.eval_batch_size, cfg.layer,
                progress=lambda n, task=task: progress.advance(task, n),
            )
            tensors = {"logits": logits.half(), "hidden": hidden.half()}
            save_file({k: v.contiguous() for k, v in tensors.items()}, out / f"{split}.safetensors")
            shapes[split] = {k: list(v.shape) for k, v in tensors.items()}
    return {"shapes": shapes, "layer": cfg.layer}


def load_targets(artifact: Artifact, split: str) -> dict[str, torch.Tensor]:
    return load_file(artifact.path / f"{split}.safetensors")
