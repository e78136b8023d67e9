"""The Python API of a saved student: `from distil import Student`.

    s = Student.load("outputs/runs/<date>/<time>")        # a run directory or its student/ folder
    s.predict(["a gripping, funny film"])                  # labels (a score for regression, tags per word)
    s.predict_proba(["a gripping, funny film"])            # softmax probabilities, in s.labels order
    s.encode(["a gripping, funny film"])                   # the representation, for students with one

A pair is a tuple (first, second), or "first ||| second" as `distil predict` takes it; a sentence to
tag is a string, or the list of its words. Texts go through the model `batch_size` at a time,
shortest first (less padding), and come back in the order given. Backends: "torch" (the saved
weights), "onnx" and "onnx-int8" (its export, `distil export RUN_DIR [--int8]`); every one reads the
inputs SavedStudent encodes and decodes through the task, so they differ only by the arithmetic of
the model. A schedule=d0 run serves a student per language (distil/serve/routing.py): `language=`
names one, else each text goes to the student whose vocabulary knows most of its tokens.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from distil.common.progress import progress_bar
from distil.errors import DistilError
from distil.serve.backends import make_backend
from distil.serve.routing import pick_language, student_folders
from distil.serve.student import SavedStudent
from distil.students import FAMILIES
from distil.students.vocab import UNK
from distil.tasks.text import PAIR_SEPARATOR

BATCH_SIZE = 64
PROGRESS_FROM = 2000  # texts: fewer take a second or two, and a bar would only flicker

Text = str | tuple[str, str]


@dataclass
class Prediction:
    """One text's prediction, as `distil predict` prints it."""

    text: str
    label: str | float | list[str]  # a label, a score (regression) or a tag per word (tagging)
    probabilities: np.ndarray | None  # over the student's labels (per word for tagging); None for a score
    line: str  # the task's own rendering (Task.decode): the prediction and its probability, or word/TAG
    language: str | None = None  # the student that served it, for a schedule=d0 run


class Student:
    """A saved student and the backend that runs it. Build it with `Student.load`."""

    def __init__(self, saved: SavedStudent, backend, language: str | None = None):
        self.saved, self.backend, self.language = saved, backend, language

    @staticmethod
    def load(path: str | Path, backend: str = "torch", language: str | None = None, device: str | None = None,
             threads: int | None = None) -> Student | RoutedStudent:
        """`path`: a run directory or a student folder. `backend`: torch, onnx or onnx-int8. `language`: a
        schedule=d0 run's student of that language (None: every one, routed text by text). `device`: where
        the torch backend serves (None: the CPU, or the active runtime's device). `threads`: onnxruntime's."""
        folders = pick_language(student_folders(Path(path)), language)
        students = {lang: Student(saved, make_backend(saved, folder, backend, threads), lang)
                    for lang, folder in folders.items()
                    for saved in [SavedStudent(folder, device)]}
        if len(students) == 1:
            return next(iter(students.values()))
        return RoutedStudent(students)

    @property
    def labels(self) -> list[str]:
        """What the model outputs, in the order of predict_proba's columns (["score"] for regression)."""
        return self.saved.labels

    @property
    def task(self) -> str:
        """classification, pair, regression or tagging."""
        return self.saved.task.name

    @property
    def inputs(self) -> str:
        """What a text is: "text", "pair" (two sentences) or "tokens" (words to tag)."""
        return self.saved.task.inputs

    def predict(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list:
        """A label per text; a score for regression; a tag per word (text.split()) for tagging."""
        task, labels = self.saved.task, self.labels
        return [task.prediction(logits, context, labels) for logits, context in self._rows(texts, batch_size)]

    def predict_proba(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list[np.ndarray]:
        """Per text its softmax over `labels` ([words, labels] for tagging, NaN rows for words cut off by
        the student's max_length); a regression student predicts no probabilities."""
        task = self.saved.task
        if not task.gives_probabilities:
            raise DistilError(f"this student predicts a {task.name} score, not class probabilities; use predict()")
        return [task.probabilities(logits, context) for logits, context in self._rows(texts, batch_size)]

    def predictions(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list[Prediction]:
        """Label, probabilities and the printed line of each text: what `distil predict` writes."""
        task, labels = self.saved.task, self.labels
        texts = as_texts(texts, task.inputs)
        return [Prediction(text, task.prediction(logits, context, labels),
                           task.probabilities(logits, context) if task.gives_probabilities else None,
                           task.decode(logits, context, labels), self.language)
                for text, (logits, context) in zip(texts, self._rows(texts, batch_size), strict=True)]

    def encode(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> np.ndarray | list[np.ndarray]:
        """The student's representation of each text: [texts, size] ([texts, 2, size] for a pair whose
        sentences it reads apart), or per text [words, size] for tagging. It is an SRA student's
        sentence vector (Wu et al.), or the representation head gelu(W h + b) at the teacher's hidden size
        that a schedule with a representation loss trained to approximate the teacher's layer."""
        self._check_representation()
        task, rows = self.saved.task, []
        for outputs, context in self._outputs(texts, batch_size, representation=True):
            if "representation" not in outputs:
                raise DistilError("this student's ONNX export has no representation output (an export from before "
                                  "distil exported it); export it again with `distil export RUN_DIR`, or use "
                                  "backend='torch'")
            row = outputs["representation"].numpy()
            rows.append(task.word_rows(row, context) if task.per_token else row)
        return rows if task.per_token else np.stack(rows) if rows else np.empty((0,))

    def _check_representation(self) -> None:
        config = self.saved.config
        kind = config["student"]["kind"]
        if not (config.get("representation_head") or getattr(FAMILIES.get(kind), "HAS_REPRESENTATION", False)):
            raise DistilError(f"student '{config['student']['name']}' has no representation to encode: it was "
                              f"trained without a representation loss; encode() needs an SRA student "
                              f"(student=sra) or a schedule that compares hidden states (e.g. schedule=d4.1)")

    def _rows(self, texts: Iterable[Text], batch_size: int) -> Iterator[tuple[torch.Tensor, object]]:
        """(logits, decode context) per text, in the order given."""
        for outputs, context in self._outputs(texts, batch_size):
            yield outputs["logits"], context

    def _outputs(self, texts: Iterable[Text], batch_size: int, representation: bool = False) -> list[tuple]:
        """(the model's outputs, decode context) per text, in the order given, whatever order they ran in."""
        texts = as_texts(texts, self.saved.task.inputs)
        if batch_size < 1:
            raise DistilError(f"batch_size {batch_size} must be at least 1")
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths pad less
        results: list = [None] * len(texts)
        with progress_bar() if len(texts) >= PROGRESS_FROM else nullcontext() as progress:
            bar = progress.add_task("predicting", total=len(texts), status="") if progress else None
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                inputs, contexts = self.backend.encode([texts[i] for i in rows], representation)
                outputs = self.backend.outputs(inputs, representation)
                for position, row in enumerate(rows):
                    results[row] = ({name: value[position] for name, value in outputs.items()}, contexts[position])
                if progress:
                    progress.advance(bar, len(rows))
        return results


class RoutedStudent:
    """A schedule=d0 run's students, one per language, each text served by one of them: the one whose
    vocabulary knows most of the text's tokens (ties: the first language)."""

    def __init__(self, students: dict[str, Student]):
        self.students = students
        first = next(iter(students.values()))
        vocabularies = {tuple(student.saved.vocab.teacher_ids) for student in students.values()}
        if len(vocabularies) == 1:
            raise DistilError(f"the students of languages {', '.join(students)} share one vocabulary, so a "
                              f"text's language cannot be told from its tokens; name one with --language "
                              f"(language= in Python)")
        self.labels, self.task, self.inputs = first.labels, first.task, first.inputs
        self.per_word = first.saved.task.per_token  # encode gives an array per text, not one for all

    @property
    def languages(self) -> list[str]:
        return list(self.students)

    def route(self, texts: Iterable[Text]) -> list[str]:
        """The language whose student serves each text."""
        texts = as_texts(texts, self.inputs)
        known = np.stack([known_tokens(student.saved, texts) for student in self.students.values()])
        return [self.languages[index] for index in known.argmax(axis=0)]

    def predict(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list:
        return self._routed(texts, lambda student, part: student.predict(part, batch_size))

    def predict_proba(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list[np.ndarray]:
        return self._routed(texts, lambda student, part: student.predict_proba(part, batch_size))

    def predictions(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> list[Prediction]:
        return self._routed(texts, lambda student, part: student.predictions(part, batch_size))

    def encode(self, texts: Iterable[Text], batch_size: int = BATCH_SIZE) -> np.ndarray | list[np.ndarray]:
        encoded = self._routed(texts, lambda student, part: list(student.encode(part, batch_size)))
        return encoded if self.per_word or not encoded else np.stack(encoded)

    def _routed(self, texts: Iterable[Text], serve) -> list:
        texts = list(texts)
        languages, results = self.route(texts), [None] * len(texts)
        for language, student in self.students.items():
            rows = [i for i, routed in enumerate(languages) if routed == language]
            if rows:
                for row, result in zip(rows, serve(student, [texts[i] for i in rows]), strict=True):
                    results[row] = result
        return results


def known_tokens(saved: SavedStudent, texts: list[str]) -> np.ndarray:
    """How many of each text's tokens the student's vocabulary holds (neither padding nor [UNK])."""
    counts = np.zeros(len(texts), dtype=np.int64)
    for start in range(0, len(texts), BATCH_SIZE):
        inputs = saved.padded_batch(texts[start:start + BATCH_SIZE])
        counts[start:start + BATCH_SIZE] = sum((ids > UNK).sum(dim=1) for ids in inputs[0::2]).numpy()
    return counts


def as_texts(texts: Iterable[Text], inputs: str) -> list[str]:
    """Texts as the student's encoding reads them: a pair as 'first ||| second'. A lone string is one
    text (not its characters); an empty text, or a pair given to a single-text student, is an error."""
    texts = [texts] if isinstance(texts, str) else list(texts)
    joined = []
    for number, text in enumerate(texts, start=1):
        if isinstance(text, tuple | list) and inputs == "tokens":  # a sentence given as its words
            text = " ".join(text)
        if isinstance(text, tuple | list):
            if inputs != "pair" or len(text) != 2:
                raise DistilError(f"text {number} is a {len(text)}-tuple, but this student reads "
                                  f"{'pairs (first, second)' if inputs == 'pair' else 'single texts'}")
            text = f"{text[0]} {PAIR_SEPARATOR} {text[1]}"
        if not isinstance(text, str):
            raise DistilError(f"text {number} is a {type(text).__name__}; give a string"
                              f"{' or a (first, second) tuple' if inputs == 'pair' else ''}")
        if not text or text.isspace():  # not strip(): no copy of a long text just to test it
            raise DistilError(f"text {number} is empty; give a non-empty text to label")
        if inputs == "pair":
            check_pair(text, f"text {number}", f"give (first, second) or 'first {PAIR_SEPARATOR} second'")
        joined.append(text)
    return joined


def check_pair(text: str, where: str, fix: str) -> None:
    """A pair student's text is two non-blank sentences either side of one PAIR_SEPARATOR: one sentence,
    a side left blank (a lone '|||') or a third sentence is refused, not answered (`fix` says the format)."""
    separators = text.count(PAIR_SEPARATOR)
    if separators > 1:
        raise DistilError(f"{where} holds '{PAIR_SEPARATOR}' {separators} times, but it separates a pair's two "
                          f"sentences: give it once, and no '{PAIR_SEPARATOR}' inside a sentence")
    if not all(part.strip() for part in text.partition(PAIR_SEPARATOR)[::2]):
        raise DistilError(f"{where} is not a pair; {fix}")
