"""Variable-length integer sequences in two flat arrays: 4 bytes a token, not a Python list each.

A transfer set of millions of sentences held as lists of Python ints costs ~30x the memory
of the ids themselves; `Ragged` keeps one int32 array of every value and one offsets array.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import torch

from distil.data.batching import pad


class Ragged:
    def __init__(self, values: np.ndarray, offsets: np.ndarray):
        self.values = values  # [total] every sequence, one after another
        self.offsets = offsets  # [N + 1] sequence i is values[offsets[i]:offsets[i + 1]]

    @classmethod
    def from_lists(cls, sequences: Iterable[Sequence[int]], dtype=np.int32) -> Ragged:
        sequences = list(sequences)
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=len(sequences))
        offsets = np.zeros(len(sequences) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter((v for s in sequences for v in s), dtype=dtype, count=int(offsets[-1]))
        return cls(values, offsets)

    @classmethod
    def concat(cls, parts: Sequence[Ragged]) -> Ragged:
        values = np.concatenate([p.values for p in parts]) if parts else np.zeros(0, np.int32)
        offsets, start = [np.zeros(1, np.int64)], 0
        for part in parts:
            offsets.append(part.offsets[1:] + start)
            start += int(part.offsets[-1])
        return cls(values, np.concatenate(offsets))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, row: int) -> np.ndarray:
        return self.values[self.offsets[row] : self.offsets[row + 1]]

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def tolist(self) -> list[list[int]]:
        return [self[i].tolist() for i in range(len(self))]

    def select(self, rows: Sequence[int]) -> Ragged:
        return Ragged.from_lists((self[i] for i in rows), dtype=self.values.dtype)

    def map_values(self, table: np.ndarray, missing: int) -> Ragged:
        """Every value v replaced by table[v] (`missing` where v is beyond the table)."""
        if len(table) == 0:
            return Ragged(np.full_like(self.values, missing, dtype=np.int32), self.offsets)
        inside = self.values < len(table)
        mapped = np.where(inside, table[np.minimum(self.values, len(table) - 1)], missing)
        return Ragged(mapped.astype(np.int32), self.offsets)

    def pad(self, rows: Sequence[int], pad_id: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """(ids [B, longest], attention mask) for these rows, right-padded."""
        return pad([self[row] for row in rows], pad_id)


class RaggedPair:
    """A pair read apart (siamese students): the two sentences as two Ragged columns."""

    def __init__(self, first: Ragged, second: Ragged):
        self.first, self.second = first, second

    def __len__(self) -> int:
        return len(self.first)

    def __getitem__(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        return self.first[row], self.second[row]

    def lengths(self) -> np.ndarray:
        return np.maximum(self.first.lengths(), self.second.lengths())

    def select(self, rows: Sequence[int]) -> RaggedPair:
        return RaggedPair(self.first.select(rows), self.second.select(rows))

    def map_values(self, table: np.ndarray, missing: int) -> RaggedPair:
        return RaggedPair(self.first.map_values(table, missing), self.second.map_values(table, missing))

    def pad(self, rows: Sequence[int], pad_id: int = 0) -> tuple[torch.Tensor, ...]:
        return (*self.first.pad(rows, pad_id), *self.second.pad(rows, pad_id))

    @classmethod
    def concat(cls, parts: Sequence[RaggedPair]) -> RaggedPair:
        return cls(Ragged.concat([p.first for p in parts]), Ragged.concat([p.second for p in parts]))


Tokens = Ragged | RaggedPair  # what a student reads: one sequence per example, or a pair apart
