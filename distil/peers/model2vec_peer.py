"""model2vec (Tulkens & van Dongen 2024): a static encoder distilled from a sentence transformer, and
its StaticModelForClassification trained on top (on class ids), or its StaticModelForRegression fit to
the teacher's logits (student.targets=logits), as a user would run the library.

The distillation is model2vec's steps (each wordpiece alone through the model as [SEP] w [CLS], the
mean of the outputs, PCA to 256 fitted without the [unusedN] placeholders, Zipf SIF a = 1e-4), done
by distil (teacher/token_vectors.py, students/embeddings.py) over the teacher's whole vocabulary:
model2vec's own `distill` extra pins transformers<5.4. Encoding and the heads are model2vec's.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import torch
from model2vec import StaticModel
from model2vec.inference import StaticModelPipeline
from model2vec.train import StaticModelForClassification, StaticModelForRegression
from transformers import AutoModel, AutoTokenizer

from distil.students.embeddings import UNUSED_TOKEN, sif_weights
from distil.teacher.token_vectors import token_output_vectors

PCA_DIMS, SIF = 256, 1e-4  # model2vec.distill's defaults


def distilled_vectors(source: str, dims: int = PCA_DIMS, sif: float | None = SIF) -> tuple[np.ndarray, object]:
    """(vectors [vocabulary, dims] in the tokenizer's id order, the tokenizer's `tokenizers.Tokenizer`)."""
    model = AutoModel.from_pretrained(source, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    ids = list(range(len(tokens)))
    outputs = token_output_vectors(model, tokenizer, ids).double()
    kept = torch.tensor([not UNUSED_TOKEN.fullmatch(t) for t in tokens])
    dims = min(dims, outputs.shape[1], int(kept.sum()))  # model2vec: no reduction beyond what the model has
    mean = outputs[kept].mean(dim=0)
    _, _, vt = torch.linalg.svd(outputs[kept] - mean, full_matrices=False)
    components = vt[:dims]
    components = components * torch.sign(components.gather(1, components.abs().argmax(dim=1, keepdim=True)))
    vectors = (outputs - mean) @ components.T  # every row, placeholders too (they are never read)
    if sif is not None:
        vectors = vectors * sif_weights(ids, tokens, sif).unsqueeze(1)
    return vectors.float().numpy(), tokenizer.backend_tokenizer


class Model2VecPeer:
    READS_TEACHER_MODEL: ClassVar[bool] = True  # starts from the teacher's pre-trained model
    name: ClassVar[str] = "model2vec"

    def __init__(self, seed: int = 0, source: str | None = None, pipeline: StaticModelPipeline | None = None,
                 params: int = 0):
        self.seed, self.source, self.pipeline, self.params = seed, source, pipeline, params

    def fit(self, texts, labels, dev_texts, dev_labels) -> None:
        """Class ids (labels [n]): StaticModelForClassification. The teacher's logits (labels [n, classes],
        student.targets=logits): StaticModelForRegression, an MLP head fit by MSE to them, early-stopped on
        the dev split's logits."""
        vectors, tokenizer = distilled_vectors(self.source)
        static = StaticModel(vectors, tokenizer, normalize=True)
        if np.ndim(labels) == 2:
            model = StaticModelForRegression.from_static_model(model=static)
            model.fit(list(texts), torch.as_tensor(labels), X_val=list(dev_texts), y_val=torch.as_tensor(dev_labels),
                      random_seed=self.seed, device="cpu")
        else:
            model = StaticModelForClassification.from_static_model(model=static)
            model.fit(list(texts), [str(y) for y in labels], X_val=list(dev_texts),
                      y_val=[str(y) for y in dev_labels], random_seed=self.seed, device="cpu")
        self.params = sum(p.numel() for p in model.parameters())
        self.pipeline = model.to_pipeline()

    def predict_proba(self, texts) -> np.ndarray:
        if self.pipeline.classes_ is None:  # a regression head: its outputs are the logits it learned
            return torch.softmax(torch.as_tensor(self.pipeline.predict(list(texts))), dim=-1).numpy()
        probabilities = self.pipeline.predict_proba(list(texts))
        order = np.argsort([int(c) for c in self.pipeline.classes_])  # columns by class id
        return probabilities[:, order]

    def param_count(self) -> int:
        return self.params

    def save(self, directory: Path) -> None:
        self.pipeline.save_pretrained(directory / "model2vec")
        (directory / "model2vec_params.txt").write_text(str(self.params))

    @classmethod
    def load(cls, directory: Path) -> Model2VecPeer:
        pipeline = StaticModelPipeline.from_pretrained(directory / "model2vec")
        return cls(pipeline=pipeline, params=int((directory / "model2vec_params.txt").read_text()))
