"""One prepared split: examples tokenised once with the teacher's tokenizer, passed to every step.

Fine-tuning, caching, student training and evaluation all read the same `PreparedSplit`;
the task that made it (distil/tasks) decides what its labels and extra columns hold.
"""

from __future__ import annotations

from dataclasses import dataclass

import datasets
import numpy as np
import torch

from distil.data.ragged import Ragged, RaggedPair


@dataclass
class PreparedSplit:
    name: str  # labeled | transfer | dev | test
    examples: datasets.Dataset  # canonical columns (text / text_pair / tokens, labels, language)
    ids: Ragged  # the teacher's wordpieces; a pair joint: [CLS] a [SEP] b [SEP]
    # gold labels: [N] class ids (NO_LABEL where none), [N] floats (NaN where none) for
    # regression, or per wordpiece for tagging (IGNORE at special tokens)
    labels: torch.Tensor | Ragged
    pair: RaggedPair | None = None  # pairs only: [CLS] a [SEP] and [CLS] b [SEP], for siamese students
    word_starts: Ragged | None = None  # tagging only: per word, its first wordpiece (-1: truncated away)
    cut: int = 0  # examples cut by words before tokenisation (data/cut.py: tagging's overlong sentences)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def languages(self) -> np.ndarray:
        return np.asarray(self.examples["language"][:])

    def select(self, rows: list[int]) -> PreparedSplit:
        def pick(values):
            if values is None:
                return None
            return values[torch.as_tensor(rows, dtype=torch.long)] if isinstance(values, torch.Tensor) \
                else values.select(rows)
        return PreparedSplit(self.name, self.examples.select(rows), self.ids.select(rows), pick(self.labels),
                             pick(self.pair), pick(self.word_starts))

    def language(self, lang: str) -> PreparedSplit:
        return self.select([i for i, v in enumerate(self.languages) if v == lang])
