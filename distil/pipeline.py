"""One run: data -> teacher -> cached targets -> schedule -> evaluation -> metrics.json."""

from __future__ import annotations

import json
import logging
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import datasets
import numpy as np
import torch
import transformers
from omegaconf import OmegaConf
from safetensors.torch import save_file

from distil.config import Config
from distil.data import build_task_data
from distil.data.encode import Encoded, encode, model_labels
from distil.data.split import TaskData
from distil.evaluate import PRIMARY_METRIC, majority_baseline, score, student_logits
from distil.schedule import StudentSplit, needs_teacher_hidden, run_schedule, validate_schedule
from distil.speed import examples_per_second
from distil.store import ArtifactStore
from distil.students import (
    build_student,
    check_student,
    count_params,
    embedding_size,
    reads_pairs_apart,
    reads_words,
    word_embeddings,
)
from distil.students.embeddings import check_embedding_init, initial_embeddings
from distil.students.vocab import PAD, TrimmedVocab
from distil.teacher import (
    ensure_targets,
    ensure_teacher,
    load_finetuned,
    load_targets,
    teacher_hidden,
    teacher_logits,
)
from distil.teacher.load import check_layer
from distil.teacher.load import hidden_size as teacher_hidden_size

log = logging.getLogger(__name__)


def setup_runtime(cfg: Config) -> None:
    torch.set_num_threads(cfg.trainer.threads)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if cfg.hub_offline:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    quiet_libraries()


def quiet_libraries() -> None:
    datasets.disable_progress_bars()  # our own rich bars cover the long steps
    datasets.logging.set_verbosity_error()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


@dataclass
class Split:
    """A split as the student stage sees it: examples, their wordpieces and teacher outputs
    (the hidden layer only when the schedule has a representation loss)."""

    examples: datasets.Dataset
    encoded: Encoded
    teacher_logits: torch.Tensor | list[torch.Tensor]
    teacher_hidden: torch.Tensor | list[torch.Tensor] | None = None

    def select(self, rows: list[int]) -> Split:
        def pick(values):
            if values is None or isinstance(values, torch.Tensor):
                return None if values is None else values[rows]
            return [values[i] for i in rows]
        return Split(self.examples.select(rows), self.encoded.select(rows), pick(self.teacher_logits),
                     pick(self.teacher_hidden))

    def language(self, lang: str) -> Split:
        return self.select([i for i, v in enumerate(self.examples["language"][:]) if v == lang])


@dataclass
class StudentResult:
    model: torch.nn.Module
    vocab: TrimmedVocab
    stages: list[dict]
    test_ids: list[list[int]]
    teacher_hidden_size: int


def run(cfg: Config, run_dir: Path, choices: dict, overrides: list[str]) -> dict:
    setup_runtime(cfg)
    validate_schedule(cfg.schedule, cfg.trainer)
    with_hidden = needs_teacher_hidden(cfg.schedule)
    if with_hidden:
        check_layer(cfg.teacher)
    check_student(cfg.student, cfg.dataset.task)
    check_embedding_init(cfg.student.embedding_init, embedding_size(cfg.student), teacher_hidden_size(cfg.teacher),
                         cfg.student.vectors_file, reads_words(cfg.student))
    started = time.perf_counter()

    data = build_task_data(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed, cfg.hub_offline)
    log.info("data %s (%s): %s", cfg.dataset.name, data.task, data.summary())
    store = ArtifactStore(cfg.paths.cache)
    teacher = ensure_teacher(cfg.teacher, data, store, cfg.seed, cfg.hub_offline)
    targets = ensure_targets(cfg.teacher, teacher, data, store, with_hidden)

    model, tokenizer = load_finetuned(teacher.path, data.task)
    splits = {}
    for name, ds in data.splits.items():
        cached = load_targets(targets, name)
        splits[name] = Split(ds, encode(data.task, tokenizer, ds, cfg.teacher.max_length, len(data.label_names)),
                             teacher_logits(cached), teacher_hidden(cached) if with_hidden else None)
    metric = PRIMARY_METRIC[data.task]
    teacher_vocab = TeacherVocab(model.get_input_embeddings().weight.detach().float(),
                                 tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))),
                                 model.config.hidden_size)

    if cfg.schedule.per_language and data.multilingual:
        # XtremeDistil D0: a student per language, each seeing only its language's data.
        results = {}
        for lang in data.languages:
            log.info("student for language %s", lang)
            results[lang] = train_student(cfg, data, {n: s.language(lang) for n, s in splits.items()}, teacher_vocab)
            save_student(results[lang], cfg, data, tokenizer, run_dir / f"student-{lang}")
        student = _merge_languages(results, metric)
        first = next(iter(results.values()))
    else:
        first = train_student(cfg, data, splits, teacher_vocab)
        save_student(first, cfg, data, tokenizer, run_dir / "student")
        student = {"test": first.stages[-1]["test"], "dev": first.stages[-1]["dev"], "stages": first.stages}
    student.update(params=count_params(first.model), vocab_size=len(first.vocab))

    def teacher_score(name: str) -> dict:
        split = splits[name]
        return score(data.task, split.teacher_logits, split.examples, split.encoded, data.label_names)

    metrics = {
        "status": "ok",
        "choices": choices,
        "overrides": overrides,
        "task": data.task,
        "metric": metric,
        "data": {"sizes": data.summary(), "labels": data.label_names, "languages": data.languages},
        "teacher": {
            "test": teacher_score("test"),
            "dev": teacher_score("dev"),
            "params": count_params(model),
            "finetune": {k: v for k, v in teacher.info.items() if k != "history"},
        },
        "student": student,
        "speed": measure_speed(cfg, model, first.model, splits["test"].encoded.ids, first.test_ids,
                               tokenizer.pad_token_id),
        "artifacts": {"teacher": teacher.key, "targets": targets.key,
                      "teacher_reused": teacher.reused, "targets_reused": targets.reused},
        "seconds": round(time.perf_counter() - started, 1),
    }
    if data.task != "tagging":
        metrics["majority_baseline"] = {"test": {"accuracy": majority_baseline(
            data.splits["dev"]["label"][:], data.splits["test"]["label"][:])}}
    write_json_atomic(run_dir / "metrics.json", metrics)
    return metrics


def student_tokens(cfg: Config, data: TaskData, split: Split) -> list:
    """What the student reads: teacher wordpieces (a pair joint, or apart for siamese
    students), or lower-cased whitespace words for the RNN baseline."""
    if reads_words(cfg.student):
        return [text.lower().split()[: cfg.teacher.max_length] for text in split.examples["text"][:]]
    if data.task == "pair" and reads_pairs_apart(cfg.student):
        return split.encoded.pair_ids
    return split.encoded.ids


@dataclass
class TeacherVocab:
    """The teacher's wordpiece embedding matrix and token strings, for embedding initialisation."""

    embeddings: torch.Tensor
    tokens: list[str]
    hidden_size: int


def initialise_embeddings(model: torch.nn.Module, cfg: Config, vocab: TrimmedVocab, teacher: TeacherVocab) -> None:
    """random keeps the layer's own init; svd / pca / file replace it (XtremeDistil Table 14)."""
    if cfg.student.embedding_init == "random":
        return
    layer = word_embeddings(model)
    words = reads_words(cfg.student)  # the RNN baseline's vocabulary holds words, not teacher ids
    weights = initial_embeddings(
        cfg.student.embedding_init, layer.embedding_dim,
        teacher_ids=list(range(len(vocab.teacher_ids))) if words else vocab.teacher_ids,
        teacher_embeddings=None if words else teacher.embeddings,
        teacher_tokens=vocab.teacher_ids if words else teacher.tokens,
        vectors_file=cfg.student.vectors_file, seed=cfg.seed,
    )
    with torch.no_grad():
        layer.weight.copy_(weights)


def train_student(cfg: Config, data: TaskData, splits: dict[str, Split], teacher_vocab: TeacherVocab) -> StudentResult:
    """Trim a vocabulary to the training tokens, build the student, run the schedule."""
    tokens = {name: student_tokens(cfg, data, split) for name, split in splits.items()}
    vocab = TrimmedVocab.from_sequences(_sequences(tokens["labeled"] + tokens["transfer"]))

    def to_student(example):
        return tuple(vocab.map(part) for part in example) if isinstance(example, tuple) else vocab.map(example)

    student_splits = {
        name: StudentSplit([to_student(example) for example in tokens[name]], gold_labels(data, split),
                           split.teacher_logits, split.teacher_hidden, split.encoded.word_starts)
        for name, split in splits.items()
    }
    metric = PRIMARY_METRIC[data.task]

    def evaluate_split(model, name: str) -> dict:
        logits = student_logits(model, student_splits[name].ids, PAD, cfg.trainer.eval_batch_size)
        split = splits[name]
        return score(data.task, logits, split.examples, split.encoded, data.label_names)

    torch.manual_seed(cfg.seed)
    num_outputs = len(model_labels(data.task, data.label_names))
    model = build_student(cfg.student, len(vocab), num_outputs, data.task, teacher_vocab.hidden_size,
                          representation_head=needs_teacher_hidden(cfg.schedule))
    initialise_embeddings(model, cfg, vocab, teacher_vocab)
    trainer = cfg.trainer
    if cfg.student.batch_size is not None:  # a student's own paper setting beats the trainer default
        trainer = OmegaConf.merge(cfg.trainer, {"batch_size": cfg.student.batch_size})
    stages = run_schedule(cfg.schedule, trainer, model, student_splits, evaluate_split, metric, cfg.seed, PAD)
    return StudentResult(model, vocab, stages, student_splits["test"].ids, teacher_vocab.hidden_size)


def _sequences(examples: list) -> list:
    """Pairs read apart count as two sequences for the vocabulary."""
    return [part for example in examples for part in (example if isinstance(example, tuple) else (example,))]


def _merge_languages(results: dict[str, StudentResult], metric: str) -> dict:
    """Per-language students -> one report: each language's score, their mean and std."""
    merged = {"models": len(results), "stages": {lang: r.stages for lang, r in results.items()}}
    for split in ("dev", "test"):
        per_language = {lang: r.stages[-1][split][metric] for lang, r in results.items()}
        values = list(per_language.values())
        merged[split] = {metric: float(np.mean(values)), f"{metric}_std": float(np.std(values)),
                         "per_language": per_language}
    return merged


def gold_labels(data: TaskData, split: Split):
    """Per-wordpiece labels for tagging, one label per example otherwise (-1: none)."""
    if data.task == "tagging":
        return split.encoded.token_labels
    return torch.as_tensor(split.examples["label"][:], dtype=torch.long)


def measure_speed(cfg: Config, teacher, student, teacher_ids, student_ids, teacher_pad: int) -> dict:
    n = min(cfg.trainer.speed_examples, len(teacher_ids))
    if n == 0:
        return {}
    teacher_rate = examples_per_second(
        lambda ids, mask: teacher(input_ids=ids, attention_mask=mask), teacher_ids[:n], teacher_pad
    )
    student.eval()
    student_rate = examples_per_second(student, student_ids[:n], PAD)
    return {"examples": n, "batch_size": 32, "teacher_ex_per_s": teacher_rate,
            "student_ex_per_s": student_rate, "speedup": student_rate / teacher_rate}


def save_student(result: StudentResult, cfg: Config, data: TaskData, tokenizer, out: Path) -> None:
    """Everything `distil-predict` needs: weights, vocabulary, tokenizer, config and labels."""
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in result.model.state_dict().items()}, out / "model.safetensors")
    result.vocab.save(out / "vocab.json")
    tokenizer.save_pretrained(out / "tokenizer")
    config = {"student": OmegaConf.to_container(cfg.student), "task": data.task,
              "labels": model_labels(data.task, data.label_names), "vocab_size": len(result.vocab),
              "teacher_hidden_size": result.teacher_hidden_size,
              "representation_head": needs_teacher_hidden(cfg.schedule),
              "max_length": cfg.teacher.max_length}
    (out / "config.json").write_text(json.dumps(config, indent=2))


def write_json_atomic(path: Path, payload: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=2, default=float))
    os.replace(tmp, path)
