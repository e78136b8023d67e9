"""Texts of any length and one encoding check for every reader.

Every reader takes a text of any length (Python's csv stopped at 131,072 characters), and every text
is cut by characters (distil/data/cut.py) before a tokenizer sees it: a tokenizer given a whole 100 MB
line took 4.6 GB before it truncated. The tests give 1-5 MB texts and check what the tokenizer was
handed, not the memory itself (a 100 MB line is too slow for the default suite; measured by hand: 0.7 GB
at most for `distil predict --file` on a 100 MB line, 0.5 GB of it torch and transformers)."""

from __future__ import annotations

import copy
import csv
import gzip
import json
import shutil
from pathlib import Path

import datasets
import pytest
import torch
from omegaconf import OmegaConf
from transformers import AutoTokenizer, BertTokenizer

from distil.config.schema import CONF_DIR, StudentConfig
from distil.data.cut import cut_for_tokenizer, readable_chars
from distil.errors import DistilError
from distil.pretrain.corpus import tokenize
from distil.serve.api import Student
from distil.serve.backends import make_backend
from distil.serve.student import SavedStudent, write_student
from distil.students import build_student
from distil.students.vocab import TrimmedVocab
from distil.tasks import get_task
from distil.tasks.text import encode_user_text, prepare_texts, wordpiece_encoder, words_of
from distil.teacher.load import TINY_VOCAB
from tests.conftest import compose_config, raw_splits_of
from tests.test_cli import cache_files, distil_in_process

MAX_LENGTH = 32  # wordpieces the students below read
WORDS = "soup bread ball game chip cpu the goal team a ".split()
CSV_DEFAULT_LIMIT = 131_072


def long_text(chars: int) -> str:
    """Words, `chars` characters of them: a document as long as asked."""
    repeated = " ".join(WORDS * (chars // len(" ".join(WORDS)) + 1))
    return repeated[:chars].strip()


class TokenizerSpy:
    """A tokenizer that records the longest text it is handed (each word of a split sentence counted,
    with the spaces between), its Rust backend's too (what a bag student's fast path calls)."""

    def __init__(self, tokenizer, longest: list[int] | None = None):
        self.__dict__.update(tokenizer=tokenizer, longest=longest if longest is not None else [0])

    def record(self, value) -> None:
        if isinstance(value, str):
            self.longest[0] = max(self.longest[0], len(value))
        elif isinstance(value, list | tuple) and self.split_into_words and all(isinstance(v, str) for v in value):
            self.longest[0] = max(self.longest[0], len(" ".join(value)))  # one sentence, as its words
        elif isinstance(value, list | tuple):
            for item in value:
                self.record(item)

    def __call__(self, text, text_pair=None, **options):
        self.split_into_words = options.get("is_split_into_words", False)
        self.record(text)
        self.record(text_pair)
        return self.tokenizer(text, text_pair, **options)

    def encode_batch_fast(self, texts):
        self.split_into_words = False
        self.record(texts)
        return self.tokenizer.encode_batch_fast(texts)

    @property
    def backend_tokenizer(self):
        backend = getattr(self.tokenizer, "backend_tokenizer", None)
        return None if backend is None else TokenizerSpy(backend, self.longest)

    def __deepcopy__(self, memo):
        return TokenizerSpy(copy.deepcopy(self.tokenizer, memo), self.longest)

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.__dict__["tokenizer"], name)

    def __len__(self):
        return len(self.tokenizer)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})


# --- every reader takes a text of any length --------------------------------------------------------

def write_table(path: Path, fmt: str, rows: list[tuple[str, str]]) -> None:
    if fmt == "jsonl":
        path.write_text("".join(json.dumps({"text": text, "label": label}) + "\n" for text, label in rows))
        return
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, **({"delimiter": "\t", "quoting": csv.QUOTE_NONE} if fmt == "tsv" else {}))
        writer.writerow(["text", "label"])
        writer.writerows(rows)


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_a_1mb_text_loads(tmp_path, fmt):
    """A 1 MB document is one valid example: Python's csv stopped at 131,072 characters a field."""
    document = long_text(1_000_000).replace(" game", ", game")  # commas: csv quotes the field
    write_table(tmp_path / f"train.{fmt}", fmt, [("bread soup", "food"), (document, "sports"), ("chip", "tech")])
    cfg = compose_config("debug=smoke", f"dataset.path={tmp_path}", f"dataset.format={fmt}")
    cfg.dataset.files = {"train": f"train.{fmt}"}
    train = raw_splits_of(cfg.dataset, cfg.paths.data_dir)["train"]
    assert train["text"][:] == ["bread soup", document, "chip"] and len(document) > 990_000
    assert csv.field_size_limit() == CSV_DEFAULT_LIMIT  # lifted while reading only


def test_a_1mb_line_of_an_unlabeled_file_and_of_a_corpus_is_read_whole(tmp_path):
    from distil.data.load import read_text_lines
    from distil.pretrain.corpus import read_lines

    document = long_text(1_000_000)
    with gzip.open(tmp_path / "corpus.txt.gz", "wt") as handle:
        handle.write(f"a short line\n{document}\n")
    assert read_text_lines(tmp_path / "corpus.txt.gz") == ["a short line", document]
    assert read_lines("pretrain.corpus", str(tmp_path / "corpus.txt.gz"), ".", None) == ["a short line", document]


# --- the tokenizer never sees more than the cut ------------------------------------------------------

def test_the_cut_keeps_what_the_model_reads(tokenizer):
    """Cut by characters, a text gives the wordpieces the whole text gives at max_length."""
    text = long_text(200_000)
    cut = cut_for_tokenizer(text, MAX_LENGTH)
    assert len(cut) == readable_chars(MAX_LENGTH) == MAX_LENGTH * 32 and text.startswith(cut)
    assert cut_for_tokenizer("a short text", MAX_LENGTH) == "a short text"
    whole = tokenizer(text, truncation=True, max_length=MAX_LENGTH)["input_ids"]
    assert tokenizer(cut, truncation=True, max_length=MAX_LENGTH)["input_ids"] == whole
    assert words_of(text, MAX_LENGTH) == text.split()[:MAX_LENGTH]


def test_training_and_pretraining_tokenise_only_the_cut(tokenizer):
    big, other = long_text(5_000_000), long_text(2_000_000)
    spy = TokenizerSpy(tokenizer)
    ds = datasets.Dataset.from_dict({"text": [big, "soup"], "text_pair": [other, "bread"]})
    prepared = prepare_texts("train", spy, ds, MAX_LENGTH, pair=True, labels=torch.zeros(2, dtype=torch.int64))
    assert 0 < spy.longest[0] <= readable_chars(MAX_LENGTH)
    expected = tokenizer(big[:500], other[:500], truncation=True, max_length=MAX_LENGTH)["input_ids"]
    assert prepared.ids[0].tolist() == expected  # the same wordpieces as the whole texts
    corpus_spy = TokenizerSpy(tokenizer)
    sentences = tokenize(corpus_spy, [big, "soup"], MAX_LENGTH)
    assert 0 < corpus_spy.longest[0] <= readable_chars(MAX_LENGTH) and len(sentences[0]) == MAX_LENGTH
    serve_spy = TokenizerSpy(tokenizer)
    encode_user_text(serve_spy, f"{big} ||| {other}", MAX_LENGTH, pair=True, apart=True)
    wordpiece_encoder(serve_spy, MAX_LENGTH)([big])
    assert 0 < serve_spy.longest[0] <= readable_chars(MAX_LENGTH)


def tiny_student(out: Path, tokenizer, name: str, task_name: str) -> Path:
    """A tiny random student of conf/student/<name>.yaml, written as a run writes it."""
    settings = {key: value for key, value in OmegaConf.to_container(OmegaConf.load(CONF_DIR / "student" /
                                                                                   f"{name}.yaml")).items()
                if key != "description"}
    settings.update(embedding_dim=8, hidden_size=8, dropout=0.0)
    cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), settings)
    task = get_task(task_name, pair=task_name == "regression")
    vocab = TrimmedVocab(list(range(5, len(TINY_VOCAB))))
    labels = ["B-X", "I-X", "O"] if task.per_token else ["score"] if task_name == "regression" else ["a", "b"]
    torch.manual_seed(0)
    model = build_student(cfg, len(vocab), task.num_outputs(labels), task, 12)
    write_student(out, model, vocab, tokenizer, student=OmegaConf.to_container(cfg), task=task,
                  labels=task.output_names(labels), teacher_hidden_size=12, representation_head=False,
                  projection="side", max_length=MAX_LENGTH)
    return out


STUDENTS = [("bilstm", "classification"), ("static", "classification"), ("static-words", "classification"),
            ("bilstm-tagger", "tagging"), ("siamese", "pair"), ("bilstm", "regression")]


@pytest.mark.parametrize("name,task_name", STUDENTS, ids=[f"{name}-{task}" for name, task in STUDENTS])
def test_serving_tokenises_only_the_cut(tmp_path, tokenizer, name, task_name):
    """Every path of a saved student (padded batches, bags, words, one request, a sentence to tag, a pair
    read apart or together) hands its tokenizer the cut, and predicts what the text's beginning gives."""
    saved = SavedStudent(tiny_student(tmp_path / "student", tokenizer, name, task_name), device="cpu")
    saved.tokenizer = TokenizerSpy(saved.tokenizer)
    if saved.bags:
        saved._bag_tokens, saved._student_ids = saved._bag_reader()
    student = Student(saved, make_backend(saved, tmp_path / "student", "torch"))
    big = long_text(5_000_000)
    text = f"{big} ||| {big}" if student.inputs == "pair" else big
    beginning = f"{big[:200]} ||| {big[:200]}" if student.inputs == "pair" else big[:200]
    predicted = student.predict([text, "soup ||| bread" if student.inputs == "pair" else "soup"])
    assert saved.tokenizer.longest[0] <= readable_chars(MAX_LENGTH)
    one = student.predict(text)  # one request: a bag student's own fast path
    assert saved.tokenizer.longest[0] <= readable_chars(MAX_LENGTH)
    if task_name == "tagging":  # a tag per word of the cut: the words past it are past max_length
        assert len(predicted[0]) == len(cut_for_tokenizer(big, MAX_LENGTH).split())
        assert predicted[0][:20] == student.predict([beginning])[0][:20]
    else:  # the model reads what it reads of the text's beginning (a score: up to a batch's padding)
        assert [part.tolist() for part in saved.encode_batch([text], one_request=False)] == \
            [part.tolist() for part in saved.encode_batch([beginning], one_request=False)]
        assert predicted[0] == pytest.approx(one[0], abs=1e-5)
        assert predicted[0] == pytest.approx(student.predict([beginning, "soup ||| bread"])[0], abs=1e-5)


def test_predict_on_a_5mb_line(tmp_path, tokenizer, monkeypatch, capsys):
    """`distil predict --file` on one long line: a label, the text echoed whole, the tokenizer given the cut."""
    from distil.cli.predict import main as predict

    student = tiny_student(tmp_path / "student", tokenizer, "bilstm", "classification")
    spies = []
    load = AutoTokenizer.from_pretrained

    def spied(*args, **kwargs):
        spies.append(TokenizerSpy(load(*args, **kwargs)))
        return spies[-1]

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", spied)
    big = long_text(5_000_000)
    (tmp_path / "texts.txt").write_text(f"soup\n{big}\n")
    assert predict([str(student), "--file", str(tmp_path / "texts.txt")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[-1] for line in lines] == ["soup", big]
    assert lines[1].split("\t")[0] in ("a", "b")
    assert len(spies) == 1 and 0 < spies[0].longest[0] <= readable_chars(MAX_LENGTH)


# --- one encoding and binary check for every reader -------------------------------------------------

LATIN1 = "<file> line 2 is not UTF-8 (byte 0xe9); re-save the file as UTF-8, e.g. iconv -f latin1 -t utf-8"
NUL = "<file> is not a text file (a NUL byte on line 2); point {setting} at a UTF-8 text file"
BAD_BYTES = {"latin1": b"caf\xe9 O\n", "binary": b"\x00\x01\x02\xff O\n"}


@pytest.mark.parametrize("kind", ["latin1", "binary"])
def test_a_conll_file_that_is_not_utf8_text_is_one_line(tmp_path, kind):
    """CoNLL files are read as every data file is: a UnicodeDecodeError traceback before."""
    data = tmp_path / "toy-ner"
    shutil.copytree(Path(__file__).resolve().parent.parent / "distil" / "resources" / "toy-ner", data)
    bad = data / "bb" / "dev.txt"
    bad.write_bytes(b"anna B-PER\n" + BAD_BYTES[kind] + bad.read_bytes())
    cfg = compose_config("debug=smoke", "dataset=toy-ner", f"dataset.path={data}")
    message = {"latin1": LATIN1,
               "binary": "<file> is not a text file (a NUL byte on line 2); point dataset.files at a UTF-8 text file",
               }[kind].replace("<file>", str(bad))
    with pytest.raises(DistilError) as error:
        raw_splits_of(cfg.dataset, cfg.paths.data_dir)
    assert str(error.value) == f"dataset 'toy-ner': {message}"


def test_a_conll_tag_column_a_line_lacks_is_one_line(tmp_path):
    (tmp_path / "train.txt").write_text("anna NNP B-PER\nvisits VBZ O\n")
    from distil.data.conll import read_conll

    with pytest.raises(DistilError) as error:
        read_conll(tmp_path / "train.txt", tag_column=3)
    assert str(error.value) == (f"{tmp_path / 'train.txt'}:1: the line has 3 columns, so it has no column 3 "
                                f"(dataset.conll_tag_column; 0 is the first, -1 the last); set "
                                f"dataset.conll_tag_column to the tag's column")


@pytest.mark.parametrize("setting,student", [("pretrain.corpus", "transformer-tiny"), ("agnostic.corpus", "sra")],
                         ids=["mlm", "sra"])
@pytest.mark.parametrize("kind", ["latin1", "binary", "not-gzip"])
def test_a_corpus_that_is_not_utf8_text_is_one_line(tmp_path, monkeypatch, capsys, setting, student, kind):
    """`distil pretrain` reads its corpus as every data file is read: exit 2, one line, nothing cached."""
    corpus = tmp_path / ("corpus.txt.gz" if kind == "not-gzip" else "corpus.txt")
    corpus.write_bytes(b"a sentence\n" + BAD_BYTES.get(kind, b"plain text, not gzip\n"))
    code, _, err = distil_in_process(["pretrain", "debug=smoke", f"student={student}", f"{setting}={corpus}"],
                                     tmp_path, monkeypatch, capsys)
    messages = {"latin1": LATIN1, "binary": NUL.format(setting=setting),
                "not-gzip": "<file> is not a readable gzip file (Not a gzipped file (b'a ')); compress it again "
                            "with gzip, or give the uncompressed file"}
    assert code == 2
    assert err.strip().splitlines()[-1] == (f"distil pretrain: error: {setting}: "
                                            f"{messages[kind].replace('<file>', str(corpus))}")
    assert cache_files(tmp_path / "outputs") == []


def test_an_unlabeled_file_that_is_not_utf8_is_one_line(tmp_path):
    from distil.data.load import load_unlabeled_file
    from distil.tasks import make_task

    (tmp_path / "unlabeled.txt").write_bytes(b"a sentence\ncaf\xe9 au lait\n")
    cfg = compose_config("debug=smoke", f"dataset.path={tmp_path}", "dataset.unlabeled_file=unlabeled.txt")
    with pytest.raises(DistilError) as error:
        load_unlabeled_file(cfg.dataset, make_task(cfg.dataset), cfg.paths.data_dir)
    message = LATIN1.replace("<file>", str(tmp_path / "unlabeled.txt"))
    assert str(error.value) == f"dataset 'toy': {message}"
