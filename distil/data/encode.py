"""Wordpiece-encode a split with the teacher's tokenizer (students read the same ids).

classification: [CLS] text [SEP]
pair:           [CLS] text [SEP] text_pair [SEP]   (the dataset keeps the two texts apart)
tagging:        [CLS] w1 ##w1 w2 [SEP] with one label per wordpiece, XtremeDistil style:
                a word's first piece carries its IOB2 tag, continuations carry 'X', and
                special tokens carry IGNORE (no loss, no metric).
"""

from __future__ import annotations

from dataclasses import dataclass

import datasets

from distil.data.split import NO_LABEL

IGNORE = -100  # special tokens: never trained on, never scored
X_TAG = "X"


@dataclass
class Encoded:
    ids: list[list[int]]
    token_labels: list[list[int]] | None = None  # tagging only
    # tagging only: per word, the position of its first wordpiece, or -1 when truncated away
    word_starts: list[list[int]] | None = None
    # pair only: the two sentences encoded apart, [CLS] a [SEP] and [CLS] b [SEP] (siamese students)
    pair_ids: list[tuple[list[int], list[int]]] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def select(self, rows: list[int]) -> Encoded:
        def pick(values):
            return None if values is None else [values[i] for i in rows]
        return Encoded(pick(self.ids), pick(self.token_labels), pick(self.word_starts), pick(self.pair_ids))


def model_labels(task: str, label_names: list[str]) -> list[str]:
    """The labels a model predicts: tagging adds 'X' for wordpiece continuations."""
    return [*label_names, X_TAG] if task == "tagging" else list(label_names)


def encode(task: str, tokenizer, ds: datasets.Dataset, max_length: int, x_label: int | None = None) -> Encoded:
    if len(ds) == 0:
        tagging, pair = task == "tagging", task == "pair"
        return Encoded([], [] if tagging else None, [] if tagging else None, [] if pair else None)
    if task == "tagging":
        return _encode_tagging(tokenizer, ds, max_length, x_label)

    def tokenize(batch):
        pair = batch["text_pair"] if task == "pair" else None
        joint = {"input_ids": tokenizer(batch["text"], pair, truncation=True, max_length=max_length)["input_ids"]}
        if task == "pair":
            joint["ids_a"] = tokenizer(batch["text"], truncation=True, max_length=max_length)["input_ids"]
            joint["ids_b"] = tokenizer(batch["text_pair"], truncation=True, max_length=max_length)["input_ids"]
        return joint

    encoded = ds.map(tokenize, batched=True, batch_size=1000, remove_columns=ds.column_names)
    if task == "pair":
        return Encoded(list(encoded["input_ids"]),
                       pair_ids=list(zip(encoded["ids_a"], encoded["ids_b"], strict=True)))
    return Encoded(list(encoded["input_ids"]))


def _encode_tagging(tokenizer, ds: datasets.Dataset, max_length: int, x_label: int) -> Encoded:
    def tokenize(batch):
        enc = tokenizer(batch["tokens"], is_split_into_words=True, truncation=True, max_length=max_length)
        labels, starts = [], []
        for i, tags in enumerate(batch["tags"]):
            row_labels, row_starts, previous = [], [-1] * len(tags), None
            for position, word in enumerate(enc.word_ids(i)):
                if word is None:
                    row_labels.append(IGNORE)
                elif word != previous:
                    row_labels.append(tags[word])
                    row_starts[word] = position
                else:  # a continuation: 'X' where the sentence is labeled
                    row_labels.append(x_label if tags[word] != NO_LABEL else NO_LABEL)
                previous = word
            labels.append(row_labels)
            starts.append(row_starts)
        return {"input_ids": enc["input_ids"], "token_labels": labels, "word_starts": starts}

    encoded = ds.map(tokenize, batched=True, batch_size=1000, remove_columns=ds.column_names)
    return Encoded(list(encoded["input_ids"]), list(encoded["token_labels"]), list(encoded["word_starts"]))
