"""Encoding shared by the tasks that read whole texts: one text, or a pair of texts.

classification: [CLS] text [SEP]
pair:           [CLS] text [SEP] text_pair [SEP], and each text alone for siamese students
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import datasets
import torch

from distil.data.cut import cut_all, cut_for_tokenizer
from distil.data.prepared import PreparedSplit
from distil.data.ragged import Ragged, RaggedPair

PAIR_SEPARATOR = "|||"  # how a user writes a pair for distil-predict


def prepare_texts(name: str, tokenizer, ds: datasets.Dataset, max_length: int, pair: bool,
                  labels: torch.Tensor) -> PreparedSplit:
    if len(ds) == 0:
        empty = Ragged.from_lists([])
        return PreparedSplit(name, ds, empty, labels, RaggedPair(empty, empty) if pair else None)

    def tokenize(batch):
        first = cut_all(batch["text"], max_length)  # a long text is cut by characters first (data/cut.py)
        second = cut_all(batch["text_pair"], max_length) if pair else None
        out = {"input_ids": tokenizer(first, second, truncation=True, max_length=max_length)["input_ids"]}
        if pair:
            out["ids_a"] = tokenizer(first, truncation=True, max_length=max_length)["input_ids"]
            out["ids_b"] = tokenizer(second, truncation=True, max_length=max_length)["input_ids"]
        return out

    encoded = ds.map(tokenize, batched=True, batch_size=1000, remove_columns=ds.column_names)
    apart = RaggedPair(Ragged.from_lists(encoded["ids_a"]), Ragged.from_lists(encoded["ids_b"])) if pair else None
    return PreparedSplit(name, ds, Ragged.from_lists(encoded["input_ids"]), labels, apart)


def encode_user_text(tokenizer, text: str, max_length: int, pair: bool, apart: bool):
    """A text typed by a user ('first ||| second' for a pair), encoded as the student reads it."""
    if not pair:  # a text that holds '|||' is one text, read whole as encode_user_texts reads it
        return tokenizer(cut_for_tokenizer(text, max_length), truncation=True, max_length=max_length)["input_ids"], None
    first, _, second = (cut_for_tokenizer(part.strip(), max_length) for part in text.partition(PAIR_SEPARATOR))
    if apart:
        return tuple(tokenizer(part, truncation=True, max_length=max_length)["input_ids"]
                     for part in (first, second)), None
    return tokenizer(first, second, truncation=True, max_length=max_length)["input_ids"], None


def split_pairs(texts: list[str]) -> tuple[list[str], list[str]]:
    """'first ||| second' texts -> (the first sentences, the second sentences), each stripped."""
    split = [[part.strip() for part in text.partition(PAIR_SEPARATOR)[::2]] for text in texts]
    return [a for a, _ in split], [b for _, b in split]


def words_of(text: str, max_length: int) -> list[str]:
    """What a word-level student reads (student.tokens=words): lower-cased whitespace words, as
    many as the teacher reads wordpieces at most; in training and in serving alike."""
    return cut_for_tokenizer(text, max_length).lower().split()[:max_length]


def wordpiece_encoder(tokenizer, max_length: int) -> Callable[[list[str]], list[list[int]]]:
    """texts -> their wordpiece ids as tokenizer(texts, truncation=True, max_length=...) gives them
    (special tokens included), from the Rust tokenizer directly when there is one: without the
    transformers wrapper's per-call work and without the character offsets nobody reads (serving a
    static student, where tokenising is most of the time)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return lambda texts: tokenizer(cut_all(texts, max_length), truncation=True, max_length=max_length)["input_ids"]
    backend = copy.deepcopy(backend)  # the loaded tokenizer's own settings stay as they were
    backend.no_padding()
    backend.enable_truncation(max_length)
    return lambda texts: [encoding.ids for encoding in backend.encode_batch_fast(cut_all(texts, max_length))]


def encode_user_texts(tokenizer, texts: list[str], max_length: int, pair: bool, apart: bool) -> list:
    """encode_user_text for many texts with one batched tokenizer call (serving a batch)."""
    if not pair:
        return tokenizer(cut_all(texts, max_length), truncation=True, max_length=max_length)["input_ids"]
    firsts, seconds = (cut_all(column, max_length) for column in split_pairs(texts))
    if apart:
        encoded = [tokenizer(part, truncation=True, max_length=max_length)["input_ids"] for part in (firsts, seconds)]
        return list(zip(*encoded, strict=True))
    return tokenizer(firsts, seconds, truncation=True, max_length=max_length)["input_ids"]
