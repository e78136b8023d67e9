"""The augmented transfer set of a run: source texts -> POS tags (cached) -> synthetic examples (cached).

Both are content-keyed artifacts in the cache (`distil cache list` shows them):
  pos-tags/spacy-<hash>/tags.arrow          words, tags and spaces of every source text; the key is
                                            the texts, the spaCy pipeline and version, the attribute
  augmented/tang-<hash>/examples.arrow      the synthetic examples (text[, text_pair]); the key is the
                                            texts, every augment setting, the tags' key and the seed
Both are Arrow stream files written a batch at a time and read back memory-mapped
(`datasets.Dataset.from_file`): no full copy of the augmented set is held in memory, however large.
The augmented examples then join the transfer set, so the teacher's cached targets (keyed by the
transfer set's content) are keyed by the augmentation too, and its shards stream them as any other.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from distil.augment import pos
from distil.augment.tang import PosLexicon, Sentence, TangSettings, augment_example
from distil.common.progress import progress_bar
from distil.config.schema import AugmentConfig, DatasetConfig
from distil.data.load import read_text_lines, resolve_data_path
from distil.errors import DistilError, check_choice
from distil.store.artifacts import ArtifactStore
from distil.tasks import Task

log = logging.getLogger(__name__)

METHODS = ("none", "tang")
SOURCES = ("labeled", "transfer", "file")
DEDUPE = ("example", "all")
N_ITER = {"text": 20, "pair": 10}  # Tang: 20 on SST-2, 10 on MNLI and QQP (the pair sets)
TEXT_COLUMNS = {"text": ("text",), "pair": ("text", "text_pair")}
BATCH_ROWS = 4096  # rows per Arrow record batch written
SUBSET_SALT = 1  # the max_examples subset draws from its own stream: the examples do not depend on it

Augmenter = Callable[[datasets.Dataset, datasets.Dataset], datasets.Dataset]


def enabled(cfg: AugmentConfig) -> bool:
    return cfg.method != "none"


def check_augment(cfg: AugmentConfig, task: Task, dataset: DatasetConfig) -> None:
    """Every augment setting, before any data is read."""
    for key, value, allowed in (("method", cfg.method, METHODS), ("source", cfg.source, SOURCES),
                                ("dedupe", cfg.dedupe, DEDUPE), ("pos_attribute", cfg.pos_attribute, pos.ATTRIBUTES)):
        check_choice(f"augment.{key}", value, allowed)
    if not enabled(cfg):
        return
    if task.inputs not in TEXT_COLUMNS:
        raise DistilError(f"augment={cfg.name} rewrites sentences and sentence pairs; dataset '{dataset.name}' is a "
                          f"{task.name} task: use augment=none")
    if cfg.p_mask + cfg.p_pos > 1:
        raise DistilError(f"augment.p_mask + augment.p_pos = {cfg.p_mask + cfg.p_pos:g} is above 1 (they share one "
                          f"draw per word); lower one of them")
    if cfg.source == "file" and task.inputs == "pair":
        raise DistilError(f"augment.source=file reads one text per line, but dataset '{dataset.name}' has pairs; "
                          f"use augment.source=labeled or transfer")
    languages = dataset.languages or [dataset.language]
    if cfg.p_pos > 0 and languages != ["en"]:
        raise DistilError(f"augment.p_pos > 0 tags with spaCy's English pipeline, but dataset '{dataset.name}' is "
                          f"{', '.join(languages)}; set augment.p_pos=0 to augment with masking and n-gram sampling "
                          f"only")


def settings(cfg: AugmentConfig, mask_token: str) -> TangSettings:
    check_choice("augment.pos_replacement", cfg.pos_replacement, ("other", "any"))
    return TangSettings(cfg.p_mask, cfg.p_pos, cfg.p_ng, cfg.ngram_max, cfg.mask_token or mask_token,
                        replace_with_other=cfg.pos_replacement == "other")


def n_iter(cfg: AugmentConfig, task: Task) -> int:
    return cfg.n_iter if cfg.n_iter is not None else N_ITER[task.inputs]


def make_augmenter(cfg: AugmentConfig, task: Task, dataset: DatasetConfig, data_dir: str, store: ArtifactStore,
                   seed: int, mask_token: str | None) -> Augmenter | None:
    """`augment(labeled, transfer)` -> the augmented examples, with the transfer set's columns; None if off."""
    if not enabled(cfg):
        return None
    if cfg.p_mask > 0 and not (cfg.mask_token or mask_token):
        raise DistilError("augment.p_mask > 0 but the teacher's tokenizer has no mask token; set augment.mask_token "
                          "or augment.p_mask=0")
    chosen = settings(cfg, mask_token or "")

    def augment(labeled: datasets.Dataset, transfer: datasets.Dataset) -> datasets.Dataset:
        columns = TEXT_COLUMNS[task.inputs]
        source = {"labeled": labeled, "transfer": transfer}.get(cfg.source)
        sides = ([source[c][:] for c in columns] if source is not None
                 else [read_text_lines(source_file(cfg, dataset, data_dir))])
        examples = augmented_examples(cfg, chosen, n_iter(cfg, task), sides, store, seed)
        log.info("augment=%s: %d synthetic examples from %d %s examples", cfg.name, len(examples), len(sides[0]),
                 cfg.source)
        return with_columns_of(transfer, examples, task)

    return augment


def source_file(cfg: AugmentConfig, dataset: DatasetConfig, data_dir: str) -> Path:
    if cfg.file is not None:
        file = Path(cfg.file) if Path(cfg.file).is_absolute() else Path(data_dir) / cfg.file
    elif dataset.unlabeled_file and dataset.path:
        file = resolve_data_path(dataset.path, data_dir) / dataset.unlabeled_file
    else:
        raise DistilError(f"augment.source=file but augment.file is not set and dataset '{dataset.name}' has no "
                          f"unlabeled_file; set augment.file=<one text per line>")
    if not file.is_file():
        raise DistilError(f"augment: text file {file} not found; check augment.file and paths.data_dir")
    return file


def texts_digest(sides: list[list[str]]) -> str:
    digest = hashlib.sha256()
    for side in sides:
        digest.update(f"\x1e{len(side)}".encode())
        for text in side:
            digest.update(text.encode() + b"\x1f")
    return digest.hexdigest()


def augmented_examples(cfg: AugmentConfig, chosen: TangSettings, iterations: int, sides: list[list[str]],
                       store: ArtifactStore, seed: int) -> datasets.Dataset:
    """The synthetic examples (columns text[, text_pair]) of `sides` (one list of texts per side), cached."""
    digest = texts_digest(sides)
    tags = pos_tags(cfg, sides, digest, store) if cfg.p_pos > 0 else None
    spec = {"texts": digest, "settings": chosen.__dict__, "n_iter": iterations, "dedupe": cfg.dedupe,
            "max_examples": cfg.max_examples, "tags": tags.key if tags else "whitespace", "seed": seed,
            "format": 1}
    describe = {"method": cfg.method, "source": cfg.source, "source_examples": len(sides[0])}

    def sentences() -> Iterator[tuple[Sentence, ...]]:
        if tags is None:
            return zip(*[map(Sentence.whitespace, side) for side in sides], strict=True)
        return tagged_sentences(tags.path / TAGS_FILE, len(sides[0]), len(sides))

    def build(out: Path) -> dict:
        lexicon = PosLexicon(s for example in sentences() for s in example) if tags else None
        examples = generate(sentences(), len(sides[0]), iterations, chosen, lexicon, np.random.default_rng(seed),
                            cfg.dedupe)
        schema = text_schema(len(sides))
        written = write_batches(out / EXAMPLES_FILE, schema, examples,
                                lambda rows: {name: [r[k] for r in rows] for k, name in enumerate(schema.names)})
        if cfg.max_examples is not None and written > cfg.max_examples:
            written = keep_subset(out / EXAMPLES_FILE, cfg.max_examples, np.random.default_rng([seed, SUBSET_SALT]))
        return {"examples": written}

    artifact = store.get_or_build("augmented", cfg.method, spec, build, describe=describe)
    return datasets.Dataset.from_file(str(artifact.path / EXAMPLES_FILE))


TAGS_FILE, EXAMPLES_FILE = "tags.arrow", "examples.arrow"
TAG_SCHEMA = pa.schema([("words", pa.list_(pa.string())), ("tags", pa.list_(pa.string())),
                        ("spaces", pa.list_(pa.bool_()))])


def pos_tags(cfg: AugmentConfig, sides: list[list[str]], digest: str, store: ArtifactStore):
    """Every source text tagged once (both sides of a pair, one after the other), cached by content
    (`digest`: texts_digest(sides))."""
    spec = {"texts": digest, "pipeline": pos.pipeline_version(), "attribute": cfg.pos_attribute, "format": 1}
    texts = [text for side in sides for text in side]

    def build(out: Path) -> dict:
        nlp = pos.load_tagger()  # only when tagging: a cached run never loads it
        with progress_bar() as progress:
            bar = progress.add_task("POS-tagging the augmentation source", total=len(texts), status="")
            write_batches(out / TAGS_FILE, TAG_SCHEMA, pos.tag(texts, nlp, cfg.pos_attribute, cfg.tag_batch_size),
                          lambda rows: {"words": [r.words for r in rows], "tags": [r.tags for r in rows],
                                        "spaces": [r.spaces for r in rows]},
                          written=lambda n: progress.advance(bar, n))
        return {"texts": len(texts)}

    return store.get_or_build("pos-tags", "spacy", spec, build, describe={"texts": len(texts)})


def tagged_sentences(path: Path, examples: int, sides: int) -> Iterator[tuple[Sentence, ...]]:
    """Each example's tagged sentences, streamed (a pair's second sentences follow all the first ones)."""
    table = datasets.Dataset.from_file(str(path))

    def side(k: int) -> Iterator[Sentence]:
        for batch in table.select(range(k * examples, (k + 1) * examples)).iter(batch_size=BATCH_ROWS):
            yield from (Sentence(tuple(w), tuple(t), tuple(s))
                        for w, t, s in zip(batch["words"], batch["tags"], batch["spaces"], strict=True))

    return zip(*[side(k) for k in range(sides)], strict=True)


def generate(sentences, count: int, iterations: int, chosen: TangSettings, lexicon: PosLexicon | None,
             rng: np.random.Generator, dedupe: str) -> Iterator[tuple[str, ...]]:
    seen = set() if dedupe == "all" else None
    with progress_bar() as progress:
        bar = progress.add_task("augmenting the transfer set", total=count, status="")
        for example in sentences:
            yield from augment_example(example, iterations, chosen, lexicon, rng, seen)
            progress.advance(bar)


class arrow_writer:
    """`with arrow_writer(path, schema) as write: write({column: values})`: an Arrow stream file, written to
    a .partial name and renamed when complete."""

    def __init__(self, path: Path, schema: pa.Schema):
        self.path, self.partial, self.schema = path, path.with_suffix(".partial"), schema

    def __enter__(self):
        self.sink = pa.OSFile(str(self.partial), "wb")
        self.writer = pa.ipc.new_stream(self.sink, self.schema)
        return lambda columns: self.writer.write_batch(pa.record_batch(columns, schema=self.schema))

    def __exit__(self, kind, value, traceback):
        self.writer.close()
        self.sink.close()
        if kind is None:
            os.replace(self.partial, self.path)
        else:
            self.partial.unlink(missing_ok=True)


def text_schema(sides: int) -> pa.Schema:
    return pa.schema([(name, pa.string()) for name in TEXT_COLUMNS["pair" if sides == 2 else "text"]])


def write_batches(path: Path, schema: pa.Schema, rows: Iterable, columns: Callable[[list], dict],
                  written: Callable[[int], None] | None = None) -> int:
    """Stream `rows` into an Arrow file, BATCH_ROWS at a time (`columns(batch)` -> {column: values}); how
    many were written. `written(n)` is told after each batch (a progress bar)."""
    count, batch = 0, []
    with arrow_writer(path, schema) as write:
        for row in rows:
            batch.append(row)
            if len(batch) == BATCH_ROWS:
                write(columns(batch))
                count, batch = count + len(batch), []
                if written is not None:
                    written(BATCH_ROWS)
        write(columns(batch))  # the last, possibly empty, batch: an empty source still makes a readable file
    return count + len(batch)


def keep_subset(path: Path, size: int, rng: np.random.Generator) -> int:
    """Keep a seeded random `size` of the examples in `path`, in their order (streamed, not loaded)."""
    everything = datasets.Dataset.from_file(str(path))
    chosen = np.sort(rng.choice(len(everything), size=size, replace=False))
    subset = path.with_name("subset.arrow")
    schema = text_schema(len(everything.column_names))
    with arrow_writer(subset, schema) as write:
        for batch in everything.select(chosen).iter(batch_size=BATCH_ROWS):
            write({name: batch[name] for name in schema.names})
    del everything
    os.replace(subset, path)
    return size


def with_columns_of(transfer: datasets.Dataset, examples: datasets.Dataset, task: Task) -> datasets.Dataset:
    """The examples with the transfer set's other columns (no language, no label), in its column order."""
    filled = {"language": "", task.label_column: task.missing_label}
    extra = [name for name in transfer.column_names if name not in examples.column_names]
    unknown = [name for name in extra if name not in filled]
    if unknown:
        raise DistilError(f"augment: the transfer set has columns {unknown} the augmented examples cannot fill")
    constant = datasets.Dataset.from_dict({name: [filled[name]] * len(examples) for name in extra},
                                          features=datasets.Features({name: transfer.features[name] for name in extra}))
    joined = datasets.concatenate_datasets([examples, constant], axis=1)
    return joined.select_columns(transfer.column_names)

