"""A trial's size and latency before it trains: its student, untrained, in a student folder.

An untrained student has the trained one's shapes, so its weights file has the trained one's size and
it runs as fast. The probe is built as the run will build it: the trial's student settings, a vocabulary
trimmed to the words or wordpieces of the trial's labeled and transfer texts (before augmentation: Tang's
augmentation recombines the transfer set's own words), the reference's tokenizer (the teacher's) and
labels, random weights. It is exported to the trial's backend and timed like a trained one
(distil.search.latency); probes of one architecture are built and timed once per search directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from functools import lru_cache
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from distil.common.atomic import write_json_atomic
from distil.config.schema import StudentConfig
from distil.data.split import TaskData, build_task_data
from distil.serve.student import SavedStudent, write_student
from distil.students import build_student, reads_words
from distil.students.vocab import TrimmedVocab
from distil.tables.timing import texts_of
from distil.tasks import make_task
from distil.tasks.text import wordpiece_encoder, words_of

PREDICTED = "predicted.json"  # in a probe folder: its measured size and latency, reused by equal trials


def probe_folder(cfg: DictConfig, reference: SavedStudent, probes: Path) -> Path:
    """The untrained student of the run `cfg` composes, written once under `probes/<hash>/`."""
    student = OmegaConf.to_container(cfg.student, resolve=True)
    settings = OmegaConf.merge(OmegaConf.structured(StudentConfig), student)
    vocab = vocabulary(cfg, "words" if reads_words(settings) else settings.vocabulary, reference)
    digest = hashlib.sha256(json.dumps([student, vocab.teacher_ids], sort_keys=True).encode()).hexdigest()[:16]
    folder = probes / digest
    if not (folder / "config.json").is_file():
        torch.manual_seed(0)
        model = build_student(settings, len(vocab), len(reference.labels), reference.task,
                              reference.config["teacher_hidden_size"])
        tmp = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")  # another worker may build it too
        write_student(tmp, model, vocab, reference.tokenizer, student=student, task=reference.task,
                      labels=reference.labels, teacher_hidden_size=reference.config["teacher_hidden_size"],
                      representation_head=False, projection=reference.config.get("projection", "side"),
                      max_length=reference.config["max_length"])
        try:
            tmp.rename(folder)
        except OSError:  # the other worker's is there: the same student
            shutil.rmtree(tmp)
    return folder


def vocabulary(cfg: DictConfig, tokens: str, reference: SavedStudent) -> TrimmedVocab:
    """The vocabulary a run trims its student's to (`tokens`: words, or trimmed or full wordpieces): what
    it reads of its labeled and transfer texts."""
    if tokens == "full":
        return TrimmedVocab.whole(len(reference.tokenizer))
    return _vocabulary(_setting(cfg), tokens, reference.tokenizer, reference.config["max_length"])


@lru_cache(maxsize=16)
def _vocabulary(setting: str, tokens: str, tokenizer, max_length: int) -> TrimmedVocab:
    data = _task_data(setting)
    texts = [text for name in ("labeled", "transfer") for text in texts_of(data.splits[name])]
    if tokens == "words":
        return TrimmedVocab(sorted({word for text in texts for word in words_of(text, max_length)}))
    return TrimmedVocab.from_sequences(wordpiece_encoder(tokenizer, max_length)(texts))


def task_data(cfg: DictConfig) -> TaskData:
    """The splits a run of `cfg` reads (before augmentation), built once per setting in a process."""
    return _task_data(_setting(cfg))


def _setting(cfg: DictConfig) -> str:
    """What the splits depend on, as JSON text (a cache key)."""
    return json.dumps({"dataset": OmegaConf.to_container(cfg.dataset, resolve=True),
                       "transfer": OmegaConf.to_container(cfg.transfer_size, resolve=True),
                       "data_dir": cfg.paths.data_dir, "seed": cfg.seed, "offline": cfg.hub_offline}, sort_keys=True)


@lru_cache(maxsize=8)
def _task_data(setting: str) -> TaskData:
    values = json.loads(setting)
    dataset = OmegaConf.create(values["dataset"])
    return build_task_data(dataset, make_task(dataset), OmegaConf.create(values["transfer"]), values["data_dir"],
                           values["seed"], values["offline"])


def predicted(folder: Path, backend: str) -> dict | None:
    """The size and latency measured on this probe and backend before, or None."""
    path = folder / PREDICTED
    return json.loads(path.read_text()).get(backend) if path.is_file() else None


def record_prediction(folder: Path, backend: str, values: dict) -> None:
    path = folder / PREDICTED
    known = json.loads(path.read_text()) if path.is_file() else {}
    write_json_atomic(path, {**known, backend: values})
