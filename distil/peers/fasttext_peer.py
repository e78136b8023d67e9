"""fastText supervised classification (Joulin et al. 2017): bag of word 1-2-grams, linear, very fast."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

import fasttext
import numpy as np

MODEL_FILE = "fasttext.bin"
LABEL = "__label__"
# Joulin et al.'s sentiment setting (bigrams, 10 hidden units upward; 100 here), with the hashed n-gram
# table at 200k rows instead of fastText's 2M: the 2M x 100 table (800 MB) would dwarf every student.
SETTINGS = {"epoch": 25, "lr": 0.5, "wordNgrams": 2, "dim": 100, "bucket": 200_000, "minCount": 1}


def one_line(text: str) -> str:
    return " ".join(text.split())  # fastText reads one example per line


class FastTextPeer:
    name: ClassVar[str] = "fasttext"

    def __init__(self, seed: int = 0, model=None, num_labels: int = 0):
        self.seed, self.model, self.num_labels = seed, model, num_labels

    def fit(self, texts, labels, dev_texts, dev_labels) -> None:
        self.num_labels = int(max(labels.max(), dev_labels.max())) + 1
        with tempfile.TemporaryDirectory() as tmp:
            train = Path(tmp) / "train.txt"
            train.write_text("".join(f"{LABEL}{label} {one_line(text)}\n" for text, label in zip(texts, labels,
                                                                                               strict=True)))
            # one thread: fastText's Hogwild updates make several threads non-deterministic
            self.model = fasttext.train_supervised(input=str(train), thread=1, seed=self.seed, verbose=0, **SETTINGS)

    def predict_proba(self, texts) -> np.ndarray:
        # fastText's own predict() and multilinePredict() return wrong probabilities under NumPy 2 (every
        # class gets the top one; predict() of one text raises): the per-line binding returns plain floats
        out = np.zeros((len(texts), self.num_labels))
        for row, text in enumerate(texts):
            for value, name in self.model.f.predict(one_line(text), -1, 0.0, "strict"):
                out[row, int(name.removeprefix(LABEL))] = value
        return out

    def param_count(self) -> int:
        return int(self.model.get_input_matrix().size + self.model.get_output_matrix().size)

    def save(self, directory: Path) -> None:
        self.model.save_model(str(directory / MODEL_FILE))  # fastText's own binary format
        (directory / "fasttext_labels.txt").write_text(str(self.num_labels))

    @classmethod
    def load(cls, directory: Path) -> FastTextPeer:
        model = fasttext.load_model(str(directory / MODEL_FILE))
        return cls(model=model, num_labels=int((directory / "fasttext_labels.txt").read_text()))
