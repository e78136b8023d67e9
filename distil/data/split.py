"""Derive the splits a distillation run needs: labeled, transfer (unlabeled), dev, test.

Test and dev come from the dataset's own files when it ships them; otherwise they
are carved from train, stratified, with `dataset.split.seed` so every run shares one
test set. The labeled subset and the transfer set are drawn with the run seed.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import datasets
import numpy as np

from distil.config import DatasetConfig, TransferSizeConfig
from distil.data.load import load_raw_splits
from distil.errors import DistilError

SPLITS = ("labeled", "transfer", "dev", "test")


@dataclass
class TaskData:
    label_names: list[str]
    # labeled/dev/test: columns text, label (int); transfer: text, label = -1
    splits: dict[str, datasets.Dataset]

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    def fingerprint(self, *names: str) -> str:
        """Content hash of the named splits: changes whenever their bytes change."""
        digest = hashlib.sha256("\x1f".join(self.label_names).encode())
        for name in names:
            ds = self.splits[name]
            digest.update(f"\x1e{name}:{len(ds)}".encode())
            for text, label in zip(ds["text"], ds["label"], strict=True):
                digest.update(f"{label}\x1f{text}\x1e".encode())
        return digest.hexdigest()

    def summary(self) -> dict[str, int]:
        return {name: len(ds) for name, ds in self.splits.items()}


def build_task_data(
    cfg: DatasetConfig, transfer: TransferSizeConfig, data_dir: str, seed: int
) -> TaskData:
    raw = load_raw_splits(cfg, data_dir)
    label_names = list(cfg.labels) if cfg.labels else sorted(set(raw["train"]["label"]))
    encoded = {name: _encode_labels(cfg, name, ds, label_names) for name, ds in raw.items()}

    train = encoded["train"]
    carve_rng = np.random.default_rng(cfg.split.seed)
    if "test" not in encoded:
        train, encoded["test"] = _stratified_split(train, cfg.split.test_fraction, carve_rng)
    if "dev" not in encoded:
        train, encoded["dev"] = _stratified_split(train, cfg.split.dev_fraction, carve_rng)

    run_rng = np.random.default_rng(seed)
    if cfg.split.labeled_per_class is None:
        labeled, pool = train, train.select([])
    else:
        labeled, pool = _take_per_class(cfg, train, cfg.split.labeled_per_class, label_names, run_rng)
    transfer_set = _draw_transfer(pool, transfer, len(labeled), run_rng)
    transfer_set = transfer_set.map(lambda _: {"label": -1})
    return TaskData(
        label_names,
        {"labeled": labeled, "transfer": transfer_set, "dev": encoded["dev"], "test": encoded["test"]},
    )


def _encode_labels(cfg: DatasetConfig, split: str, ds: datasets.Dataset, names: list[str]):
    index = {name: i for i, name in enumerate(names)}
    unknown = sorted(set(ds["label"]) - set(index))
    if unknown:
        raise DistilError(
            f"dataset '{cfg.name}': {split} split has labels {unknown[:5]} outside the label set "
            f"{names}; fix the data or list every label in dataset.labels"
        )
    return ds.map(lambda row: {"label": index[row["label"]]}, features=_features())


def _features() -> datasets.Features:
    return datasets.Features({"text": datasets.Value("string"), "label": datasets.Value("int64")})


def _stratified_split(ds: datasets.Dataset, fraction: float, rng: np.random.Generator):
    """Split off `fraction` of every class; returns (rest, held_out)."""
    labels = np.asarray(ds["label"])
    held = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        held.extend(members[: max(1, round(fraction * len(members)))].tolist())
    held_set = set(held)
    rest = [i for i in range(len(ds)) if i not in held_set]
    return ds.select(rest), ds.select(sorted(held))


def _take_per_class(cfg, ds, per_class: int, names: list[str], rng: np.random.Generator):
    labels = np.asarray(ds["label"])
    chosen = []
    for label in range(len(names)):
        members = np.flatnonzero(labels == label)
        if len(members) < per_class:
            raise DistilError(
                f"dataset '{cfg.name}': class '{names[label]}' has {len(members)} training "
                f"examples, fewer than labeled_per_class={per_class}; lower dataset.split.labeled_per_class"
            )
        chosen.extend(rng.choice(members, size=per_class, replace=False).tolist())
    chosen_set = set(chosen)
    rest = [i for i in range(len(ds)) if i not in chosen_set]
    return ds.select(sorted(chosen)), ds.select(rest)


def _draw_transfer(pool, cfg: TransferSizeConfig, n_labeled: int, rng: np.random.Generator):
    if cfg.count is not None:
        wanted = cfg.count
    elif cfg.multiple is not None:
        wanted = round(cfg.multiple * n_labeled)
    else:
        return pool
    if wanted > len(pool):
        raise DistilError(
            f"transfer_size '{cfg.name}' asks for {wanted} unlabeled examples but the pool has "
            f"{len(pool)}; choose a smaller transfer_size"
        )
    return pool.select(sorted(rng.choice(len(pool), size=wanted, replace=False).tolist()))
