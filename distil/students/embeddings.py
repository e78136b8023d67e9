"""Initial student embeddings, as in XtremeDistil (Mukherjee & Awadallah 2020, Table 14).

Rows follow the trimmed vocabulary (vocab.py): row 0 is [PAD], row 1 [UNK], row i+2 teacher wordpiece teacher_ids[i].
  random  U(-0.1, 0.1) from a generator seeded with `seed` (Mukherjee & Awadallah 6.1: words without a
          pre-trained vector "are randomly initialized with U(-.1, .1)")
  svd     the teacher's wordpiece embedding matrix reduced to E dimensions by truncated SVD
  pca     the same on the mean-centred matrix (the classic PCA projection)
  file    pre-trained word vectors (GloVe, or word2vec text format), looked up per wordpiece; the rest random
  model2vec  model2vec's distillation (Tulkens & van Dongen 2024, model2vec.distill): each wordpiece alone
          through the teacher as [SEP] w [CLS] (their order), the mean of the three output vectors, PCA to E
          over the student's vocabulary, then SIF weights a / (a + p(w)) with p(w) from Zipf's law over the
          teacher's vocabulary order ([unusedN] tokens skipped, as model2vec removes them)
Whatever the method, [PAD] is zeros and [UNK] starts at the mean of the vocabulary rows: it stands for any
token the student never saw, and the centre of those it did is the neutral guess (word dropout, see
vocab.UnkDropout, then trains it).
"""

from __future__ import annotations

import gzip
import logging
import math
import re
from collections.abc import Callable
from pathlib import Path

import torch

from distil.errors import DistilError, check_choice

METHODS = ("random", "svd", "pca", "file", "model2vec")
UNUSED_TOKEN = re.compile(r"\[unused\d+\]")  # model2vec's token_remove_pattern

# teacher ids -> the teacher's output vector of each wordpiece alone, [n, H] (distil.teacher.token_vectors)
TokenVectors = Callable[[list[int]], torch.Tensor]
RANDOM_BOUND = 0.1  # U(-0.1, 0.1), Mukherjee & Awadallah 6.1

log = logging.getLogger(__name__)


def initial_embeddings(
    method: str,
    dim: int,
    teacher_ids: list[int],
    teacher_embeddings: torch.Tensor | None = None,
    teacher_tokens: list[str] | None = None,
    vectors_file: str | None = None,
    seed: int = 0,
    token_vectors: TokenVectors | None = None,
    sif_coefficient: float | None = None,
) -> torch.Tensor:
    """A float32 [len(teacher_ids) + 2, dim] matrix to copy into the student's nn.Embedding; row 0 is zeros.

    teacher_embeddings ([V, D]) is needed for svd/pca; teacher_tokens (strings by teacher id) and vectors_file
    for file. Every problem the user can fix is raised as a one-line DistilError before any training starts.
    """
    check_choice("student.embedding_init", method, METHODS)
    if method in ("svd", "pca"):
        weights = _reduced_teacher(method, dim, teacher_ids, teacher_embeddings)
    elif method == "model2vec":
        weights = _model2vec(dim, teacher_ids, token_vectors, teacher_tokens, sif_coefficient)
    elif method == "file":
        weights = _from_vectors_file(dim, teacher_ids, teacher_tokens, vectors_file, seed)
    else:
        weights = _random(len(teacher_ids) + 2, dim, seed)
    return with_pad_and_unk(weights)


def with_pad_and_unk(weights: torch.Tensor) -> torch.Tensor:
    """[PAD] zeros (nn.Embedding(padding_idx=0) zeroes it only at construction; copying weights in would
    undo that) and [UNK] the mean of the vocabulary rows (zeros when there are none)."""
    weights[0] = 0.0
    weights[1] = weights[2:].mean(dim=0) if len(weights) > 2 else 0.0
    return weights


def _random(rows: int, dim: int, seed: int) -> torch.Tensor:
    # A private generator: the same seed gives the same rows whatever else has used the global RNG.
    generator = torch.Generator().manual_seed(seed)
    return (torch.rand((rows, dim), generator=generator) * 2 - 1) * RANDOM_BOUND


def _reduced_teacher(
    method: str, dim: int, teacher_ids: list[int], teacher_embeddings: torch.Tensor | None
) -> torch.Tensor:
    if teacher_embeddings is None:
        raise DistilError(f"student.embedding_init={method} needs the teacher's wordpiece embedding matrix and none "
                          f"was given; use a teacher with input embeddings, "
                          f"or set student.embedding_init to random or file")
    # float64: a stable SVD even for fp16/bf16 teachers; float32 comes back at the end.
    matrix = teacher_embeddings.detach().to("cpu", torch.float64)
    hidden = matrix.shape[1]
    if dim > hidden:
        raise DistilError(f"student.embedding_init={method}: embedding_dim {dim} is larger than the teacher's hidden "
                          f"size {hidden}; lower student.embedding_dim to at most {hidden}")
    if not torch.isfinite(matrix).all():
        raise DistilError(f"student.embedding_init={method}: the teacher's embedding matrix holds NaN or inf values; "
                          f"check the teacher checkpoint or set student.embedding_init=random")
    # Left unscaled (not brought to std 0.1) on purpose: it keeps the teacher's geometry, i.e. norms and inner
    # products between wordpieces are the best rank-E approximation of the teacher's own.
    picked = _components(matrix, dim, centre=method == "pca")[torch.tensor(teacher_ids, dtype=torch.long)]
    return torch.cat([torch.zeros(2, dim, dtype=torch.float64), picked]).float()  # [PAD], [UNK]: set by the caller


def _components(matrix: torch.Tensor, dim: int, centre: bool) -> torch.Tensor:
    """U_k S_k = X V_k: every row in the matrix's top-`dim` directions (PCA when `centre`d, float64)."""
    if centre:
        matrix = matrix - matrix.mean(dim=0)
    u, s, _ = torch.linalg.svd(matrix, full_matrices=False)
    u, s = u[:, :dim], s[:dim]
    # LAPACK may return either sign for each singular vector: flip each column so its largest entry is positive
    # (sklearn's svd_flip) so the same teacher gives the same student on every machine.
    u = u * torch.sign(u.gather(0, u.abs().argmax(dim=0, keepdim=True)))
    return u * s


def _model2vec(dim: int, teacher_ids: list[int], token_vectors: TokenVectors | None,
               teacher_tokens: list[str] | None, sif_coefficient: float | None) -> torch.Tensor:
    if token_vectors is None or teacher_tokens is None:
        raise DistilError("student.embedding_init=model2vec runs every wordpiece through the teacher and none was "
                          "given; use a Transformer teacher, or set student.embedding_init to svd or random")
    outputs = token_vectors(teacher_ids).detach().to("cpu", torch.float64)
    if dim > outputs.shape[1]:
        raise DistilError(f"student.embedding_init=model2vec: embedding_dim {dim} is larger than the teacher's hidden "
                          f"size {outputs.shape[1]}; lower student.embedding_dim to at most {outputs.shape[1]}")
    if dim > len(teacher_ids):
        raise DistilError(f"student.embedding_init=model2vec: PCA to {dim} dimensions needs at least {dim} "
                          f"wordpieces and the training data has {len(teacher_ids)}; lower student.embedding_dim")
    reduced = _components(outputs, dim, centre=True)  # model2vec: sklearn PCA, fitted on these rows
    if sif_coefficient is not None:
        reduced = reduced * sif_weights(teacher_ids, teacher_tokens, sif_coefficient).unsqueeze(1)
    return torch.cat([torch.zeros(2, dim, dtype=torch.float64), reduced]).float()  # [PAD], [UNK]: set by the caller


def sif_weights(teacher_ids: list[int], teacher_tokens: list[str], coefficient: float) -> torch.Tensor:
    """a / (a + p(w)) per teacher id, p(w) Zipf's law on the rank of w in the teacher's vocabulary: the
    vocabulary's order stands in for frequency, p(rank r) = (1 / (r + 2)) / sum over all ranks, ranks counted
    without the [unusedN] placeholders (model2vec's _post_process_embeddings)."""
    kept = [not UNUSED_TOKEN.fullmatch(token) for token in teacher_tokens]
    ranks = torch.cumsum(torch.tensor(kept, dtype=torch.float64), 0) - 1  # rank of each kept token
    inverse = 1.0 / torch.arange(2, int(sum(kept)) + 2, dtype=torch.float64)
    probability = (1.0 / (ranks + 2)) / inverse.sum()
    return (coefficient / (coefficient + probability))[torch.tensor(teacher_ids, dtype=torch.long)]


def _from_vectors_file(
    dim: int, teacher_ids: list[int], teacher_tokens: list[str] | None, vectors_file: str | None, seed: int
) -> torch.Tensor:
    if not vectors_file:
        raise DistilError("student.embedding_init=file needs a word-vector file; "
                          "set student.vectors_file to a GloVe or word2vec text file")
    if teacher_tokens is None:
        raise DistilError("student.embedding_init=file needs the teacher's vocabulary strings to look words up and "
                          "none were given; use a teacher whose tokenizer has a vocabulary, "
                          "or set student.embedding_init to random, svd or pca")
    if not Path(vectors_file).is_file():
        raise DistilError(f"student.vectors_file {vectors_file} not found; "
                          f"set student.vectors_file to an existing GloVe or word2vec text file")
    keys = [_lookup_keys(teacher_tokens[tid]) for tid in teacher_ids]
    vectors = _read_vectors(vectors_file, dim, {key for row_keys in keys for key in row_keys})
    weights = _random(len(teacher_ids) + 2, dim, seed)  # rows without a vector keep the seeded random init
    found = 0
    for row, row_keys in enumerate(keys, start=2):
        key = next((key for key in row_keys if key in vectors), None)
        if key is not None:
            weights[row] = vectors[key]
            found += 1
    log.info("student.vectors_file %s: found vectors for %d of %d wordpieces; the rest start random",
             vectors_file, found, len(teacher_ids))
    return weights


def _lookup_keys(token: str) -> list[str]:
    """Where to look a wordpiece up, best first: as is, without the '##' continuation mark, lower-cased."""
    base = token[2:] if token.startswith("##") and len(token) > 2 else token
    return list(dict.fromkeys([token, base, base.lower()]))


def _read_vectors(vectors_file: str, dim: int, wanted: set[str]) -> dict[str, torch.Tensor]:
    """The vectors of the `wanted` words only: a full GloVe file would not fit in memory as tensors."""
    opener = gzip.open if vectors_file.endswith(".gz") else open
    vectors: dict[str, torch.Tensor] = {}
    file_dim = None
    with opener(vectors_file, "rt", encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            # Split on single spaces only: some GloVe words hold other whitespace (e.g. U+00A0).
            fields = line.rstrip("\r\n").rstrip(" ").split(" ")
            if number == 1 and len(fields) == 2 and all(field.isdigit() for field in fields):
                file_dim = int(fields[1])  # word2vec header "<count> <dim>"
                continue
            if file_dim is None and len(fields) > 1:
                file_dim = len(fields) - 1  # GloVe: the first vector tells the dimension
            if file_dim is not None and file_dim != dim:
                raise DistilError(f"student.vectors_file {vectors_file} has {file_dim}-dimensional vectors but "
                                  f"student.embedding_dim is {dim}; set student.embedding_dim={file_dim} "
                                  f"or use another file")
            if len(fields) < dim + 1:
                raise _malformed(vectors_file, number, dim)
            word = " ".join(fields[:-dim])  # the word may itself hold spaces; the numbers are the last `dim` fields
            # Only wanted words are parsed: converting millions of unused numbers would dominate start-up time.
            if word not in wanted or word in vectors:  # on duplicates the first (most frequent) vector wins
                continue
            try:
                values = [float(field) for field in fields[-dim:]]
            except ValueError:
                raise _malformed(vectors_file, number, dim) from None
            if not all(math.isfinite(value) for value in values):
                raise _malformed(vectors_file, number, dim)
            vectors[word] = torch.tensor(values, dtype=torch.float32)
    if file_dim is None:
        raise DistilError(f"student.vectors_file {vectors_file} holds no vectors; "
                          f"set student.vectors_file to a GloVe or word2vec text file")
    return vectors


def _malformed(vectors_file: str, number: int, dim: int) -> DistilError:
    return DistilError(f"student.vectors_file {vectors_file} line {number} is malformed: expected a word and {dim} "
                       f"numbers separated by spaces; fix the line or use another file")


def check_embedding_init(method: str, dim: int, teacher_hidden_size: int | None, vectors_file: str | None,
                         reads_words: bool) -> None:
    """The size checks of `initial_embeddings`, cheap enough to run before any training."""
    check_choice("student.embedding_init", method, METHODS)
    if method in ("svd", "pca", "model2vec") and reads_words:
        raise DistilError(f"student.embedding_init={method} reduces the teacher's wordpiece vectors, but this "
                          f"student reads whitespace words; use random or file")
    if method in ("svd", "pca", "model2vec") and teacher_hidden_size is not None and dim > teacher_hidden_size:
        raise DistilError(f"student.embedding_init={method}: embedding_dim {dim} is larger than the teacher's "
                          f"hidden size {teacher_hidden_size}; lower student.embedding_dim to at most "
                          f"{teacher_hidden_size}")
    if method == "file":
        if not vectors_file:
            raise DistilError("student.embedding_init=file needs student.vectors_file (GloVe or word2vec text)")
        found = vectors_dimension(vectors_file)
        if found != dim:
            raise DistilError(f"student.vectors_file {Path(vectors_file).name} has {found}-dimensional vectors but "
                              f"student.embedding_dim is {dim}; set student.embedding_dim={found} or use another file")


def vectors_dimension(vectors_file: str) -> int:
    """Dimension of the first vector in the file (a word2vec header line is skipped)."""
    path = Path(vectors_file)
    if not path.is_file():
        raise DistilError(f"student.vectors_file {vectors_file} does not exist; set student.vectors_file to a "
                          f"GloVe or word2vec text file")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            fields = line.rstrip().split(" ")
            if len(fields) == 2 and all(f.isdigit() for f in fields):
                continue  # word2vec header "N D"
            if len(fields) > 1:
                return len(fields) - 1
    raise DistilError(f"student.vectors_file {vectors_file} holds no vectors; use a GloVe or word2vec text file")
