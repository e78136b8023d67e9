"""A student vocabulary trimmed to the tokens seen in its training data.

Tokens are the teacher's wordpiece ids for most students (words for the RNN baseline).
A 30k-row embedding updated densely dominates CPU training time; the student only
needs rows for tokens it can see. Unseen tokens at test time map to [UNK].
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path

import numpy as np

from distil.data.ragged import Ragged, RaggedPair, Tokens

PAD, UNK = 0, 1


class TrimmedVocab:
    def __init__(self, teacher_ids: Sequence[Hashable]):
        self.teacher_ids = list(teacher_ids)  # student id i+2 <-> teacher id (or word) teacher_ids[i]
        self._index = {tid: i + 2 for i, tid in enumerate(self.teacher_ids)}

    @classmethod
    def from_sequences(cls, sequences: Iterable[Sequence[int]]) -> TrimmedVocab:
        return cls(sorted({tid for seq in sequences for tid in seq}))

    @classmethod
    def from_tokens(cls, parts: Sequence[Tokens]) -> TrimmedVocab:
        """The teacher ids seen in these token columns (both sentences of a pair read apart)."""
        arrays = [ragged.values for part in parts
                  for ragged in ((part.first, part.second) if isinstance(part, RaggedPair) else (part,))]
        return cls(np.unique(np.concatenate(arrays)).tolist() if arrays else [])

    def map_tokens(self, tokens: Tokens) -> Tokens:
        """Teacher ids -> student ids for a whole column at once; unseen ids become UNK."""
        top = max(self.teacher_ids, default=-1) + 1
        table = np.full(top, UNK, dtype=np.int32)
        table[np.asarray(self.teacher_ids, dtype=np.int64)] = np.arange(2, len(self.teacher_ids) + 2)
        return tokens.map_values(table, UNK)

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
