"""A run planned once: every pre-flight check and every decision the later steps need, made from the
composed config before any data is read or any model trained. The steps then read the plan's narrow
values (the task, the batch and the rule that chose it, the cached layer, ...) instead of asking the
whole Config again, and a setting that cannot run fails here with one line, before any work."""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import OmegaConf

from distil.augment.build import check_augment
from distil.common.libraries import offline_hubs, quiet_libraries
from distil.common.runtime import Runtime
from distil.config.schema import (
    Config,
    StudentConfig,
    TeacherConfig,
    TrainerConfig,
    check_config,
    reading_length,
    without_defaults,
)
from distil.errors import DistilError, check_choice
from distil.peers import check_peer, check_peer_teacher, is_peer
from distil.pretrain.mlm import check_pretrain
from distil.pretrain.sra import check_agnostic
from distil.run.schedule import needs_teacher_hidden, validate_schedule
from distil.students import FAMILIES, check_student, embedding_size, reads_pairs_apart, reads_words
from distil.students.embeddings import check_embedding_init
from distil.students.heads import check_output_layers, check_projection_place
from distil.students.pretrained import check_student_init
from distil.tasks import Task, make_task
from distil.teacher.finetune import check_finetune
from distil.teacher.load import check_layer, check_teacher_source
from distil.teacher.load import hidden_size as teacher_hidden_size

DEFAULT_BATCH_SIZE = 32
CACHE_LAYER = ("auto", "needed")


@dataclass(frozen=True)
class RunPlan:
    task: Task
    batch_size: int  # the student's training batch
    batch_size_from: str  # the rule that chose it (training_batch_size)
    trainer: TrainerConfig  # cfg.trainer at that batch: what every stage and lr schedule reads
    with_hidden: bool  # some stage compares the student with a teacher hidden layer
    cached_layer: int | None  # the teacher layer cached beside the logits (None: logits only)
    pairs_apart: bool  # the cached layer holds each sentence of a pair alone (a student reading them apart)
    reads_words: bool  # the student reads whitespace words, not the teacher's wordpieces
    reads_pairs_apart: bool  # the student reads the two sentences of a pair apart (siamese, SRA)
    peer: bool  # a tool a user would otherwise pick (distil.peers), not a student family
    family: str  # the student family (student.kind: bilstm, transformer, sra, ...), or "peer"
    start: str  # where the student's weights start: STARTS
    recipe: dict  # what changes the student's training (training_recipe): its checkpoint's key
    runtime: Runtime  # the device every phase runs on, and the precision of training's forward passes


# "own": its family's random init; "checkpoint": student.name_or_path; "pretrained": its family's
# pre-training (a Transformer's masked LM, Turc; an SRA student's task-agnostic distillation, Wu)
STARTS = ("own", "checkpoint", "pretrained")


def plan_run(cfg: Config) -> RunPlan:
    """Check everything that can be checked before work starts, and decide once."""
    check_config(cfg)  # every numeric setting in range before anything runs
    check_teacher_source(cfg.teacher)  # a local teacher is a model, and max_length fits its positions
    cfg.teacher.max_length = reading_length(cfg)  # a dataset read at its beginning: every phase below cuts there
    runtime = Runtime.resolve(cfg.runtime.device, cfg.runtime.precision)  # an absent GPU fails here
    cfg.runtime.precision = runtime.precision  # auto, resolved: the checkpoint's key holds what runs
    quiet_libraries()
    if cfg.hub_offline:  # before any check loads a teacher's config
        offline_hubs()
    task = make_task(cfg.dataset)
    batch_size, chosen_by = training_batch_size(cfg)  # a batch size below 1 fails here, before any data is read
    validate_schedule(cfg.schedule, cfg.trainer, task, batch_size)
    with_hidden = needs_teacher_hidden(cfg.schedule)
    cached_layer = layer_to_cache(cfg.teacher, task, with_hidden)
    apart = cache_pairs_apart(task, cfg.student, cached_layer)
    if cached_layer is not None:
        check_layer(cfg.teacher)
    peer = is_peer(cfg.student)
    (check_peer if peer else check_student)(cfg.student, task)
    if peer:
        check_peer_teacher(cfg.student, cfg.teacher)
    else:
        check_student_init(cfg.schedule.student_init, cfg.student)
    check_augment(cfg.augment, task, cfg.dataset)
    if with_hidden and not peer:
        check_projection_place(cfg.schedule.projection, FAMILIES[cfg.student.kind], task.inputs)
        check_output_layers(cfg.schedule.shared_output_layer, FAMILIES[cfg.student.kind])
    words = reads_words(cfg.student)
    check_embedding_init(cfg.student.embedding_init, embedding_size(cfg.student), teacher_hidden_size(cfg.teacher),
                         cfg.student.vectors_file, words)
    check_finetune(cfg.teacher.finetune)
    start = student_start_kind(cfg)
    if start == "pretrained" and cfg.student.kind == "sra":  # pre-training settings, before any fine-tuning
        check_agnostic(cfg.agnostic)
    elif start == "pretrained":
        check_pretrain(cfg.pretrain)
    trainer = OmegaConf.merge(cfg.trainer, {"batch_size": batch_size})
    return RunPlan(task, batch_size, chosen_by, trainer, with_hidden, cached_layer, apart, words,
                   reads_pairs_apart(cfg.student), peer, cfg.student.kind, start,
                   training_recipe(cfg), runtime)


# The config groups whose values change what the student learns (trainer.checkpoint_every_seconds does not).
TRAINING_GROUPS = ("teacher", "student", "schedule", "dataset", "transfer_size", "augment", "pretrain", "agnostic",
                   "trainer")
NOT_TRAINING = {"trainer": ("checkpoint_every_seconds", "speed_examples")}


def training_recipe(cfg: Config) -> dict:
    """The resolved config groups that change a student's training, and the seed: the part of a
    checkpoint's key (training.checkpoint.training_key) the run decides. Settings at their schema
    default and descriptions are left out, as in a table cell's key: a setting added later, or
    reworded prose, does not orphan an interrupted run's checkpoint."""
    groups = {}
    for group in TRAINING_GROUPS:
        values = without_defaults(OmegaConf.to_container(cfg[group], resolve=True), cfg[group])
        for key in NOT_TRAINING.get(group, ()):
            values.pop(key, None)
        groups[group] = values
    # the precision changes the student's arithmetic, the device only where it runs: present only when
    # not fp32, so an fp32 run's checkpoint keeps the key it had before runtimes existed
    precision = without_defaults(OmegaConf.to_container(cfg.runtime, resolve=True), cfg.runtime)
    precision.pop("device", None)
    if precision:
        groups["runtime"] = precision
    return {"groups": groups, "seed": cfg.seed}


def student_start_kind(cfg: Config) -> str:
    if cfg.student.name_or_path is not None:
        return "checkpoint"
    return "pretrained" if cfg.schedule.student_init == "pretrained" else "own"


def training_batch_size(cfg: Config) -> tuple[int, str]:
    """The student's training batch and the rule that chose it, first set wins:
    trainer.batch_size (only set on the command line or by a preset: an explicit choice),
    schedule.batch_size (the schedule's paper setting), student.batch_size (the student's
    paper setting), else 32."""
    candidates = [("trainer.batch_size", cfg.trainer.batch_size, "command line / preset"),
                  ("schedule.batch_size", cfg.schedule.batch_size, "schedule"),
                  ("student.batch_size", cfg.student.batch_size, "student")]
    for key, value, _ in candidates:
        if value is not None and value < 1:
            raise DistilError(f"{key} must be a positive number of examples (got {value}); "
                              f"set it to 1 or more, or to null to fall back to the next rule")
    return next(((value, rule) for _, value, rule in candidates if value is not None),
                (DEFAULT_BATCH_SIZE, "default"))


def layer_to_cache(cfg: TeacherConfig, task: Task, needed: bool) -> int | None:
    """The hidden layer the cache holds beside the logits (None: logits only); see teacher.cache_layer."""
    check_choice("teacher.cache_layer", cfg.cache_layer, CACHE_LAYER)
    wanted = needed or (cfg.cache_layer == "auto" and not task.per_token)
    return cfg.layer if wanted else None


def cache_pairs_apart(task: Task, student: StudentConfig, layer: int | None) -> bool:
    """Whether the cached layer is each sentence of a pair alone rather than the joined pair's
    [CLS]: for a student that reads the sentences apart (Wu et al. 2019 §3.1, Fig. 1c: each
    sentence is distilled against the teacher's vector of that sentence). The student decides,
    not the schedule: with teacher.cache_layer=auto a layer is cached even for a schedule that
    compares none, and it is cached in the form a representation schedule of the same sweep
    would read, so the sweep still runs the teacher once."""
    return layer is not None and task.inputs == "pair" and reads_pairs_apart(student)
