"""SetFit (Tunstall et al. 2022): contrastive fine-tuning of a sentence encoder on pairs of labeled
examples, then logistic regression on its embeddings. The few-label accuracy reference; it runs at
the teacher's speed (its body is the teacher's pre-trained encoder).

Saved as the sentence-transformers body plus the head's numbers in npz: SetFit's own save pickles
the head with joblib, and distil never unpickles.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import ClassVar

import numpy as np
from datasets import Dataset
from sentence_transformers import SentenceTransformer
from setfit import SetFitModel, Trainer, TrainingArguments
from sklearn.linear_model import LogisticRegression

STEPS, BATCH = 100, 16  # the few-label reference: 100 contrastive steps
HEAD_FILE = "setfit_head.npz"


class SetFitPeer:
    READS_TEACHER_MODEL: ClassVar[bool] = True  # starts from the teacher's pre-trained model
    name: ClassVar[str] = "setfit"

    def __init__(self, seed: int = 0, source: str | None = None, body: SentenceTransformer | None = None,
                 head: LogisticRegression | None = None):
        self.seed, self.source, self.body, self.head = seed, source, body, head

    def fit(self, texts, labels, dev_texts, dev_labels) -> None:
        model = SetFitModel.from_pretrained(self.source, local_files_only=True)
        with tempfile.TemporaryDirectory() as scratch:  # SetFit writes checkpoints under output_dir
            args = TrainingArguments(output_dir=scratch, batch_size=BATCH, max_steps=STEPS, seed=self.seed,
                                     report_to="none", save_strategy="no")
            trainer = Trainer(model=model, args=args, train_dataset=Dataset.from_dict(
                {"text": list(texts), "label": [int(y) for y in labels]}))
            trainer.train()
        self.body, self.head = model.model_body, model.model_head

    def predict_proba(self, texts) -> np.ndarray:
        return self.head.predict_proba(self.body.encode(list(texts), batch_size=32))

    def param_count(self) -> int:
        return int(sum(p.numel() for p in self.body.parameters()) + self.head.coef_.size + self.head.intercept_.size)

    def save(self, directory: Path) -> None:
        self.body.save(str(directory / "setfit_body"))
        np.savez(directory / HEAD_FILE, coef=self.head.coef_, intercept=self.head.intercept_,
                 classes=self.head.classes_)

    @classmethod
    def load(cls, directory: Path) -> SetFitPeer:
        head = LogisticRegression()
        with np.load(directory / HEAD_FILE, allow_pickle=False) as weights:
            head.coef_, head.intercept_, head.classes_ = weights["coef"], weights["intercept"], weights["classes"]
        return cls(body=SentenceTransformer(str(directory / "setfit_body"), local_files_only=True), head=head)
