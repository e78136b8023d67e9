"""IOB2 tagging (NER), XtremeDistil style, over the teacher's wordpieces.

[CLS] w1 ##w1 w2 [SEP]: a word's first wordpiece carries its tag, continuations carry 'X'
(never scored), special tokens carry IGNORE (no loss, no metric). Scores are seqeval span F1
per language, with the mean and standard deviation over languages.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import datasets
import numpy as np
import torch
from transformers import AutoModelForTokenClassification

from distil.data.batching import pad_labels
from distil.data.cut import cut_words
from distil.data.prepared import PreparedSplit
from distil.data.ragged import Ragged
from distil.errors import DistilError
from distil.tasks.base import NO_LABEL, Task

IGNORE = -100  # special tokens: never trained on, never scored
X_TAG = "X"


class TaggingTask(Task):
    name = "tagging"
    inputs = "tokens"
    metric = "f1"  # seqeval span F1, mean over languages (XtremeDistil)
    metrics = ("f1",)
    available_metrics = ("f1",)
    label_column = "tags"
    per_token = True
    has_classes = False
    teacher_class = AutoModelForTokenClassification

    def source_columns(self, dataset_cfg) -> dict[str, str]:
        return {"tokens_column": "tokens", "tags_column": "tags"}

    def cast_source_labels(self, ds: datasets.Dataset, where: str, column: str) -> datasets.Dataset:
        return ds.cast_column("tags", datasets.Sequence(datasets.Value("string")))

    def label_names(self, train, configured) -> list[str]:
        return list(configured) if configured else sorted({t for tags in train["tags"][:] for t in tags})

    def encode_labels(self, ds: datasets.Dataset, names: list[str], where: str) -> datasets.Dataset:
        index = {name: i for i, name in enumerate(names)}
        unknown = sorted({t for tags in ds["tags"][:] for t in tags} - set(index))
        if unknown:
            raise DistilError(f"{where} has tags {unknown[:5]} outside the tag set {names}; "
                              f"fix the data or list every tag in dataset.labels")
        features = ds.features.copy()
        features["tags"] = datasets.Sequence(datasets.Value("int64"))
        return ds.map(lambda row: {"tags": [index[t] for t in row["tags"]]}, features=features)

    def drop_labels(self, ds: datasets.Dataset) -> datasets.Dataset:
        return ds.map(lambda row: {"tags": [NO_LABEL] * len(row["tags"])})

    label_summary_title = "entity type"
    label_summary_heading = "entity spans per type"

    def label_summary(self, ds: datasets.Dataset, names: list[str]) -> dict[str, float]:
        return dict(Counter(names[t][2:] for tags in ds["tags"][:] for t in tags if names[t].startswith("B-")))

    def output_names(self, names: list[str]) -> list[str]:
        return [*names, X_TAG]

    def strata(self) -> str:
        return "language"

    def has_gold(self, labels: torch.Tensor) -> torch.Tensor:
        return labels >= 0

    def batch_labels(self, split: PreparedSplit, rows, width: int) -> torch.Tensor:
        """[B, width] wordpiece labels, IGNORE at padding."""
        return pad_labels([split.labels[i] for i in rows], width, fill=IGNORE)

    def prepare(self, name, tokenizer, ds, max_length, names) -> PreparedSplit:
        x_label = len(names)
        if len(ds) == 0:
            empty = Ragged.from_lists([])
            return PreparedSplit(name, ds, empty, empty, word_starts=empty)

        def tokenize(batch):
            # a sentence is cut by words to what the model can read before its tokenizer sees it (data/cut.py):
            # the tokenizer would tokenise all of a sentence of a million words before it truncates. Its tags
            # stay whole: a word past the cut has no wordpiece (-1), and is scored as 'O' as a truncated word is
            words = [cut_words(tokens, max_length) for tokens in batch["tokens"]]
            enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
            labels, starts = [], []
            for i, tags in enumerate(batch["tags"]):
                row_labels, row_starts = align(enc.word_ids(i), tags, x_label)
                labels.append(row_labels)
                starts.append(row_starts)
            return {"input_ids": enc["input_ids"], "token_labels": labels, "word_starts": starts,
                    "cut": [kept is not tokens for kept, tokens in zip(words, batch["tokens"], strict=True)]}

        encoded = ds.map(tokenize, batched=True, batch_size=1000, remove_columns=ds.column_names)
        return PreparedSplit(name, ds, Ragged.from_lists(encoded["input_ids"]),
                             Ragged.from_lists(encoded["token_labels"]),
                             word_starts=Ragged.from_lists(encoded["word_starts"]), cut=sum(encoded["cut"][:]))

    def encode_text(self, tokenizer, text, max_length, apart):
        words = text.split()
        enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
        return enc["input_ids"], (words, enc.word_ids())

    def teacher_loss(self, logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), ignore_index=IGNORE)

    def hidden_positions(self, split: PreparedSplit, row: int) -> np.ndarray:
        """Each word's first wordpiece: the only positions the representation losses compare."""
        starts = split.word_starts[row]
        return starts[starts >= 0].astype(np.int64)

    def score(self, logits, split: PreparedSplit, names: list[str]) -> dict:
        predicted = []
        for row in range(len(split)):
            best = logits[row].argmax(dim=-1).tolist()
            # a truncated word (position -1) and an 'X' at a first wordpiece count as 'O'
            predicted.append(valid_iob([names[best[p]] if p >= 0 and best[p] < len(names) else "O"
                                        for p in split.word_starts[row]]))
        return self.span_scores(predicted, split, names)

    def span_scores(self, predicted: list[list[str]], split: PreparedSplit, names: list[str]) -> dict:
        """seqeval span F1 of predicted word tags, per language, with the mean and spread over languages."""
        gold_by_language, predicted_by_language = defaultdict(list), defaultdict(list)
        for tags, words, language in zip(split.examples["tags"][:], predicted, split.languages, strict=True):
            gold_by_language[language].append([names[t] for t in tags])
            predicted_by_language[language].append(words)
        from seqeval.metrics import f1_score  # here: it imports scikit-learn, ~1 s a process that tags nothing
        # str(): the split's languages are numpy strings, which a weights-only checkpoint load refuses
        per_language = {str(lang): float(f1_score(gold_by_language[lang], predicted_by_language[lang]))
                        for lang in sorted(gold_by_language)}
        scores = list(per_language.values())
        result = {"f1": float(np.mean(scores)), "f1_std": float(np.std(scores))}
        if len(per_language) > 1:
            result["per_language"] = per_language
        return result

    def floors(self, labeled: PreparedSplit, dev: PreparedSplit, splits: dict[str, PreparedSplit],
               names: list[str]) -> dict:
        """All `O` (no entity at all), and a word-lookup tagger: each word's most frequent tag in the
        labeled set, `O` for a word it never saw. A teacher below the lookup has learned less than a
        dictionary of its own training sentences."""
        lookup = word_lookup(labeled.examples["tokens"][:], labeled.examples["tags"][:], names)

        def tagged(split: PreparedSplit, tag) -> list[list[str]]:
            return [valid_iob([tag(word) for word in words]) for words in split.examples["tokens"][:]]

        return {"all_O": {name: self.span_scores(tagged(split, lambda _: "O"), split, names)
                          for name, split in splits.items()},
                "word_lookup": {"words": len(lookup),
                                **{name: self.span_scores(tagged(split, lambda w: lookup.get(w, "O")), split, names)
                                   for name, split in splits.items()}}}

    def prediction(self, logits: torch.Tensor, context, names: list[str]) -> list[str]:
        """A tag per word of the text (text.split()), read at its first wordpiece; a word cut off by
        max_length is 'O', as `score` counts it, and so is a wordpiece's 'X'."""
        best = logits.argmax(-1).tolist()
        tags = [names[best[position]] if position is not None else "O" for position in word_positions(context)]
        return valid_iob(["O" if tag == X_TAG else tag for tag in tags])

    def probabilities(self, logits: torch.Tensor, context) -> np.ndarray:
        """[words, outputs]: each word's softmax at its first wordpiece."""
        return self.word_rows(super().probabilities(logits, context), context)

    def word_rows(self, rows: np.ndarray, context) -> np.ndarray:
        """[wordpieces, ...] -> [words, ...]: each word's row at its first wordpiece, NaN for a word cut
        off by max_length."""
        words = np.full((len(context[0]), *rows.shape[1:]), np.nan, dtype=rows.dtype)
        for word, position in enumerate(word_positions(context)):
            if position is not None:
                words[word] = rows[position]
        return words

    def decode(self, logits: torch.Tensor, context, names: list[str]) -> str:
        """Each word as word/TAG."""
        words, _ = context
        return " ".join(f"{word}/{tag}" for word, tag in zip(words, self.prediction(logits, context, names),
                                                                  strict=True))


def valid_iob(tags: list[str]) -> list[str]:
    """The tags made valid IOB2: an `I-T` that continues no `T` span (after `O`, at the start, after
    another type) becomes `B-T`. Repaired rather than counted: seqeval's default (conlleval) mode
    already reads such an `I-T` as the start of a span, so no score changes, and what `distil predict`
    prints is then valid IOB2 that strict readers (seqeval's IOB2 mode, spaCy) accept."""
    valid, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]
        valid.append(tag)
        previous = tag
    return valid


def word_lookup(sentences, tag_ids, names: list[str]) -> dict[str, str]:
    """Each word's most frequent gold tag in these labeled sentences (ties: the tag seen first); an
    `I-T` looked up after no `T` becomes `B-T` in valid_iob, as a model's would."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for words, tags in zip(sentences, tag_ids, strict=True):
        for word, tag in zip(words, tags, strict=True):
            if tag >= 0:
                counts[word][names[tag]] += 1
    return {word: tags.most_common(1)[0][0] for word, tags in counts.items()}


def word_positions(context) -> list[int | None]:
    """Each word's first wordpiece position (encode_text's context: the words and each wordpiece's
    word), None for a word the tokenizer cut off."""
    words, word_ids = context
    first: dict[int, int] = {}
    for position, word in enumerate(word_ids):
        if word is not None:
            first.setdefault(word, position)
    return [first.get(word) for word in range(len(words))]


def align(word_ids: list[int | None], tags: list[int], x_label: int) -> tuple[list[int], list[int]]:
    """Per wordpiece labels and per word first-piece positions for one tokenised sentence."""
    labels, starts, previous = [], [-1] * len(tags), None
    for position, word in enumerate(word_ids):
        if word is None:
            labels.append(IGNORE)
        elif word != previous:
            labels.append(tags[word])
            starts[word] = position
        else:  # a continuation: 'X' where the sentence is labeled
            labels.append(x_label if tags[word] != NO_LABEL else NO_LABEL)
        previous = word
    return labels, starts
