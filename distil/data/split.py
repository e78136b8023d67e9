"""Derive the splits a distillation run needs: labeled, transfer (unlabeled), dev, test.

Test and dev come from the dataset's own files when it ships them; otherwise they
are carved from train, stratified by label (or by language for tagging), with
`dataset.split.seed` so every run shares one test set. The labeled subset (N per
class, or N sentences per language) and the transfer set are drawn with the run seed;
the transfer set is the rest of train with its labels dropped, or an external file.
Extra evaluation splits (files keys test_<name>, e.g. MNLI's test_mismatched) are kept as
shipped, capped like test, and only reported: nothing selects on them.

A dev or test example whose text (a pair: both texts; tagging: the tokens) also occurs in the
labeled or transfer set would score the student on what it trained on: such examples are counted
(TaskData.overlap, metrics.json data.overlap) and, with dataset.split.drop_eval_overlap (default),
their copies are dropped from the transfer set. Texts match exactly after collapsing whitespace,
case kept. The labeled set is only counted and warned about: it is the user's to choose.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

import datasets
import numpy as np

from distil.config.schema import DatasetConfig, TransferSizeConfig
from distil.data.load import is_extra_test, load_raw_splits, load_unlabeled_file
from distil.data.task import DataTask
from distil.errors import DistilError, check_choice

log = logging.getLogger(__name__)

SPLITS = ("labeled", "transfer", "dev", "test")
TEXT_COLUMNS = ("text", "text_pair", "tokens")  # what an example reads, per task (data/load.py)
OVERLAP_MATCH = "exact text after collapsing whitespace, case kept"
LABELED_DRAWS = ("random", "stratified")  # dataset.split.labeled_draw


@dataclass
class TaskData:
    name: str  # the dataset's own name (dataset.name), which labels runs and caches
    task: DataTask  # a distil.tasks.Task
    label_names: list[str]  # class names, IOB2 tag names for tagging, none for regression
    languages: list[str]  # [""] when the dataset is not multilingual
    # labeled/dev/test carry gold labels (tagging: `tags` as ids); transfer carries NO_LABEL
    splits: dict[str, datasets.Dataset]
    # per evaluation split, how many of its examples also occur in the labeled and transfer sets,
    # and how many transfer examples were dropped for it (see eval_overlap)
    overlap: dict = field(default_factory=dict)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def multilingual(self) -> bool:
        return self.languages != [""]

    def fingerprint(self, *names: str) -> str:
        """Content hash of the named splits: changes whenever their bytes change."""
        digest = hashlib.sha256(json.dumps([self.task.name, self.label_names]).encode())
        for name in names:
            ds = self.splits[name]
            digest.update(f"\x1e{name}:{len(ds)}".encode())
            for column in sorted(ds.column_names):
                digest.update(json.dumps(ds[column][:], ensure_ascii=False).encode())
        return digest.hexdigest()

    @property
    def extra_tests(self) -> list[str]:
        """Evaluation splits beside test, only reported (MNLI's test_mismatched)."""
        return [name for name in self.splits if is_extra_test(name)]

    def summary(self) -> dict[str, int]:
        return {name: len(ds) for name, ds in self.splits.items()}


def build_task_data(
    cfg: DatasetConfig, task: DataTask, transfer: TransferSizeConfig, data_dir: str, seed: int,
    hub_offline: bool = True,
    augment: Callable[[datasets.Dataset, datasets.Dataset], datasets.Dataset] | None = None,
) -> TaskData:
    """The four splits (and any extra test split); `augment(labeled, transfer)`, if given, returns
    synthetic examples added to the transfer set (distil/augment), before evaluation overlap is dropped."""
    raw = load_raw_splits(cfg, task, data_dir, hub_offline)
    label_names = task.label_names(raw["train"], cfg.labels)
    task.check_label_names(label_names, f"dataset '{cfg.name}'")
    languages = list(cfg.languages) if cfg.languages else [""]
    encoded = {name: task.encode_labels(ds, label_names, f"dataset '{cfg.name}': {name} split")
               for name, ds in raw.items()}

    check_two_classes(cfg, task, encoded["train"], label_names)
    strata = task.strata()  # by label, or by language where there are no classes
    train = encoded["train"]
    carve_rng = np.random.default_rng(cfg.split.seed)
    if "test" not in encoded:
        train, encoded["test"] = _stratified_split(train, strata, cfg.split.test_fraction, carve_rng)
    if "dev" not in encoded:
        train, encoded["dev"] = _stratified_split(train, strata, cfg.split.dev_fraction, carve_rng)

    extra_tests = [name for name in encoded if is_extra_test(name)]
    if cfg.split.max_eval_per_language is not None:
        for name in ("dev", "test", *extra_tests):
            encoded[name] = _cap_per_language(encoded[name], cfg.split.max_eval_per_language, carve_rng)

    run_rng = np.random.default_rng(seed)
    labeled, pool = _take_labeled(cfg, task, train, label_names, run_rng)
    if len(labeled) == 0:
        raise DistilError(f"dataset '{cfg.name}': no labeled training examples are left after carving dev and "
                          f"test from train; give a larger train file or lower dataset.split.test_fraction "
                          f"and dev_fraction")
    if transfer.source == "file":
        pool = load_unlabeled_file(cfg, task, data_dir)
    elif transfer.source != "pool":
        raise DistilError(f"transfer_size '{transfer.name}': unknown source '{transfer.source}'; "
                          f"use pool or file")
    transfer_set = task.drop_labels(_draw_transfer(pool, transfer, len(labeled), run_rng))
    if augment is not None:
        transfer_set = datasets.concatenate_datasets([transfer_set, augment(labeled, transfer_set)])
    evaluation = {name: encoded[name] for name in ("dev", "test", *extra_tests)}
    transfer_set, overlap = eval_overlap(evaluation, labeled, transfer_set, cfg.split.drop_eval_overlap)
    splits = {"labeled": labeled, "transfer": transfer_set, **evaluation}
    return TaskData(cfg.name, task, label_names, languages, splits, overlap)


def text_keys(ds: datasets.Dataset) -> list[tuple[str, ...]]:
    """Each example's texts with whitespace collapsed (case kept): what overlap compares."""
    columns = [ds[name][:] for name in TEXT_COLUMNS if name in ds.column_names]
    return [tuple(" ".join(v.split() if isinstance(v, str) else " ".join(v).split()) for v in values)
            for values in zip(*columns, strict=True)]


def eval_overlap(evaluation: dict[str, datasets.Dataset], labeled: datasets.Dataset, transfer: datasets.Dataset,
                 drop: bool) -> tuple[datasets.Dataset, dict]:
    """(transfer set without the evaluation texts if `drop`, the overlap counts)."""
    labeled_keys, transfer_keys = set(text_keys(labeled)), text_keys(transfer)
    transfer_set, held_out, overlap = set(transfer_keys), set(), {}
    for name, ds in evaluation.items():
        keys = text_keys(ds)
        held_out.update(keys)
        overlap[name] = {"labeled": sum(k in labeled_keys for k in keys),
                         "transfer": sum(k in transfer_set for k in keys)}
    dropped = [i for i, key in enumerate(transfer_keys) if key in held_out] if drop else []
    if dropped:
        dropped_set = set(dropped)
        transfer = transfer.select([i for i in range(len(transfer)) if i not in dropped_set])
        log.info("dropped %d transfer examples that are also dev or test examples", len(dropped))
    in_transfer = sum(counts["transfer"] for counts in overlap.values())
    if in_transfer and not drop:
        log.warning("%d dev/test examples are also in the transfer set (dataset.split.drop_eval_overlap=false)",
                    in_transfer)
    in_labeled = {name: counts["labeled"] for name, counts in overlap.items() if counts["labeled"]}
    if in_labeled:
        log.warning("examples also in the labeled set, so scored on what the student trained on: %s",
                    ", ".join(f"{n} {name}" for name, n in in_labeled.items()))
    overlap.update(transfer_dropped=len(dropped), match=OVERLAP_MATCH)
    return transfer, overlap


def _stratified_split(ds: datasets.Dataset, column: str, fraction: float, rng: np.random.Generator):
    """Split off `fraction` of every stratum; returns (rest, held_out)."""
    strata = np.asarray(ds[column][:])
    held = []
    for value in np.unique(strata):
        members = rng.permutation(np.flatnonzero(strata == value))
        held.extend(members[: max(1, round(fraction * len(members)))].tolist())
    held_set = set(held)
    rest = [i for i in range(len(ds)) if i not in held_set]
    return ds.select(rest), ds.select(sorted(held))


def _cap_per_language(ds: datasets.Dataset, cap: int, rng: np.random.Generator) -> datasets.Dataset:
    languages = np.asarray(ds["language"][:])
    keep = []
    for lang in np.unique(languages):
        members = np.flatnonzero(languages == lang)
        keep.extend(members if len(members) <= cap else rng.choice(members, size=cap, replace=False))
    return ds.select(sorted(int(i) for i in keep))


def check_two_classes(cfg: DatasetConfig, task: DataTask, train: datasets.Dataset, names: list[str]) -> None:
    """Training data of one class teaches nothing: the majority class is right every time, and a run
    would report a perfect student that learned nothing."""
    if not task.has_classes or len(train) == 0:
        return
    present = sorted(set(np.asarray(train["label"][:]).tolist()))
    if len(present) < 2:
        raise DistilError(f"dataset '{cfg.name}': every training example has the label '{names[present[0]]}': with "
                          f"one class there is nothing to learn; give training data with at least two classes")


def _take_labeled(cfg: DatasetConfig, task: DataTask, ds: datasets.Dataset, names: list[str],
                  rng: np.random.Generator):
    """(labeled, unlabeled pool): N per class, N per language, or everything labeled."""
    per_class, per_language = cfg.split.labeled_per_class, cfg.split.labeled_per_language
    if per_class is not None and not task.has_classes:
        raise DistilError(f"dataset '{cfg.name}': {task.name} data has no classes; use "
                          f"dataset.split.labeled_per_language instead of labeled_per_class")
    if cfg.split.labeled_count is not None:
        if cfg.split.labeled_count > len(ds):
            raise DistilError(f"dataset '{cfg.name}': labeled_count={cfg.split.labeled_count} is more than the "
                              f"{len(ds)} training examples; lower dataset.split.labeled_count")
        check_choice("dataset.split.labeled_draw", cfg.split.labeled_draw, LABELED_DRAWS)
        if cfg.split.labeled_draw == "stratified":
            if not task.has_classes:
                raise DistilError(f"dataset '{cfg.name}': labeled_draw=stratified keeps the class mix, but "
                                  f"{task.name} data has no classes; use dataset.split.labeled_draw=random")
            chosen = stratified_draw(np.asarray(ds["label"][:]), cfg.split.labeled_count, rng)
        else:
            chosen = rng.choice(len(ds), size=cfg.split.labeled_count, replace=False).tolist()
        chosen_set = set(chosen)
        return (ds.select(sorted(chosen_set)), ds.select([i for i in range(len(ds)) if i not in chosen_set]))
    if per_class is not None:
        column, size, groups = "label", per_class, {i: f"class '{n}'" for i, n in enumerate(names)}
    elif per_language is not None:
        langs = cfg.languages or [""]
        column, size, groups = "language", per_language, {lang: f"language '{lang or cfg.name}'" for lang in langs}
    else:
        return ds, ds.select([])
    values = np.asarray(ds[column][:])
    chosen = []
    for value, what in groups.items():
        members = np.flatnonzero(values == value)
        if len(members) < size:
            setting = "labeled_per_class" if column == "label" else "labeled_per_language"
            raise DistilError(
                f"dataset '{cfg.name}': {what} has {len(members)} training examples, fewer than "
                f"{setting}={size}; lower dataset.split.{setting}"
            )
        chosen.extend(rng.choice(members, size=size, replace=False).tolist())
    chosen_set = set(chosen)
    rest = [i for i in range(len(ds)) if i not in chosen_set]
    return ds.select(sorted(chosen)), ds.select(rest)


def stratified_draw(labels: np.ndarray, size: int, rng: np.random.Generator) -> list[int]:
    """`size` indices drawn class by class in proportion to each class's share of `labels`: each
    class gets the floor of its share, and the examples left over go to the largest remainders (ties
    to the lower class id), so the counts add up to `size` and follow the mix as closely as whole
    numbers can."""
    classes, counts = np.unique(labels, return_counts=True)
    shares = counts * size / len(labels)
    quotas = np.floor(shares).astype(int)
    for i in sorted(range(len(classes)), key=lambda i: (-(shares[i] - quotas[i]), i))[: size - quotas.sum()]:
        quotas[i] += 1
    chosen = []
    for value, quota in zip(classes, quotas, strict=True):
        chosen.extend(rng.choice(np.flatnonzero(labels == value), size=int(quota), replace=False).tolist())
    return chosen


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
