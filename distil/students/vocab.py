"""A student vocabulary trimmed to the tokens seen in its training data.

Tokens are the teacher's wordpiece ids for most students (words for the RNN baseline).
A 30k-row embedding updated densely dominates CPU training time; the student only
needs rows for tokens it can see. Unseen tokens at test time map to [UNK], which no
training token maps to: UnkDropout gives that row its training signal.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch

from distil.data.ragged import Ragged, RaggedPair, Tokens

PAD, UNK = 0, 1


class TrimmedVocab:
    def __init__(self, teacher_ids: Sequence[Hashable]):
        self.teacher_ids = list(teacher_ids)  # student id i+2 <-> teacher id (or word) teacher_ids[i]
        self._index = {tid: i + 2 for i, tid in enumerate(self.teacher_ids)}

    @property
    def index(self) -> dict[Hashable, int]:
        """Teacher id (or word) -> student id, for every kept one (read it, do not change it)."""
        return self._index

    @classmethod
    def whole(cls, size: int) -> TrimmedVocab:
        """Every teacher id 0..size-1, none trimmed (student.vocabulary=full, the SRA pre-training):
        student id = teacher id + 2."""
        return cls(range(size))

    @classmethod
    def from_sequences(cls, sequences: Iterable[Sequence[int]]) -> TrimmedVocab:
        return cls(sorted({tid for seq in sequences for tid in seq}))

    @classmethod
    def from_tokens(cls, parts: Sequence[Tokens]) -> TrimmedVocab:
        """The teacher ids seen in these token columns (both sentences of a pair read apart)."""
        arrays = [ragged.values for part in parts
                  for ragged in ((part.first, part.second) if isinstance(part, RaggedPair) else (part,))]
        return cls(np.unique(np.concatenate(arrays)).tolist() if arrays else [])

    @functools.cached_property
    def table(self) -> np.ndarray:
        """Teacher id -> student id, as an array indexed by teacher id (UNK where unseen); wordpiece
        vocabularies only (a word vocabulary's ids are strings)."""
        table = np.full(max(self.teacher_ids, default=-1) + 1, UNK, dtype=np.int64)
        table[np.asarray(self.teacher_ids, dtype=np.int64)] = np.arange(2, len(self.teacher_ids) + 2)
        return table

    def map_tokens(self, tokens: Tokens) -> Tokens:
        """Teacher ids -> student ids for a whole column at once; unseen ids become UNK."""
        return tokens.map_values(self.table, UNK)

    def map_words(self, sentences: Iterable[Sequence[str]]) -> Ragged:
        return Ragged.from_lists(self.map(words) for words in sentences)

    def __len__(self) -> int:
        return len(self.teacher_ids) + 2

    def map(self, sequence: Sequence[int]) -> list[int]:
        return [self._index.get(tid, UNK) for tid in sequence]

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"pad": PAD, "unk": UNK, "teacher_ids": self.teacher_ids}))

    @classmethod
    def load(cls, path: Path) -> TrimmedVocab:
        return cls(json.loads(path.read_text())["teacher_ids"])


def student_sep_id(vocab: TrimmedVocab, teacher_sep_id: int | None, reads_words: bool) -> int | None:
    """[SEP] in the student's vocabulary: where a Transformer student's second segment of a pair starts.
    None where the teacher's tokenizer has no [SEP] or the student reads words (no special tokens).
    Training and serving both take it from here, so a saved student reads a pair as it trained on it."""
    return None if teacher_sep_id is None or reads_words else vocab.map([teacher_sep_id])[0]


class UnkDropout:
    """Word dropout to [UNK], as a forward pre-hook on the student's token embedding: while the
    model trains, each id but [PAD] and `keep_ids` (e.g. [CLS], [SEP]) becomes [UNK] with
    probability `rate`. A hook, not a layer, so saved weights and evaluation are unchanged."""

    def __init__(self, rate: float, keep_ids: Sequence[int]):
        self.rate = rate
        self.keep_ids = torch.tensor(sorted({PAD, *keep_ids}), dtype=torch.long)

    def __call__(self, module: torch.nn.Module, args: tuple) -> tuple | None:
        if not module.training:
            return None
        ids = args[0]
        droppable = ~torch.isin(ids, self.keep_ids.to(ids.device))
        dropped = droppable & (torch.rand(ids.shape, device=ids.device) < self.rate)
        return (ids.masked_fill(dropped, UNK), *args[1:])
