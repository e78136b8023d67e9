"""Before the work: whether the disk has room for what the run will write, estimated from what it will build.

The big writes are the teacher's fine-tuning (its checkpoint holds the weights, AdamW's two moments and the
best weights so far: four copies; then the teacher itself), the cached targets (float16 logits, and a hidden
layer per wordpiece where the student learns from one), and the student's own checkpoint and folder. A
disk short of that gets one log line and a metrics.json warning, and the run goes on: the estimate is rough,
and a full disk mid-run still ends in one line (distil.common.diskspace).
"""

from __future__ import annotations

import logging

import torch
from transformers import AutoModel

from distil.common.diskspace import OUTPUTS_ENV, free_bytes, human_bytes
from distil.config.schema import TeacherConfig
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
from distil.run.plan import RunPlan
from distil.store.artifacts import MANIFEST, ArtifactStore
from distil.teacher.finetune import teacher_spec
from distil.teacher.load import teacher_config

log = logging.getLogger(__name__)

FP32, FP16 = 4, 2  # bytes per saved weight, per cached target value
CHECKPOINT_COPIES = 4  # a fine-tuning checkpoint: weights, AdamW's exp_avg and exp_avg_sq, the best weights
SLACK = 1 << 20  # logs, configs, manifests, the student's folder and the file system's own blocks


def space_warnings(teacher: TeacherConfig, plan: RunPlan, data: TaskData, prepared: dict[str, PreparedSplit],
                   store: ArtifactStore, seed: int) -> list[str]:
    """The warning (logged at once) when the disk that holds the cache has less free space than the run needs;
    [] when it has room, or when either cannot be told."""
    free = free_bytes(store.root)
    need = bytes_needed(teacher, plan, data, prepared, store, seed) if free is not None else None
    if need is None or free >= need:
        return []
    warning = (f"the disk holding {store.root} has {human_bytes(free)} free, and this run needs about "
               f"{human_bytes(need)} (the teacher's fine-tuning checkpoint, its cached targets, the student): "
               f"it may fail when the disk fills; free space, or put the outputs on a larger disk with "
               f"{OUTPUTS_ENV}")
    log.warning(warning)
    return [warning]


def bytes_needed(teacher: TeacherConfig, plan: RunPlan, data: TaskData, prepared: dict[str, PreparedSplit],
                 store: ArtifactStore, seed: int) -> int | None:
    """The peak the run adds to the disk: the fine-tuning checkpoint while the teacher trains, or later the
    teacher, its targets and the student together. None when the teacher's config cannot be read offline."""
    config = teacher_config(teacher)  # read once: the teacher's size and its hidden width
    if config is None:
        return None
    teacher_bytes = 0
    key = store.key(teacher.name, teacher_spec(teacher, data, seed))
    if not (store.root / "teachers" / key / MANIFEST).is_file():  # not store.find: no checksums of the teacher twice
        teacher_bytes = parameter_count(config) * FP32
    targets = target_bytes(config, plan, data, prepared)
    return max(CHECKPOINT_COPIES * teacher_bytes, teacher_bytes + targets) + SLACK


def parameter_count(config) -> int:
    """A transformers model's parameter count, from its config alone (built on the meta device: no memory,
    no weights)."""
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    return sum(p.numel() for p in model.parameters())


def target_bytes(config, plan: RunPlan, data: TaskData, prepared: dict[str, PreparedSplit]) -> int:
    """Float16 logits of every split (per wordpiece for tagging) and, with a cached layer, its hidden states."""
    hidden = getattr(config, "hidden_size", 0) if plan.cached_layer is not None else 0
    outputs = plan.task.num_outputs(data.label_names)
    total = 0
    for split in prepared.values():
        tokens = int(split.ids.lengths().sum())
        logits = tokens if plan.task.per_token else len(split)
        total += FP16 * (logits * outputs + tokens * hidden)
    return total
