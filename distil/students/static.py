"""A static-embedding student (model2vec-style): no recurrence, no attention, one table lookup.

  text    wordpieces -> embedding -> mean over the real tokens -> [ReLU layer] -> dropout -> linear
  pair    each sentence apart -> its mean vector u, v -> [u, v, |u - v|, u * v] -> [ReLU layer] -> linear
  tokens  each wordpiece's vector, with its `context_window` neighbours on either side concatenated
          (zeros beyond the sentence) -> [ReLU layer] -> linear, one label per wordpiece

The table starts from the teacher's own output vector of every wordpiece, reduced by PCA and
weighted by SIF (student.embedding_init=model2vec, see embeddings.py), and is then trained with
whatever schedule the run uses: unlike model2vec's own trainer, on the teacher's targets over
the transfer set. `mlp_hidden_size: 0` leaves the ReLU layer out (a linear model on the mean).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from distil.config.schema import StudentConfig
from distil.students.pairs import pair_features
from distil.tasks import Task


def masked_mean(vectors: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of the vectors at real positions; an all-padding row gives zeros, not NaN."""
    weights = mask.unsqueeze(-1).to(vectors.dtype)
    return (vectors * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1.0)


def with_context(vectors: torch.Tensor, mask: torch.Tensor, window: int) -> torch.Tensor:
    """[B, T, E] -> [B, T, (2 window + 1) E]: each position beside its neighbours, left to right;
    positions before the start, after the end or at padding read zeros."""
    if window == 0:
        return vectors
    vectors = vectors * mask.unsqueeze(-1).to(vectors.dtype)
    padded = F.pad(vectors, (0, 0, window, window))  # zeros beyond both ends of the time axis
    length = vectors.shape[1]
    return torch.cat([padded[:, offset:offset + length] for offset in range(2 * window + 1)], dim=-1)


class StaticStudent(nn.Module):
    INPUTS = ("text", "pair", "tokens")
    READS_PAIRS_APART = True  # a pair is two bags of wordpieces compared, as sentence embeddings are
    LINEAR_CLASSIFIER = True  # `classifier` is one nn.Linear over the state (a projection can go under it)

    def __init__(self, vocab_size: int, embedding_dim: int, num_labels: int, dropout: float,
                 mlp_hidden_size: int, inputs: str, context_window: int = 0, pad_id: int = 0):
        super().__init__()
        self.inputs, self.context_window = inputs, context_window
        self.embedding = nn.Embedding(vocab_size, embedding_dim, padding_idx=pad_id)
        width = embedding_dim * (4 if inputs == "pair" else 2 * context_window + 1 if inputs == "tokens" else 1)
        self.mlp = nn.Sequential(nn.Dropout(dropout), nn.Linear(width, mlp_hidden_size), nn.ReLU()) \
            if mlp_hidden_size else None
        self.dropout = nn.Dropout(dropout)
        self.representation_size = mlp_hidden_size or width
        if inputs == "pair":  # a representation head maps each sentence's mean vector (Wu et al. 3.1)
            self.representation_size = embedding_dim
        self.classifier = nn.Linear(mlp_hidden_size or width, num_labels)
        # forward_bags' mean of each bag (an export swaps in one that ONNX exporters trace: exportable.py)
        self.bag_means = bag_means

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task):
        return cls(vocab_size, cfg.embedding_dim, num_labels, cfg.dropout, cfg.mlp_hidden_size, task.inputs,
                   cfg.context_window)

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        """Top to bottom, the order gradual unfreezing follows."""
        middle = [("mlp", self.mlp)] if self.mlp is not None else []
        return [("classifier", self.classifier), *middle, ("embeddings", self.embedding)]

    def _hidden(self, features: torch.Tensor) -> torch.Tensor:
        return self.mlp(features) if self.mlp is not None else features

    def forward(self, *inputs: torch.Tensor) -> dict[str, torch.Tensor]:
        if self.inputs == "pair":
            ids_a, mask_a, ids_b, mask_b = inputs
            u, v = masked_mean(self.embedding(ids_a), mask_a), masked_mean(self.embedding(ids_b), mask_b)
            hidden = self._hidden(pair_features(u, v))
            return {"pooled": hidden, "sentences": torch.stack([u, v], dim=1),
                    "logits": self.classifier(self.dropout(hidden))}
        ids, mask = inputs
        vectors = self.embedding(ids)
        if self.inputs == "tokens":
            states = self._hidden(with_context(vectors, mask, self.context_window))
            return {"states": states, "logits": self.classifier(self.dropout(states))}
        pooled = self._hidden(masked_mean(vectors, mask))
        return {"pooled": pooled, "logits": self.classifier(self.dropout(pooled))}

    @property
    def serves_bags(self) -> bool:
        return self.inputs != "tokens"

    def forward_bags(self, *bags: torch.Tensor, sentences: bool = False) -> dict[str, torch.Tensor]:
        """`forward`'s pooled vector and logits from bags of wordpieces instead of padded batches:
        (ids, offsets) per sentence column, the ids of all sentences laid end to end and the offset
        where each begins (a pair: the first sentences' bags, then the seconds'). Serving
        (distil.serve.student) takes this path: no padding to build, no padded positions to embed, one
        fused lookup-and-mean. Sentences only (text, pair), not tagging. `sentences`: a pair's two mean
        vectors too, as `forward` gives them (what a representation head maps); serving logits skips them."""
        if self.training:  # serving only: what follows is the eval-mode forward, without dropout
            raise RuntimeError("forward_bags serves a trained student: call .eval() first")
        table, mlp, classifier = self._served_layers()
        means, out = self.bag_means, {}
        if self.inputs == "pair":
            u, v = means(table, *bags[:2]), means(table, *bags[2:])
            pooled = pair_features(u, v)
            if sentences:
                out["sentences"] = torch.stack([u, v], dim=1)
        else:
            pooled = means(table, *bags)
        if mlp is not None:
            pooled = F.linear(pooled, *mlp).relu_()
        return {**out, "pooled": pooled, "logits": F.linear(pooled, *classifier) if classifier is not None else pooled}

    def one_request(self, folded: tuple[torch.Tensor, torch.Tensor] | None = None) -> OneRequest | None:
        """A single text's forward in numpy (OneRequest), for a server answering one request at a
        time; None for pairs, tagging, or a projection in the path (they keep forward_bags).
        Taken once, after the weights are final: it reads the parameters' memory, or the folded table
        (`folded`: folded_classifier() when the server has taken it already; folding is a product
        over the whole table, so it is done once)."""
        table, mlp, classifier = self._served_layers()
        if self.inputs != "text" or classifier is None:
            return None
        folded = folded if folded is not None else self.folded_classifier()
        if folded is not None:  # a linear model: mean((E W^T)[ids]) + b, two numbers per token
            return OneRequest(folded[0], None, (None, folded[1]))
        return OneRequest(table, mlp, classifier)

    def folded_classifier(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """(E W^T, b) when the student is a linear model on one text's mean vector (mlp_hidden_size
        0), else None: then mean(E[ids]) W^T + b = mean((E W^T)[ids]) + b, and serving a text is a
        gather of `num_labels` numbers per token (as fastText serves). Taken once by a server
        (distil.serve.student), after the weights are final."""
        table, mlp, classifier = self._served_layers()
        if mlp is not None or classifier is None or self.inputs != "text":
            return None
        weight, bias = classifier
        with torch.no_grad():
            return table @ weight.T, bias.detach().clone()

    def _served_layers(self) -> tuple:
        """(embedding table, (weight, bias) of the ReLU layer or None, of the classifier or None when a
        projection in the path replaced it by nn.Identity): the layers as functions of their
        parameters, looked up once. Per call, a module's hooks and attribute lookups cost more than a
        one-sentence matrix product does (measured on SST-2: forward_bags 0.082 ms with them, the
        products 0.043 ms), and single-sentence latency is what serving measures. The parameters
        are the module's own tensors, updated in place by training and load_state_dict; a module
        replaced after the first call (a head swapped in) is looked up again."""
        modules = (self.embedding, self.mlp, self.classifier)
        cached = self.__dict__.get("_served")
        if cached is None or any(a is not b for a, b in zip(cached[0], modules, strict=True)):
            mlp = (self.mlp[1].weight, self.mlp[1].bias) if self.mlp is not None else None  # (Dropout, Linear, ReLU)
            classifier = (self.classifier.weight, self.classifier.bias) \
                if isinstance(self.classifier, nn.Linear) else None
            cached = self.__dict__["_served"] = (modules, (self.embedding.weight, mlp, classifier))
        return cached[1]


class OneRequest:
    """A text student's eval forward for one request, in numpy: mean of the token rows -> [ReLU
    layer] -> classifier. For one sentence torch's fixed cost per operation (~5-8 us, eight of them)
    is most of the model's time; numpy's is a fraction of it (measured on SST-2, 2 cores, 256-wide
    table and 512 ReLU units: 25 us against 76 us through forward_bags). Batches keep torch."""

    def __init__(self, table: torch.Tensor, mlp: tuple | None, classifier: tuple):
        def array(tensor):
            return None if tensor is None else tensor.detach().numpy()

        self.table = array(table)
        self.mlp = None if mlp is None else tuple(map(array, mlp))
        self.weight, self.bias = map(array, classifier)  # weight None: the table is already folded

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        """[1, labels] for one text's token ids (an empty text: its mean is zeros, as embedding_bag gives)."""
        rows = self.table.take(ids, axis=0)
        vector = np.add.reduce(rows, axis=0) / len(ids) if len(ids) else np.zeros(self.table.shape[1], np.float32)
        if self.mlp is not None:
            vector = np.dot(self.mlp[0], vector)
            vector += self.mlp[1]
            np.maximum(vector, 0, out=vector)
        logits = vector if self.weight is None else np.dot(self.weight, vector)
        return (logits + self.bias)[None]


def bag_means(table: torch.Tensor, ids: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """[bags, E]: the mean row of `table` over each bag (ids laid end to end, offsets where each
    begins; an empty bag gives zeros). One bag is a plain gather and mean: embedding_bag's setup
    costs several times that for a single sentence (measured: 0.043 vs 0.024 ms on SST-2, 2 cores)."""
    if offsets.shape[0] == 1 and ids.shape[0]:  # not table[ids], nor .mean: both cost more here
        return table.index_select(0, ids).sum(dim=0, keepdim=True).div_(ids.shape[0])
    return F.embedding_bag(ids, table, offsets, mode="mean")
