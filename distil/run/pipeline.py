"""One run: data -> teacher -> cached targets -> schedule -> evaluation -> metrics.json."""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from distil.augment.build import make_augmenter
from distil.common import distributed, tracking
from distil.common.atomic import write_json_atomic
from distil.common.runtime import CPU, Runtime, current, use
from distil.config.schema import Config, StudentConfig
from distil.data.prepared import PreparedSplit
from distil.data.ragged import Ragged, Tokens
from distil.data.split import TaskData
from distil.peers.train import train_peer
from distil.pretrain.mlm import load_encoder as load_pretrained_encoder
from distil.pretrain.mlm import pretrained_transformer
from distil.pretrain.sra import agnostic_student, load_agnostic
from distil.run.data import task_data
from distil.run.diskspace import space_warnings
from distil.run.evaluate import student_logits
from distil.run.flags import cut_warnings, predicted_classes, run_warnings, student_hint, usefulness_warnings
from distil.run.plan import RunPlan, plan_run
from distil.run.schedule import StudentSplit, run_schedule
from distil.run.tracked import log_outcome, run_tracker
from distil.serve.card import write_cards
from distil.serve.routing import write_routing
from distil.serve.speed import examples_per_second
from distil.serve.student import write_student
from distil.store.artifacts import ArtifactStore
from distil.students import (
    add_unk_dropout,
    build_student,
    count_params,
    keeps_own_random_init,
    param_counts,
    reads_words,
    word_embeddings,
)
from distil.students.embeddings import TokenVectors, initial_embeddings, with_pad_and_unk
from distil.students.pretrained import (
    PretrainedStart,
    adopt_architecture,
    from_checkpoint,
)
from distil.students.transformer import TransformerStudent
from distil.students.vocab import PAD, UNK, TrimmedVocab, student_sep_id
from distil.tasks import Task
from distil.tasks.text import words_of
from distil.teacher import TargetView, ensure_targets, ensure_teacher, load_finetuned, load_tokenizer, open_targets
from distil.teacher.token_vectors import token_output_vectors
from distil.training.checkpoint import schedule_checkpoint

log = logging.getLogger(__name__)


def setup_runtime(threads: int, seed: int, runtime: Runtime = CPU) -> None:
    """Threads (on the CPU: on a GPU the host's own work keeps torch's default) and every random
    generator's seed, before the run's first step."""
    if not runtime.on_gpu:
        torch.set_num_threads(threads)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # every CUDA generator too


@dataclass
class StudentResult:
    model: torch.nn.Module
    vocab: TrimmedVocab
    stages: list[dict]
    test_tokens: Tokens
    teacher_hidden_size: int
    scores: dict[str, dict]  # the final student's: dev, test and every extra test split
    dev_classes: int | None = None  # how many classes it predicts on dev (None: a task without classes)


class Phases:
    """Seconds per phase of a run: the data, the teacher (fine-tuned or reused), its cached targets,
    the student (training, evaluation and the speed measurement); 0-ish where a phase reused an artifact."""

    def __init__(self, started: float):
        self.seconds: dict[str, float] = {}
        self._last = started

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = round(now - self._last, 1)
        self._last = now


def run(cfg: Config, run_dir: Path, choices: dict, overrides: list[str]) -> dict:
    plan = plan_run(cfg)  # every check before any work; the decisions the steps below read
    setup_runtime(cfg.trainer.threads, cfg.seed, plan.runtime)
    log.info("running on %s", plan.runtime)
    with use(plan.runtime):  # every phase below: models and batches on its device, in its precision
        # tracking=none: a no-op; else every epoch below is logged, and the tracker closed however the run ends
        with tracking.use(run_tracker(cfg, run_dir)) as tracker:
            metrics = _run(cfg, plan, run_dir, choices, overrides)
            log_outcome(tracker, metrics, run_dir)
            return metrics


def _run(cfg: Config, plan: RunPlan, run_dir: Path, choices: dict, overrides: list[str]) -> dict:
    task = plan.task
    started = time.perf_counter()
    phases = Phases(started)

    store = ArtifactStore(cfg.paths.cache)
    if distributed.is_main():  # under torchrun every file is rank 0's to write or remove
        store.remove_stale_builds()  # what killed runs left and no build will resume
    data, prepared = prepare_data(cfg, task, store)
    log.info("data %s (%s): %s", data.name, task.name, data.summary())
    cut = {name: split.cut for name, split in prepared.items() if split.cut}  # sentences cut by words
    cut_found = cut_warnings(cut, cfg.teacher.max_length)
    for warning in cut_found:  # before the work: a long run may end in the middle
        log.warning(warning)
    short_of_space = space_warnings(cfg.teacher, plan, data, prepared, store, cfg.seed)  # logged now, before the work
    phases.lap("data")
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, cfg.hub_offline)
    model, tokenizer = load_finetuned(teacher.path, task)
    phases.lap("teacher")
    targets = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, plan.cached_layer,
                             lambda: (model, tokenizer), apart=plan.pairs_apart)
    phases.lap("targets")
    views = open_targets(targets)
    teacher_vocab = TeacherVocab(model.get_input_embeddings().weight.detach().float().cpu(),
                                 tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))),
                                 model.config.hidden_size, list(tokenizer.all_special_ids),
                                 partial(token_output_vectors, model, tokenizer), tokenizer.sep_token_id)

    if plan.peer:  # a tool a user would otherwise pick, on the same splits and teacher
        peer = train_peer(cfg.student, cfg.teacher, cfg.seed, task, data, prepared, views, run_dir / "student")
        student, speed, dev_classes = peer.student, {}, {None: peer.dev_classes}
    else:
        start = student_start(cfg, plan, data, tokenizer, store)
        if start is not None:  # its build (or load) apart from the student's training: distil.tables.costs
            phases.lap("pretrained")
        student, speed, dev_classes = train_students(cfg, plan, data, prepared, views, teacher_vocab, model,
                                                     tokenizer, run_dir, start)
    phases.lap("student")
    metrics = {
        "status": "ok",
        "choices": choices,
        "overrides": overrides,
        "task": task.name,
        "metric": task.metric,  # selects on dev
        "metrics": task.metrics,  # every score reported, the primary first
        "extra_tests": data.extra_tests,  # scored beside test, never used to select
        "data": {"sizes": data.summary(), "labels": data.label_names, "languages": data.languages,
                 "overlap": data.overlap, "cut": cut},
        "teacher": {
            **{name: task.score(views[name].all_logits(), prepared[name], data.label_names)
               for name in ("labeled", "dev", *reported_splits(data))},
            "diagnostics": {name: task.diagnostics(logit_chunks(views[name])) for name in prepared},
            "params": count_params(model),
            "param_counts": param_counts(model, teacher_vocab.size),
            "vocab_size": teacher_vocab.size,
            "finetune": {k: v for k, v in teacher.info.items() if k != "history"},
        },
        "student": student,
        "speed": speed,
        "runtime": plan.runtime.describe(),  # the device, its name and the precision
        "artifacts": {"teacher": teacher.key, "targets": targets.key,
                      "teacher_reused": teacher.reused, "targets_reused": targets.reused,
                      "teacher_ran": not (teacher.reused and targets.reused),
                      "transfer_fingerprint": split_fingerprint(targets, "transfer")},
        "seconds": round(time.perf_counter() - started, 1),
        "phases": phases.seconds,  # where the seconds went (distil bench demo reads them)
    }
    # trivial predictors every model must beat, scored on dev and every reported split
    metrics["floors"] = task.floors(prepared["labeled"], prepared["dev"],
                                    {name: prepared[name] for name in ("dev", *reported_splits(data))},
                                    data.label_names)
    if (majority := metrics["floors"].get("majority_class")) is not None:  # the run table's row, from its floor
        metrics["majority_baseline"] = {name: majority[name] for name in reported_splits(data)}
    # status stays "ok", but a student that learned nothing must be impossible to miss
    metrics["warnings"] = [
        *run_warnings(task, data, prepared["dev"], student, dev_classes),
        *usefulness_warnings(task.metric, metrics["floors"], metrics["teacher"], student,
                             student_hint(task, plan.reads_pairs_apart, cfg.student.kind)),
    ]
    for warning in metrics["warnings"]:
        log.warning(warning)
    metrics["warnings"] += [*short_of_space, *cut_found]
    if distributed.is_main():
        write_json_atomic(run_dir / "metrics.json", metrics)
        write_cards(run_dir)  # each student folder's README.md, from the metrics.json just written
    return metrics


def split_fingerprint(targets, split: str) -> str | None:
    """The content hash of a split the cached targets were computed on (TaskData.fingerprint, recorded in
    the cache's manifest); None for a cache built before fingerprints were recorded."""
    return targets.info.get("splits", {}).get(split, {}).get("fingerprint")


def train_students(cfg: Config, plan: RunPlan, data: TaskData, prepared: dict[str, PreparedSplit],
                   views: dict[str, TargetView], teacher_vocab: TeacherVocab, teacher, tokenizer,
                   run_dir: Path, start: PretrainedStart | None = None) -> tuple[dict, dict, dict]:
    """Train and save the student (XtremeDistil D0: one per language); (its metrics.json record, the
    teacher/student speed, dev classes predicted per model)."""
    if cfg.schedule.per_language and data.multilingual:
        # XtremeDistil D0: a student per language, each seeing only its language's data.
        results = {}
        for lang in data.languages:
            log.info("student for language %s", lang)
            rows = {name: language_rows(split, lang) for name, split in prepared.items()}
            results[lang] = train_student(cfg, plan, data, {n: s.select(rows[n]) for n, s in prepared.items()},
                                          {n: v.select(rows[n]) for n, v in views.items()}, teacher_vocab,
                                          language=lang, start=start)
            save_student(results[lang], cfg, plan, data, tokenizer, run_dir / f"student-{lang}")
        if distributed.is_main():
            write_routing(run_dir, list(results))  # the run directory serves every language's student
        student = _merge_languages(results, plan.task)
        first = next(iter(results.values()))
    else:
        first = train_student(cfg, plan, data, prepared, views, teacher_vocab, start=start)
        save_student(first, cfg, plan, data, tokenizer, run_dir / "student")
        student = {**first.scores, "stages": first.stages}
        results = {None: first}
    if start is not None:  # where the student started, and what its pre-training reported
        student["pretrained"] = {"source": start.source, **start.info}
    counts = student_param_counts(results, None if plan.reads_words else teacher_vocab.size)
    student.update(params=counts["deployed"], param_counts=counts, vocab_size=len(first.vocab))
    speed = measure_speed(cfg.trainer.speed_examples, teacher, first.model, prepared["test"].ids, first.test_tokens,
                          tokenizer.pad_token_id)
    return student, speed, {lang: r.dev_classes for lang, r in results.items()}


def language_rows(split: PreparedSplit, lang: str) -> list[int]:
    return [i for i, v in enumerate(split.languages) if v == lang]


def reported_splits(data: TaskData) -> list[str]:
    """The held-out splits every model is scored on: test and the dataset's extra ones."""
    return ["test", *data.extra_tests]


def prepare_data(cfg: Config, task: Task,
                 store: ArtifactStore | None = None) -> tuple[TaskData, dict[str, PreparedSplit]]:
    """The run's splits (the transfer set with its augmented examples, if augment is on), tokenised
    once with the teacher's tokenizer: fine-tuning, caching, training and evaluation all read these."""
    tokenizer = load_tokenizer(cfg.teacher, cfg.hub_offline)
    augment = make_augmenter(cfg.augment, task, cfg.dataset, cfg.paths.data_dir,
                             store or ArtifactStore(cfg.paths.cache), cfg.seed, tokenizer.mask_token)
    data = task_data(cfg, augment, task)
    prepared = {name: task.prepare(name, tokenizer, ds, cfg.teacher.max_length, data.label_names)
                for name, ds in data.splits.items()}
    return data, prepared


def logit_chunks(view: TargetView, size: int = 8192):
    """The teacher's logits of a split, a chunk at a time: memory stays flat on a huge transfer set."""
    for start in range(0, len(view), size):
        yield view.logits(np.arange(start, min(start + size, len(view))))


def student_tokens(plan: RunPlan, split: PreparedSplit, max_length: int):
    """What the student reads: teacher wordpieces (a pair joint, or apart for siamese
    students), or lower-cased whitespace words for the RNN baseline."""
    if plan.reads_words:
        return [words_of(text, max_length) for text in split.examples["text"][:]]
    if plan.task.inputs == "pair" and plan.reads_pairs_apart:
        return split.pair
    return split.ids


@dataclass
class TeacherVocab:
    """The teacher's wordpiece embedding matrix and token strings, for embedding initialisation."""

    embeddings: torch.Tensor
    tokens: list[str]
    hidden_size: int
    special_ids: list[int]  # [CLS], [SEP], ...: never replaced by [UNK] (student.unk_dropout)
    # teacher ids -> the teacher's output vector of each wordpiece alone (embedding_init=model2vec)
    token_vectors: TokenVectors | None = None
    sep_id: int | None = None  # [SEP]: where a Transformer student's second segment starts

    @property
    def size(self) -> int:
        """Rows of the teacher's wordpiece embedding: the vocabulary the papers' parameter counts assume."""
        return self.embeddings.shape[0]


def initialise_embeddings(model: torch.nn.Module, student: StudentConfig, seed: int, vocab: TrimmedVocab,
                          teacher: TeacherVocab) -> None:
    """Every run's student embeddings start here: random U(-0.1, 0.1) (Mukherjee & Awadallah 6.1),
    svd / pca / file (XtremeDistil Table 14); [UNK] at the mean of the other rows. A transformer
    student's `random` keeps BERT's own init (students.keeps_own_random_init)."""
    layer = word_embeddings(model)
    if student.embedding_init == "random" and keeps_own_random_init(student):
        weights = with_pad_and_unk(layer.weight.detach().clone())
    else:
        words = reads_words(student)  # the RNN baseline's vocabulary holds words, not teacher ids
        weights = initial_embeddings(
            student.embedding_init, layer.embedding_dim,
            teacher_ids=list(range(len(vocab.teacher_ids))) if words else vocab.teacher_ids,
            teacher_embeddings=None if words else teacher.embeddings,
            teacher_tokens=vocab.teacher_ids if words else teacher.tokens,
            vectors_file=student.vectors_file, seed=seed,
            token_vectors=None if words else teacher.token_vectors, sif_coefficient=student.sif_coefficient,
        )
    with torch.no_grad():
        layer.weight.copy_(weights)


def student_start(cfg: Config, plan: RunPlan, data: TaskData, tokenizer,
                  store: ArtifactStore) -> PretrainedStart | None:
    """The pre-trained weights a student starts from, or None (its own random init):
    student.name_or_path's checkpoint, else with schedule.student_init=pretrained its family's
    pre-training, built once, content-keyed and shared by every task: a Transformer's masked LM
    (the pretrain group, Turc et al.), an SRA student's task-agnostic distillation (the agnostic
    group, Wu et al.)."""
    if plan.start == "checkpoint":
        start = from_checkpoint(cfg.student, tokenizer, cfg.hub_offline)
        adopt_architecture(cfg.student, start)
        return start
    if plan.start == "own":
        return None
    if plan.family == "sra":
        return agnostic_start(cfg, store)
    transfer = data.splits["transfer"]
    texts = [text for column in ("text", "text_pair") if column in transfer.column_names for text in transfer[column]]
    artifact = pretrained_transformer(cfg.pretrain, cfg.student, tokenizer, store, cfg.paths.data_dir, texts)
    encoder, _ = load_pretrained_encoder(artifact.path)
    summary = {**build_record(artifact), **{k: artifact.info.get(k) for k in (
        "steps", "sentences", "final_mlm_loss", "final_heldout_mlm_loss", "unigram_loss")}}
    return PretrainedStart(encoder, cfg.student.num_layers, cfg.student.hidden_size, tokenizer.pad_token_id,
                           tokenizer.unk_token_id, f"pretrained/{artifact.key}", info=summary)


def agnostic_start(cfg: Config, store: ArtifactStore) -> PretrainedStart:
    """Wu et al.'s task-agnostic SRA student for this teacher (distil/pretrain/sra.py)."""
    artifact = agnostic_student(cfg.agnostic, cfg.teacher, cfg.student, cfg.hub_offline, store, cfg.paths.data_dir)
    summary = {**build_record(artifact), **{k: artifact.info.get(k) for k in ("sentences", "epochs", "final_loss",
                                                                               "validation_loss")}}
    return PretrainedStart(load_agnostic(artifact.path), cfg.student.num_layers, cfg.student.hidden_size, PAD, UNK,
                           f"agnostic/{artifact.key}", embedding_key="encoder.embedding.weight", offset=2,
                           info=summary)


def build_record(artifact) -> dict:
    """Whether this run built the pre-trained student or read it from the cache, and the seconds its build
    took (its manifest's): what a set of runs counts once (distil.tables.costs)."""
    return {"reused": artifact.reused, "seconds": artifact.info.get("seconds")}


def transformer_of(model: torch.nn.Module) -> TransformerStudent:
    """The Transformer student inside `model` (it may be wrapped with a representation head)."""
    return next(module for module in model.modules() if isinstance(module, TransformerStudent))


def train_student(cfg: Config, plan: RunPlan, data: TaskData, prepared: dict[str, PreparedSplit],
                  views: dict[str, TargetView], teacher_vocab: TeacherVocab, language: str | None = None,
                  start: PretrainedStart | None = None) -> StudentResult:
    """Trim a vocabulary to the training tokens (or keep the teacher's whole one), build the student,
    run the schedule."""
    task = plan.task
    tokens = {name: student_tokens(plan, split, cfg.teacher.max_length) for name, split in prepared.items()}
    if plan.reads_words:
        vocab = TrimmedVocab.from_sequences(tokens["labeled"] + tokens["transfer"])
        mapped = {name: vocab.map_words(sentences) for name, sentences in tokens.items()}
    else:  # full: every wordpiece the teacher's tokenizer has (XtremeDistil)
        vocab = (TrimmedVocab.whole(len(teacher_vocab.tokens)) if cfg.student.vocabulary == "full"
                 else TrimmedVocab.from_tokens([tokens["labeled"], tokens["transfer"]]))
        mapped = {name: vocab.map_tokens(column) for name, column in tokens.items()}

    def student_split(name: str) -> StudentSplit:
        labels = prepared[name].labels
        gold = task.has_gold(labels) if isinstance(labels, torch.Tensor) else None
        return StudentSplit(mapped[name], labels, gold, views[name], prepared[name].word_starts)

    student_splits = {name: student_split(name) for name in prepared}

    def evaluate_split(model, name: str) -> dict:
        logits = student_logits(model, student_splits[name].tokens, PAD, cfg.trainer.eval_batch_size)
        return task.score(logits, prepared[name], data.label_names)

    torch.manual_seed(cfg.seed)
    sep = student_sep_id(vocab, teacher_vocab.sep_id, plan.reads_words)
    model = build_student(cfg.student, len(vocab), task.num_outputs(data.label_names), task,
                          teacher_vocab.hidden_size, representation_head=plan.with_hidden,
                          projection=cfg.schedule.projection, sep_id=sep,
                          shared_output=cfg.schedule.shared_output_layer)
    initialise_embeddings(model, cfg.student, cfg.seed, vocab, teacher_vocab)
    if start is not None:  # pre-trained weights (Turc, Wu): every one, the word embeddings at our rows
        start.apply(model if plan.family == "sra" else transformer_of(model).bert, vocab)
    # word students (the RNN baseline) read no special tokens
    add_unk_dropout(model, cfg.student.unk_dropout,
                    [] if plan.reads_words else vocab.map(teacher_vocab.special_ids))
    model.to(current().device)  # built and initialised on the CPU (the same draws on any device), trained there
    # keyed by the data it trains on too (split sizes, vocabulary), and for D0 by its language
    trains_on = [language, {name: len(split) for name, split in student_splits.items()}, vocab.teacher_ids]
    with schedule_checkpoint(cfg.paths.cache, plan.recipe, cfg.trainer.checkpoint_every_seconds,
                             *trains_on) as checkpoint:  # a killed run resumes from here
        stages = run_schedule(cfg.schedule, plan.trainer, model, student_splits, evaluate_split, task, cfg.seed,
                              PAD, checkpoint)
    for record in stages:
        record["batch_size_from"] = plan.batch_size_from
    # the model is the last step's best on dev: its extra test splits are scored once, after selection
    scores = {"dev": stages[-1]["dev"], "test": stages[-1]["test"],
              **{name: evaluate_split(model, name) for name in data.extra_tests}}
    dev_classes = predicted_classes(student_logits(model, student_splits["dev"].tokens, PAD,
                                                   cfg.trainer.eval_batch_size)) if data.label_names else None
    return StudentResult(model, vocab, stages, student_splits["test"].tokens, teacher_vocab.hidden_size, scores,
                         dev_classes)


def student_param_counts(results: dict[str | None, StudentResult], teacher_vocab_size: int | None) -> dict:
    """param_counts of the student, or for D0 (a student per language) of their sum, with each
    language's model under per_model: all of them are deployed, one serves each language."""
    per_model = {lang: param_counts(r.model, teacher_vocab_size) for lang, r in results.items()}
    if list(per_model) == [None]:
        return {**per_model[None], "models": 1}
    total = {key: None if any(c[key] is None for c in per_model.values()) else sum(c[key] for c in per_model.values())
             for key in next(iter(per_model.values()))}
    return {**total, "models": len(per_model), "per_model": per_model}


def _merge_languages(results: dict[str, StudentResult], task: Task) -> dict:
    """Per-language students -> one report: per metric, the mean and std over languages, and
    each language's primary score."""
    merged = {"models": len(results), "stages": {lang: r.stages for lang, r in results.items()}}
    for split in next(iter(results.values())).scores:
        merged[split] = {}
        for metric in task.metrics:
            values = [r.scores[split][metric] for r in results.values()]
            merged[split].update({metric: float(np.mean(values)), f"{metric}_std": float(np.std(values))})
        merged[split]["per_language"] = {lang: r.scores[split][task.metric] for lang, r in results.items()}
    return merged


def measure_speed(examples: int, teacher, student, teacher_ids: Ragged, student_tokens: Tokens,
                  teacher_pad: int) -> dict:
    n = min(examples, len(teacher_ids), len(student_tokens))  # both on the same examples
    if n == 0:
        return {}
    teacher_rate = examples_per_second(
        lambda ids, mask: teacher(input_ids=ids, attention_mask=mask), teacher_ids, n, teacher_pad
    )
    student.eval()
    student_rate = examples_per_second(student, student_tokens, n, PAD)
    return {"examples": n, "batch_size": 32, "teacher_ex_per_s": teacher_rate,
            "student_ex_per_s": student_rate, "speedup": student_rate / teacher_rate}


def save_student(result: StudentResult, cfg: Config, plan: RunPlan, data: TaskData, tokenizer, out: Path) -> None:
    """The student's folder (distil/serve/student.py holds its format, and reads it back); rank 0's alone."""
    if not distributed.is_main():
        return
    write_student(out, result.model, result.vocab, tokenizer, student=OmegaConf.to_container(cfg.student),
                  task=plan.task, labels=plan.task.output_names(data.label_names),
                  teacher_hidden_size=result.teacher_hidden_size, representation_head=plan.with_hidden,
                  projection=cfg.schedule.projection, shared_output=cfg.schedule.shared_output_layer,
                  max_length=cfg.teacher.max_length)
