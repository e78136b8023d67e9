"""TF-IDF + logistic regression: the cheapest strong text classifier (scikit-learn)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline

C_GRID = (0.3, 1.0, 3.0, 10.0)  # inverse regularisation, chosen on dev accuracy
VOCABULARY_FILE, WEIGHTS_FILE = "tfidf_vocabulary.json", "tfidf_weights.npz"


class TfidfPeer:
    name: ClassVar[str] = "tfidf"

    def __init__(self, seed: int = 0, pipeline: Pipeline | None = None):
        self.seed, self.pipeline = seed, pipeline

    def _pipeline(self, c: float) -> Pipeline:
        # sublinear tf and word 1-2-grams: the usual strong setting for sentence classification
        return Pipeline([("tfidf", TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=2)),
                         ("lr", LogisticRegression(C=c, max_iter=2000, random_state=self.seed))])

    def fit(self, texts, labels, dev_texts, dev_labels) -> None:
        best = None
        for c in C_GRID:
            pipeline = self._pipeline(c).fit(texts, labels)
            accuracy = float(np.mean(pipeline.predict(dev_texts) == dev_labels))
            if best is None or accuracy > best[0]:
                best = (accuracy, pipeline)
        self.pipeline = best[1]

    def predict_proba(self, texts) -> np.ndarray:
        return self.pipeline.predict_proba(texts)

    def param_count(self) -> int:
        lr = self.pipeline.named_steps["lr"]
        return int(lr.coef_.size + lr.intercept_.size)

    def save(self, directory: Path) -> None:
        """Plain data, never a pickle (distil never unpickles): the vocabulary as JSON, the numbers as npz."""
        tfidf, lr = self.pipeline.named_steps["tfidf"], self.pipeline.named_steps["lr"]
        vocabulary = {term: int(index) for term, index in tfidf.vocabulary_.items()}
        (directory / VOCABULARY_FILE).write_text(json.dumps(vocabulary, ensure_ascii=False))
        np.savez(directory / WEIGHTS_FILE, idf=tfidf.idf_, coef=lr.coef_, intercept=lr.intercept_, classes=lr.classes_)

    @classmethod
    def load(cls, directory: Path) -> TfidfPeer:
        vocabulary = json.loads((directory / VOCABULARY_FILE).read_text())
        with np.load(directory / WEIGHTS_FILE, allow_pickle=False) as weights:
            peer = cls()
            pipeline = peer._pipeline(1.0)
            tfidf, lr = pipeline.named_steps["tfidf"], pipeline.named_steps["lr"]
            tfidf.set_params(vocabulary=vocabulary)
            tfidf._validate_vocabulary()  # what fit does with a given vocabulary
            tfidf.idf_ = weights["idf"]
            lr.coef_, lr.intercept_, lr.classes_ = weights["coef"], weights["intercept"], weights["classes"]
        peer.pipeline = pipeline
        return peer
