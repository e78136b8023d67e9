"""The pre-training corpus as wordpiece ids, and BERT's pre-training examples drawn from it."""

from __future__ import annotations

import hashlib
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from distil.data.check_file import text_lines
from distil.data.cut import cut_all
from distil.data.ragged import Ragged
from distil.errors import DistilError
from distil.pretrain.masking import mask_tokens

TOKENIZE_BATCH = 4096


def read_lines(setting: str, corpus: str, data_dir: str, limit: int | None) -> list[str]:
    """The first `limit` non-empty lines of the .txt or .gz file `corpus` (relative: under `data_dir`),
    in order. `setting` names the option that gave it (pretrain.corpus, agnostic.corpus) for the error."""
    path = Path(corpus) if Path(corpus).is_absolute() else Path(data_dir) / corpus
    if not path.is_file():
        raise DistilError(f"{setting}: {path} does not exist; give {setting}=<a text file with one sentence per "
                          f"line>, absolute or under paths.data_dir (now {data_dir!r}: run from the project "
                          f"directory or set paths.data_dir or DISTIL_DATA_DIR to the data directory)")
    lines: list[str] = []
    # a binary or non-UTF-8 corpus is one line naming the file, the line and the setting (as every reader)
    with closing(text_lines(path, setting, setting)) as handle:
        for line in handle:
            text = line.strip()
            if text:
                lines.append(text)
                if limit is not None and len(lines) >= limit:
                    break
    if not lines:
        raise DistilError(f"{setting}: {path} has no text; give a file with one sentence per line")
    return lines


def lines_digest(lines: list[str]) -> str:
    """What the corpus is, for the artifact key: its lines, in order."""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.encode())
        digest.update(b"\n")
    return digest.hexdigest()


def tokenize(tokenizer, lines: list[str], max_length: int) -> Ragged:
    """Each line's wordpiece ids, without special tokens, cut to `max_length` (a long line cut by
    characters first, data/cut.py: the tokenizer never sees more of it than it keeps)."""
    ids: list[list[int]] = []
    for start in range(0, len(lines), TOKENIZE_BATCH):
        batch = cut_all(lines[start:start + TOKENIZE_BATCH], max_length)
        encoded = tokenizer(batch, add_special_tokens=False, truncation=True, max_length=max_length)["input_ids"]
        ids.extend(encoded)
    return Ragged.from_lists(ids)


def unigram_loss(sentences: Ragged) -> float | None:
    """The masked-LM loss of a model that ignores the context and predicts the corpus's wordpiece
    frequencies at every chosen position: the cross-entropy of the unigram distribution with itself,
    i.e. its entropy -sum_w p(w) ln p(w) in nats, p(w) the share of wordpiece w among the corpus's
    wordpieces (special tokens excluded: they are never chosen). The examples draw their lines
    uniformly and every wordpiece of a line is equally likely to be chosen, so the chosen positions
    follow these frequencies (up to the few wordpieces a pair trims at max_length). A masked LM
    below this level has learned something from the context; at it, only the frequencies. None for
    a corpus without wordpieces."""
    if len(sentences.values) == 0:
        return None
    counts = np.bincount(sentences.values.astype(np.int64))
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


@dataclass
class Batch:
    input_ids: torch.Tensor       # [B, T] after masking
    attention_mask: torch.Tensor  # [B, T]
    token_type_ids: torch.Tensor  # [B, T]: 0 for [CLS] a [SEP], 1 for b [SEP]
    labels: torch.Tensor          # [B, T]: the original wordpiece at chosen positions, -100 elsewhere
    next_sentence_label: torch.Tensor | None  # [B]: 0 when b follows a in the corpus, 1 when random

    def select(self, rows: np.ndarray) -> Batch:
        """These rows of the batch (one process's part of a batch drawn whole on every process)."""
        index = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        return Batch(*(None if value is None else value[index] for value in
                       (self.input_ids, self.attention_mask, self.token_type_ids, self.labels,
                        self.next_sentence_label)))


class ExampleSampler:
    """BERT's pre-training examples (Devlin et al. 2018, Appendix A.1): [CLS] a [SEP] (b [SEP]),
    with b the line after a half of the time and a random line otherwise (next-sentence
    prediction), the pair cut to `max_length` by trimming the longer side, then masked."""

    def __init__(self, sentences: Ragged, tokenizer, max_length: int, nsp: bool, mask_prob: float,
                 mask_token_prob: float, random_token_prob: float):
        self.sentences, self.max_length, self.nsp = sentences, max_length, nsp
        self.cls, self.sep, self.pad = tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id
        self.mask_id, self.vocab_size = tokenizer.mask_token_id, len(tokenizer)
        self.probs = (mask_prob, mask_token_prob, random_token_prob)

    def pair(self, first: list[int], second: list[int] | None) -> tuple[list[int], list[int]]:
        """(ids, token types) of one example, cut to max_length."""
        room = self.max_length - (3 if second is not None else 2)
        first, second = list(first), list(second) if second is not None else None
        while len(first) + (len(second) if second is not None else 0) > room:
            if second is not None and len(second) > len(first):
                second.pop()
            else:
                first.pop()
        ids = [self.cls, *first, self.sep]
        types = [0] * len(ids)
        if second is not None:
            ids += [*second, self.sep]
            types += [1] * (len(second) + 1)
        return ids, types

    def batch(self, size: int, rng: np.random.Generator, generator: torch.Generator) -> Batch:
        """`size` examples whose first sentences are drawn uniformly from the corpus."""
        return self.batch_at(rng.integers(0, len(self.sentences), size=size), rng, generator)

    def batch_at(self, starts: np.ndarray, rng: np.random.Generator, generator: torch.Generator) -> Batch:
        """The examples whose first sentences are the lines `starts` (a held-out pass reads each line once)."""
        count, size = len(self.sentences), len(starts)
        examples, is_random = [], []
        for index in np.asarray(starts).tolist():
            second = None
            if self.nsp:
                random_next = bool(rng.random() < 0.5) or index + 1 >= count
                other = int(rng.integers(0, count)) if random_next else index + 1
                second = self.sentences[other]
                is_random.append(int(random_next))
            examples.append(self.pair(self.sentences[index], second))
        width = max(len(ids) for ids, _ in examples)
        ids = torch.full((size, width), self.pad, dtype=torch.long)
        types = torch.zeros((size, width), dtype=torch.long)
        mask = torch.zeros((size, width), dtype=torch.long)
        for row, (example, segment) in enumerate(examples):
            ids[row, :len(example)] = torch.tensor(example)
            types[row, :len(segment)] = torch.tensor(segment)
            mask[row, :len(example)] = 1
        maskable = (mask == 1) & (ids != self.cls) & (ids != self.sep)
        corrupted, labels = mask_tokens(ids, maskable, self.mask_id, self.vocab_size, generator, *self.probs)
        nsp = torch.tensor(is_random, dtype=torch.long) if self.nsp else None
        return Batch(corrupted, mask, types, labels, nsp)
