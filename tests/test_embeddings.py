"""Student embedding initialisation: each method against values computed independently, and every user error."""

from __future__ import annotations

import gzip
import logging
import re

import numpy as np
import pytest
import torch

from distil.errors import DistilError
from distil.students.embeddings import METHODS, initial_embeddings

V, D, E = 50, 16, 4
IDS = [3, 5, 8, 9, 11, 20, 27, 31, 40, 49]


@pytest.fixture
def teacher() -> torch.Tensor:
    # Offset from zero so that the uncentred (svd) and centred (pca) projections differ.
    return torch.randn(V, D, generator=torch.Generator().manual_seed(1)) + 0.5


@pytest.fixture
def tokens() -> list[str]:
    names = [f"w{i}" for i in range(V)]
    names[3], names[5], names[8], names[9] = "the", "##ing", "Paris", "##Berlin"
    return names


def write(path, lines: list[str]) -> str:
    text = "\n".join(lines) + "\n"
    if str(path).endswith(".gz"):
        with gzip.open(path, "wt", encoding="utf-8") as handle:
            handle.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return str(path)


GLOVE = ["the 1 0 0 0", "ing 0 1 0 0", "paris 0 0 1 0", "berlin 0 0 0 1", "unused 9 9 9 9"]


def reference_projection(matrix: np.ndarray, dim: int) -> np.ndarray:
    u, s, _ = np.linalg.svd(matrix, full_matrices=False)
    return u[:, :dim] * s[:dim]


def assert_equal_up_to_column_sign(actual: torch.Tensor, expected: np.ndarray) -> None:
    """Singular vectors are defined up to sign: align each column with the reference before comparing."""
    actual = actual.double().numpy()
    signs = np.sign((actual * expected).sum(axis=0))
    np.testing.assert_allclose(actual, expected * signs, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_gives_vocab_rows_and_zero_pad_row(method, teacher, tokens, tmp_path):
    out = initial_embeddings(method, E, IDS, teacher_embeddings=teacher, teacher_tokens=tokens,
                             token_vectors=lambda ids: teacher[ids],
                             vectors_file=write(tmp_path / "glove.txt", GLOVE))
    assert out.shape == (len(IDS) + 2, E)
    assert out.dtype == torch.float32
    assert torch.all(out[0] == 0)
    assert torch.isfinite(out).all()
    assert torch.all(out[1:].abs().sum(dim=1) > 0)  # only [PAD] is zero


def test_random_is_uniform_between_minus_and_plus_0_1_and_seeded():
    """Mukherjee & Awadallah 6.1: words without a pre-trained vector are "randomly initialized with U(-.1, .1)"."""
    out = initial_embeddings("random", 64, list(range(2000)), seed=7)
    rows = out[2:]
    assert rows.min().item() >= -0.1 and rows.max().item() <= 0.1
    assert rows.min().item() < -0.0999 and rows.max().item() > 0.0999  # the whole interval, not a narrower one
    assert rows.std().item() == pytest.approx(0.2 / 12 ** 0.5, rel=0.02)  # U(a, b): std (b - a) / sqrt(12)
    assert rows.mean().item() == pytest.approx(0.0, abs=0.002)
    assert torch.equal(out, initial_embeddings("random", 64, list(range(2000)), seed=7))
    assert not torch.equal(out, initial_embeddings("random", 64, list(range(2000)), seed=8))


@pytest.mark.parametrize("method", METHODS)
def test_unk_starts_at_the_mean_of_the_vocabulary_rows(method, teacher, tokens, tmp_path):
    """[UNK] stands for every wordpiece the student never saw: it starts at the centre of those it did
    (a neutral vector, not one more random word)."""
    out = initial_embeddings(method, E, IDS, teacher_embeddings=teacher, teacher_tokens=tokens,
                             token_vectors=lambda ids: teacher[ids],
                             vectors_file=write(tmp_path / "glove.txt", GLOVE), seed=3)
    torch.testing.assert_close(out[1], out[2:].mean(dim=0))


def test_svd_rows_are_the_truncated_svd_projection_of_the_chosen_ids(teacher):
    out = initial_embeddings("svd", E, IDS, teacher_embeddings=teacher)
    expected = reference_projection(teacher.double().numpy(), E)[IDS]
    assert_equal_up_to_column_sign(out[2:], expected)
    torch.testing.assert_close(out[1], out[2:].mean(dim=0))  # [UNK] = mean of the picked rows


def test_pca_rows_are_the_projection_of_the_centred_matrix(teacher):
    out = initial_embeddings("pca", E, IDS, teacher_embeddings=teacher)
    matrix = teacher.double().numpy()
    expected = reference_projection(matrix - matrix.mean(axis=0), E)[IDS]
    assert_equal_up_to_column_sign(out[2:], expected)
    torch.testing.assert_close(out[1], out[2:].mean(dim=0))


def test_pca_columns_have_zero_mean_over_the_full_vocabulary_and_svd_columns_do_not(teacher):
    every_id = list(range(V))
    pca = initial_embeddings("pca", E, every_id, teacher_embeddings=teacher)
    assert pca[2:].mean(dim=0).abs().max().item() < 1e-5
    assert pca[1].abs().max().item() < 1e-5  # [UNK] is that mean
    svd = initial_embeddings("svd", E, every_id, teacher_embeddings=teacher)
    assert svd[2:].mean(dim=0).abs().max().item() > 0.1


@pytest.mark.parametrize("method", ["svd", "pca"])
def test_svd_and_pca_are_deterministic(method, teacher):
    first = initial_embeddings(method, E, IDS, teacher_embeddings=teacher)
    assert torch.equal(first, initial_embeddings(method, E, IDS, teacher_embeddings=teacher.clone()))


def test_file_exact_hash_stripped_and_lowercased_matches(teacher, tokens, tmp_path):
    out = initial_embeddings("file", E, IDS, teacher_tokens=tokens, vectors_file=write(tmp_path / "g.txt", GLOVE))
    assert out[2].tolist() == [1, 0, 0, 0]  # "the": exact
    assert out[3].tolist() == [0, 1, 0, 0]  # "##ing" -> "ing"
    assert out[4].tolist() == [0, 0, 1, 0]  # "Paris" -> "paris"
    assert out[5].tolist() == [0, 0, 0, 1]  # "##Berlin" -> "Berlin" -> "berlin"


def test_file_prefers_the_exact_string(tokens, tmp_path):
    lines = ["ing 0 1 0 0", "##ing 3 3 3 3", "paris 0 0 1 0", "Paris 2 2 2 2"]
    out = initial_embeddings("file", E, IDS, teacher_tokens=tokens, vectors_file=write(tmp_path / "g.txt", lines))
    assert out[3].tolist() == [3, 3, 3, 3]
    assert out[4].tolist() == [2, 2, 2, 2]


def test_file_unmatched_rows_are_the_seeded_random_rows(tokens, tmp_path):
    out = initial_embeddings("file", E, IDS, teacher_tokens=tokens,
                             vectors_file=write(tmp_path / "g.txt", GLOVE), seed=3)
    random = initial_embeddings("random", E, IDS, seed=3)
    assert torch.equal(out[6:], random[6:])  # w11, w20, ...: not in the file
    assert not torch.equal(out[2:6], random[2:6])
    other_seed = initial_embeddings("file", E, IDS, teacher_tokens=tokens,
                                    vectors_file=write(tmp_path / "g.txt", GLOVE), seed=4)
    assert torch.equal(out[2:6], other_seed[2:6]) and not torch.equal(out[6:], other_seed[6:])


def test_file_skips_a_word2vec_header_and_reads_gzip(tokens, tmp_path):
    plain = initial_embeddings("file", E, IDS, teacher_tokens=tokens, vectors_file=write(tmp_path / "g.txt", GLOVE))
    w2v = write(tmp_path / "w2v.txt.gz", ["5 4", *GLOVE])
    torch.testing.assert_close(initial_embeddings("file", E, IDS, teacher_tokens=tokens, vectors_file=w2v), plain)
    assert plain[2].tolist() == [1, 0, 0, 0]


def test_file_logs_how_many_rows_were_found(tokens, tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="distil.students.embeddings"):
        initial_embeddings("file", E, IDS, teacher_tokens=tokens, vectors_file=write(tmp_path / "g.txt", GLOVE))
    assert "found vectors for 4 of 10 wordpieces" in caplog.text


ERRORS = ["unknown method", "svd dim > hidden", "pca dim > hidden", "svd without teacher", "pca without teacher",
          "non-finite teacher", "file without vectors_file", "file without tokens", "missing vectors_file",
          "glove dim mismatch", "word2vec header dim mismatch", "too few fields", "not a number", "infinite value",
          "empty file"]


def error_cases(teacher, tokens, tmp_path):
    glove = write(tmp_path / "glove.txt", GLOVE)
    glove3 = write(tmp_path / "glove3.txt", ["the 1 0 0", "ing 0 1 0"])
    w2v3 = write(tmp_path / "w2v3.txt", ["2 3", "the 1 0 0 0"])
    short = write(tmp_path / "short.txt", ["the 1 0 0 0", "ing 0 1 0 0", "paris 0 0"])
    not_a_number = write(tmp_path / "nan.txt", ["2 4", "the 1 0 0 0", "ing 0 one 0 0"])
    infinite = write(tmp_path / "inf.txt", ["the 1 0 inf 0"])
    empty = write(tmp_path / "empty.txt", [""])
    missing = str(tmp_path / "nowhere" / "glove.txt")
    nan_teacher = teacher.clone()
    nan_teacher[7, 2] = float("nan")
    file_kwargs = {"teacher_tokens": tokens}
    return dict(zip(ERRORS, [
        ("glove", {}, "unknown student.embedding_init 'glove'; choose one of: random, svd, pca, file"),
        ("svd", {"dim": 17, "teacher_embeddings": teacher},
         "student.embedding_init=svd: embedding_dim 17 is larger than the teacher's hidden size 16; "
         "lower student.embedding_dim to at most 16"),
        ("pca", {"dim": 17, "teacher_embeddings": teacher},
         "student.embedding_init=pca: embedding_dim 17 is larger than the teacher's hidden size 16"),
        ("svd", {}, "student.embedding_init=svd needs the teacher's wordpiece embedding matrix"),
        ("pca", {}, "student.embedding_init=pca needs the teacher's wordpiece embedding matrix"),
        ("svd", {"teacher_embeddings": nan_teacher}, "holds NaN or inf values"),
        ("file", file_kwargs, "student.embedding_init=file needs a word-vector file; set student.vectors_file"),
        ("file", {"vectors_file": glove}, "needs the teacher's vocabulary strings"),
        ("file", {**file_kwargs, "vectors_file": missing}, f"student.vectors_file {missing} not found; "
                                                           f"set student.vectors_file"),
        ("file", {**file_kwargs, "vectors_file": glove3},
         f"student.vectors_file {glove3} has 3-dimensional vectors but student.embedding_dim is 4; "
         f"set student.embedding_dim=3 or use another file"),
        ("file", {**file_kwargs, "vectors_file": w2v3}, "has 3-dimensional vectors"),
        ("file", {**file_kwargs, "vectors_file": short}, f"student.vectors_file {short} line 3 is malformed"),
        ("file", {**file_kwargs, "vectors_file": not_a_number}, f"{not_a_number} line 3 is malformed"),
        ("file", {**file_kwargs, "vectors_file": infinite}, f"{infinite} line 1 is malformed"),
        ("file", {**file_kwargs, "vectors_file": empty}, f"{empty} holds no vectors"),
    ], strict=True))


@pytest.mark.parametrize("case", ERRORS)
def test_error_is_one_line_saying_what_to_do(case, teacher, tokens, tmp_path):
    method, kwargs, message = error_cases(teacher, tokens, tmp_path)[case]
    with pytest.raises(DistilError, match=re.escape(message)) as raised:
        initial_embeddings(method, teacher_ids=IDS, **{"dim": E, **kwargs})
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("student,std", [("bilstm", 0.2 / 12 ** 0.5),  # U(-0.1, 0.1), Mukherjee & Awadallah 6.1
                                         ("rnn", 0.2 / 12 ** 0.5),
                                         ("transformer-mini", 0.02)])  # BERT's own N(0, 0.02) (Turc et al.)
def test_the_pipeline_gives_every_student_family_its_random_init(student, std):
    from distil.run.pipeline import TeacherVocab, initialise_embeddings
    from distil.students import build_student, word_embeddings
    from distil.students.vocab import TrimmedVocab
    from distil.tasks import get_task
    from tests.conftest import compose_config

    cfg = compose_config(f"student={student}", "student.embedding_init=random")
    vocab = TrimmedVocab(list(range(3, 2003)))
    torch.manual_seed(0)
    model = build_student(cfg.student, len(vocab), 2, get_task("classification"))
    initialise_embeddings(model, cfg.student, cfg.seed, vocab, TeacherVocab(torch.zeros(2003, 8), ["w"] * 2003, 8, []))
    weights = word_embeddings(model).weight.detach()
    assert weights[2:].std().item() == pytest.approx(std, rel=0.03)
    if std != 0.02:
        assert weights[2:].abs().max().item() <= 0.1
    assert torch.all(weights[0] == 0)
    torch.testing.assert_close(weights[1], weights[2:].mean(dim=0))
