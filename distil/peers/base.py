"""What a peer is: fit on texts and class ids, predict class probabilities, save and load itself."""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import ClassVar, Protocol

import numpy as np

from distil.errors import DistilError, check_choice
from distil.students import INPUT_NAMES

PEER_FILE = "peer.json"  # in a saved peer's directory: which peer, its labels, its own settings


class Peer(Protocol):
    name: ClassVar[str]

    def fit(self, texts: list[str], labels: np.ndarray, dev_texts: list[str], dev_labels: np.ndarray) -> None: ...
    def predict_proba(self, texts: list[str]) -> np.ndarray: ...
    def param_count(self) -> int: ...
    def save(self, directory: Path) -> None: ...


# peer name -> (module, class, the package a user installs for it)
PEERS = {
    "tfidf": ("distil.peers.tfidf", "TfidfPeer", "scikit-learn"),
    "fasttext": ("distil.peers.fasttext_peer", "FastTextPeer", "fasttext-wheel"),
    "model2vec": ("distil.peers.model2vec_peer", "Model2VecPeer", "model2vec[train]"),
    "setfit": ("distil.peers.setfit_peer", "SetFitPeer", "setfit"),
}


# student.targets: the labeled set alone; + the teacher's argmax on transfer; or the teacher's logits on both,
# regressed (a peer that can: REGRESS_LOGITS)
TARGETS = ("labels", "teacher", "logits")
REGRESS_LOGITS = ("model2vec",)  # its StaticModelForRegression: an MLP head fit by MSE to vectors


def is_peer(student_cfg) -> bool:
    return student_cfg.kind == "peer"


def make_peer(name: str, seed: int, teacher_source: str) -> Peer:
    """The peer, seeded; model2vec and SetFit start from the teacher's pre-trained model."""
    cls = peer_class(name)
    return cls(seed=seed, source=teacher_source) if getattr(cls, "READS_TEACHER_MODEL", False) else cls(seed=seed)


def peer_class(name: str) -> type:
    check_choice("student.peer", name, PEERS)
    module, cls, package = PEERS[name]
    try:
        return getattr(importlib.import_module(module), cls)
    except ImportError as error:
        raise DistilError(f"student.peer={name} needs the package {package} ({error.name} is missing): run "
                          f"`make install` (or `pip install -e '.[peers]'`)") from None


def save_peer(peer: Peer, directory: Path, labels: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    peer.save(directory)
    (directory / PEER_FILE).write_text(json.dumps({"peer": peer.name, "labels": labels}))


def load_peer(directory: Path) -> tuple[Peer, list[str]]:
    record = json.loads((directory / PEER_FILE).read_text())
    return peer_class(record["peer"]).load(directory), record["labels"]


def check_peer(cfg, task) -> None:
    """A peer (distil.peers) classifies single texts, and its package must be installed."""
    peer_class(cfg.peer or "")  # unknown name or missing package: one line naming the fix
    if task.inputs != "text" or not task.has_classes:
        raise DistilError(f"student '{cfg.name}' classifies single texts and {task.name} gives "
                          f"{INPUT_NAMES[task.inputs]}; use a runner student (e.g. student=static)")
    check_choice("student.targets", cfg.targets, TARGETS)
    check_regresses(cfg.peer, cfg.targets)


def check_peer_teacher(cfg, teacher_cfg) -> None:
    """model2vec and SetFit start from the teacher's pre-trained model: a randomly initialised teacher
    (name_or_path: random, debug=smoke's) has none to start from."""
    if getattr(peer_class(cfg.peer or ""), "READS_TEACHER_MODEL", False) and teacher_cfg.name_or_path == "random":
        raise DistilError(f"student={cfg.name} starts from the teacher's pre-trained model, and teacher "
                          f"'{teacher_cfg.name}' is randomly initialised (name_or_path: random): use a pre-trained "
                          f"teacher (e.g. teacher=minilm), or a peer that reads none (student=peer-tfidf)")


def check_regresses(name: str, targets: str) -> None:
    """student.targets=logits needs a peer with a regression head."""
    if targets == "logits" and name not in REGRESS_LOGITS:
        raise DistilError(f"student.targets=logits regresses the teacher's logits, and student.peer={name} fits "
                          f"class ids only: use student.targets=teacher (its argmax), or a peer that regresses "
                          f"({', '.join(REGRESS_LOGITS)})")
