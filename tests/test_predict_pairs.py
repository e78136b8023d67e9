"""A pair (or STS) student answers pairs only, and `distil predict` says what a folder or --file is when it
is no student or no text file: one line naming the expected format or the right thing to pass."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import BertTokenizer

from distil.errors import DistilError
from distil.serve.api import Student
from distil.teacher.load import TINY_VOCAB
from tests.test_huge_inputs import tiny_student

PAIR_STUDENTS = [("siamese", "pair"), ("bilstm", "regression")]  # read apart, and an STS scorer read together


@pytest.fixture(scope="module")
def students(tmp_path_factory):
    """{task: a tiny pair student's folder}, written once for the module."""
    tokenizer = BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})
    root = tmp_path_factory.mktemp("pairs")
    return {task: tiny_student(root / task, tokenizer, name, task) for name, task in PAIR_STUDENTS}


def predict_error(args, capsys) -> str:
    from distil.cli.predict import main as predict

    with pytest.raises(SystemExit) as exit_:
        predict([str(arg) for arg in args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    return err.strip()


NOT_PAIRS = [  # (id, arguments after the student, --file content or None, the message; <file>: the --file)
    ("one-sentence", ["chef soup"], None,
     "text 1 is not a pair; this student reads sentence pairs: give 'first ||| second'"),
    ("separator-alone", ["|||"], None,
     "text 1 is not a pair; this student reads sentence pairs: give 'first ||| second'"),
    ("second-blank", ["a cat |||  "], None,
     "text 1 is not a pair; this student reads sentence pairs: give 'first ||| second'"),
    ("three-sentences", ["a ||| b ||| c"], None,
     "text 1 holds '|||' 2 times, but it separates a pair's two sentences: give it once, and no '|||' inside a "
     "sentence"),
    ("file-one-sentence", [], "a cat\tsits down\n\nchef soup\n",
     "--file <file> line 3 is not a pair; this student reads sentence pairs: give the two sentences tab-separated, "
     "or 'first ||| second'"),
    ("file-separator-alone", [], "|||\n",
     "--file <file> line 1 is not a pair; this student reads sentence pairs: give the two sentences tab-separated, "
     "or 'first ||| second'"),
    ("file-empty-side", [], "a cat\t\n",
     "--file <file> line 1 is not a pair; this student reads sentence pairs: give the two sentences tab-separated, "
     "or 'first ||| second'"),
    ("file-three-columns", [], "1\ta cat\tsits down\n",
     "--file <file> line 1 has 3 tab-separated columns; a pair is its two sentences, tab-separated (or "
     "'first ||| second')"),
]


@pytest.mark.parametrize("task", [task for _, task in PAIR_STUDENTS])
@pytest.mark.parametrize("args,content,message", [case[1:] for case in NOT_PAIRS], ids=[case[0] for case in NOT_PAIRS])
def test_a_pair_student_refuses_what_is_not_a_pair(students, tmp_path, capsys, task, args, content, message):
    """A label or a score for one sentence was printed with exit 0: now one line naming the format."""
    file = tmp_path / "pairs.txt"
    if content is not None:
        file.write_text(content)
        args = [*args, "--file", file]
    assert predict_error([students[task], *args], capsys) == (f"distil predict: error: "
                                                             f"{message.replace('<file>', str(file))}")


def test_pairs_in_every_form_are_answered(students, tmp_path, capsys):
    from distil.cli.predict import main as predict

    file = tmp_path / "pairs.txt"
    file.write_text("a cat\tsits down\na dog ||| runs\n")
    assert predict([str(students["regression"]), "a cat ||| sits down", "--file", str(file)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[-1] for line in lines] == ["a cat ||| sits down", "a cat ||| sits down", "a dog ||| runs"]
    assert lines[0].split("\t")[0] == lines[1].split("\t")[0]  # a tab and '|||' are the same pair


def test_the_python_api_refuses_what_is_not_a_pair(students):
    student = Student.load(students["pair"])
    assert len(student.predict([("a cat", "sits down"), "a dog ||| runs"])) == 2
    for texts, message in [(["one sentence"], "text 1 is not a pair; give (first, second) or 'first ||| second'"),
                           ([("a cat", "  ")], "text 1 is not a pair; give (first, second) or 'first ||| second'"),
                           ([("a ||| b", "c")], "text 1 holds '|||' 2 times, but it separates a pair's two "
                                                "sentences: give it once, and no '|||' inside a sentence")]:
        with pytest.raises(DistilError) as error:
            student.predict(texts)
        assert str(error.value) == message


def test_file_that_is_a_directory_or_missing(students, tmp_path, capsys):
    """A directory was reported as not existing."""
    assert predict_error([students["pair"], "--file", tmp_path], capsys) == (
        f"distil predict: error: --file {tmp_path} is a directory; give a text file, one text per line")
    missing = tmp_path / "nope.txt"
    assert predict_error([students["pair"], "--file", missing], capsys) == (
        f"distil predict: error: --file {missing} does not exist; check the path")


def cache_folder(root: Path, kind: str, hugging_face_model: bool) -> Path:
    """A folder of distil's cache as the store writes it: a manifest naming its kind, and for a teacher a
    Hugging Face model's config.json and weights."""
    folder = root / kind / "tiny-0123456789abcdef"
    folder.mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"key": folder.name, "kind": kind, "format": 1}))
    if hugging_face_model:
        (folder / "config.json").write_text(json.dumps({"model_type": "bert", "hidden_size": 32}))
        (folder / "model.safetensors").write_bytes(b"weights")
    return folder


def test_a_cache_artifact_is_named_not_called_an_incomplete_student(tmp_path, capsys):
    """A fine-tuned teacher was 'an incomplete student (missing: vocab.json, tokenizer)', to rerun training."""
    teacher = cache_folder(tmp_path, "teachers", hugging_face_model=True)
    assert predict_error([teacher, "soup"], capsys) == (
        f"distil predict: error: {teacher} is a fine-tuned teacher from distil's cache, not a saved student; pass a "
        f"run directory written by `distil` (outputs/runs/<date>/<time>) or its student/ folder (a teacher loads "
        f"with transformers' from_pretrained)")
    targets = cache_folder(tmp_path, "targets", hugging_face_model=False)
    assert predict_error([targets, "soup"], capsys) == (
        f"distil predict: error: {targets} is an artifact of distil's cache (targets), not a saved student; pass a "
        f"run directory written by `distil` (outputs/runs/<date>/<time>) or its student/ folder")
    model = tmp_path / "hf-model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "bert"}))
    assert predict_error([model, "soup"], capsys).startswith(
        f"distil predict: error: {model} is a Hugging Face model folder, not a saved student; pass a run directory")
