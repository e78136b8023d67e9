"""Inputs that used to be read wrong or silently: the student a pair-regression task defaults to, a
CoNLL sentence of a million words, a class-folder file that is not UTF-8, a binary `distil predict
--file`, and a bad score named by its line in the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distil.config.compose import compose_overrides, compose_run_config
from distil.errors import DistilError
from tests.test_cli import distil_in_process

RESOURCES = Path(__file__).resolve().parent.parent / "distil" / "resources"


# --- the default student of sentence-pair regression ------------------------------------------------

def own_configs(root: Path) -> str:
    """A user's own config directory: an STS dataset of theirs and an experiment that picks the student."""
    (root / "dataset").mkdir(parents=True)
    (root / "experiment").mkdir()
    (root / "dataset" / "my-sts.yaml").write_text(
        f"name: my-sts\ntask: regression\nformat: tsv\npath: {RESOURCES / 'toy-sts'}\n"
        "files: {train: train.tsv, dev: dev.tsv, test: test.tsv}\n"
        "text_column: sentence1\ntext_pair_column: sentence2\nlabel_column: score\n")
    (root / "experiment" / "joined.yaml").write_text("# @package _global_\ndefaults:\n  - override /student: bilstm\n")
    return f"hydra.searchpath=[file://{root}]"


@pytest.mark.parametrize("args,student", [
    (["dataset=toy-sts"], "siamese"),
    (["dataset=my-sts"], "siamese"),
    (["debug=smoke", "dataset=toy-sts"], "siamese"),
    (["dataset=toy-sts", "student=rnn"], "rnn"),
    (["dataset=my-sts", "+experiment=joined"], "bilstm"),
    (["dataset=toy-pair"], "bilstm"),
    (["dataset=toy-sts", "dataset.text_pair_column=null"], "bilstm"),
], ids=["shipped", "own-yaml", "smoke", "command-line-wins", "experiment-wins", "pair-classification",
        "single-text-regression"])
def test_pair_regression_defaults_to_the_siamese_student_unless_one_was_chosen(tmp_path, args, student):
    searchpath = own_configs(tmp_path / "conf")
    assert compose_run_config([searchpath, *args]).student.kind == student
    assert compose_overrides([searchpath, *args], None).student.kind == student  # a table cell's config


def test_a_run_says_its_student_is_the_tasks_default(tmp_path, monkeypatch, capsys):
    seen = {}

    def stop(cfg, run_dir, choices, overrides):
        seen.update(student=cfg.student.kind, overrides=overrides)
        raise DistilError("stopped before any work")

    monkeypatch.setattr("distil.run.pipeline.run", stop)
    code, out, err = distil_in_process(["debug=smoke", "dataset=toy-sts"], tmp_path, monkeypatch, capsys)
    assert code == 2 and seen == {"student": "siamese", "overrides": ["debug=smoke", "dataset=toy-sts",
                                                                       "student=siamese"]}
    [metrics] = (tmp_path / "outputs" / "runs").rglob("metrics.json")
    run_dir = metrics.parent
    assert json.loads(metrics.read_text())["choices"]["student_chosen_by"] == "task"
    assert ("student=siamese: the default student for sentence-pair regression (it reads the two texts apart); "
            "choose another with student=...") in (run_dir / "distil.log").read_text()
    assert "student: siamese" in (run_dir / ".hydra" / "hydra.yaml").read_text()  # distil report's column


def test_a_sweep_whose_cells_default_to_different_students_asks_for_one(tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["-m", "debug=smoke", "dataset=toy-sts,toy"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip() == ("distil: error: this sweep's cells default to different students (siamese for "
                           "sentence-pair regression, the main config's student for the others); choose one for "
                           "every cell with student=...")
    assert not (tmp_path / "outputs").exists()


# --- a bad example is named by its line in the file -------------------------------------------------

SCORES = {  # a file of each format whose bad score (nan) is the third example, on line 6 of the file
    "tsv": "sentence1\tsentence2\tscore\na\tb\t1.0\n\nc\td\t2.0\n\ne\tf\tnan\n",
    "csv": 'sentence1,sentence2,score\n"a, on two\nlines",b,1.0\nc,d,2.0\n\ne,f,nan\n',
    "jsonl": ('{"sentence1": "a", "sentence2": "b", "score": "1.0"}\n\n{"sentence1": "c", "sentence2": "d", '
              '"score": "2.0"}\n\n\n{"sentence1": "e", "sentence2": "f", "score": "nan"}\n'),
}


@pytest.mark.parametrize("fmt", ["tsv", "csv", "jsonl"])
def test_a_bad_score_names_its_line_in_the_file_for_every_format(tmp_path, fmt):
    from distil.data.load import load_raw_splits
    from distil.tasks import make_task
    from tests.test_tasks import dataset

    file = tmp_path / f"train.{fmt}"
    file.write_text(SCORES[fmt])
    cfg = dataset("toy-sts", path=str(tmp_path), format=fmt, files={"train": file.name})
    with pytest.raises(DistilError) as error:
        load_raw_splits(cfg, make_task(cfg), ".")
    assert str(error.value) == (f"dataset 'toy-sts': {file} line 6 has score nan in label column 'score'; a "
                                f"regression task needs a finite number in every row: fix or drop that row")


def test_a_score_that_is_no_number_names_its_line_too(tmp_path):
    from distil.data.load import load_raw_splits
    from distil.tasks import make_task
    from tests.test_tasks import dataset

    file = tmp_path / "train.tsv"
    file.write_text("sentence1\tsentence2\tscore\n\na\tb\thigh\n")
    cfg = dataset("toy-sts", path=str(tmp_path), files={"train": file.name})
    with pytest.raises(DistilError) as error:
        load_raw_splits(cfg, make_task(cfg), ".")
    assert str(error.value) == (f"dataset 'toy-sts': {file} line 3 has 'high' in label column 'score'; a "
                                f"regression task needs a number in every row")


def test_an_unlabeled_line_is_named_by_its_line_blank_lines_counted(tmp_path):
    import shutil

    from omegaconf import OmegaConf

    from distil.config.schema import TransferSizeConfig
    from tests.test_tasks import dataset, task_data_of

    shutil.copytree(RESOURCES / "toy-ner", tmp_path, dirs_exist_ok=True)
    (tmp_path / "extra.txt").write_text("aa\tfine\n\n\nzz\tnot here\n")
    cfg = dataset("toy-ner", path=str(tmp_path), unlabeled_file="extra.txt")
    source = OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": "file", "source": "file"})
    with pytest.raises(DistilError) as error:
        task_data_of(cfg, source, ".", seed=1)
    assert str(error.value).startswith(f"dataset 'toy-ner': {tmp_path / 'extra.txt'} line 4 is in language 'zz'")


# --- distil predict --file: the shared binary check ---------------------------------------------------

def test_predict_refuses_a_binary_file_naming_its_line(tmp_path, capsys):
    from tests.test_errors import predict_error

    file = tmp_path / "texts.txt"
    file.write_bytes(b"a fine text\n\x89PNG\x00\x01\x02\n")
    assert predict_error([tmp_path, "--file", file], capsys) == (
        f"distil predict: error: --file: {file} is not a text file (a NUL byte on line 2); point --file at a UTF-8 "
        f"text file")


# --- class-folder datasets: the shared encoding check ------------------------------------------------

def folders(root: Path, extra: bytes, **settings):
    """A two-class folder dataset of one's own, `extra` the bytes of a third document of class b."""
    from omegaconf import OmegaConf

    from distil.config.schema import DatasetConfig

    for name, text in (("a/1.txt", b"first text\n"), ("b/1.txt", b"second text\n"), ("b/2.txt", extra)):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(text)
    return OmegaConf.merge(OmegaConf.structured(DatasetConfig),
                           {"name": "mine", "format": "folders", "path": str(root), **settings})


def raw_texts(cfg) -> list[str]:
    from distil.data.load import load_raw_splits
    from distil.tasks import make_task

    return load_raw_splits(cfg, make_task(cfg), ".")["train"]["text"][:]


@pytest.mark.parametrize("content,message", [
    (b"caf\xe9 au lait\nsecond line\n", "dataset 'mine': <file> line 1 is not UTF-8 (byte 0xe9); re-save the file as "
                                        "UTF-8, e.g. iconv -f latin1 -t utf-8, or set dataset.encoding_errors=replace "
                                        "to read each such byte as U+FFFD"),
    (b"text\n\x00\x01binary\n", "dataset 'mine': <file> is not a text file (a NUL byte on line 2); point dataset.path "
                                "at a UTF-8 text file"),
], ids=["latin1", "binary"])
def test_a_class_folder_file_that_is_not_utf8_text_is_one_line(tmp_path, content, message):
    cfg = folders(tmp_path, content, encoding_errors="strict")
    with pytest.raises(DistilError) as error:
        raw_texts(cfg)
    assert str(error.value) == message.replace("<file>", str(tmp_path / "b" / "2.txt"))


def test_encoding_errors_replace_reads_a_bad_byte_as_the_replacement_character(tmp_path):
    cfg = folders(tmp_path, b"caf\xe9 au lait\r\nsecond line\n", encoding_errors="replace")
    assert raw_texts(cfg) == ["first text", "second text", "caf\ufffd au lait\nsecond line"]


def test_encoding_errors_is_read_by_folder_datasets_only(tmp_path):
    from distil.data.load import load_raw_splits
    from distil.tasks import make_task
    from tests.test_tasks import dataset

    cfg = dataset("toy", encoding_errors="replace")
    with pytest.raises(DistilError) as error:
        load_raw_splits(cfg, make_task(cfg), ".")
    assert str(error.value) == ("dataset 'toy': dataset.encoding_errors=replace is read by format folders only, and "
                                "this dataset is tsv; re-save its files as UTF-8 and leave dataset.encoding_errors at "
                                "strict")


BBC_TEXTS = "136430883a882963"  # sha256 of BBC News' 2,225 texts as the default job has always read them


def test_bbc_news_reads_the_same_texts_with_its_latin1_byte_replaced():
    import hashlib

    from distil.config.compose import compose_run_config

    cfg = compose_run_config(["dataset=bbc-news"]).dataset
    texts = raw_texts(cfg)
    assert len(texts) == 2225 and sum("\ufffd" in text for text in texts) == 1
    assert hashlib.sha256("\x1e".join(texts).encode()).hexdigest()[:16] == BBC_TEXTS


# --- tagging: a sentence of a million words is cut by words before tokenisation ----------------------

MILLION = 1_000_000


def conll_with_a_huge_sentence(path: Path, words: int) -> Path:
    """A CoNLL file: a short sentence, one of `words` words (a PER entity every 1,000 words), another."""
    huge = "".join("anna B-PER\n" if i % 1000 == 0 else "soup O\n" for i in range(words))
    path.write_text(f"dara B-PER\npraised O\n\n{huge}\ncairo B-LOC\n")
    return path


def test_a_conll_sentence_of_a_million_words_is_cut_by_words_before_tokenisation(tmp_path):
    import datasets
    from transformers import BertTokenizer

    from distil.data.conll import read_conll
    from distil.data.cut import cut_words, readable_chars
    from distil.run.flags import cut_warnings
    from distil.tasks import get_task
    from distil.teacher.load import TINY_VOCAB
    from tests.test_huge_inputs import TokenizerSpy

    sentences = read_conll(conll_with_a_huge_sentence(tmp_path / "train.txt", MILLION))
    assert [len(tokens) for tokens in sentences["tokens"]] == [2, MILLION, 1]
    tokenizer = BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})
    spy, task, names = TokenizerSpy(tokenizer), get_task("tagging"), ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    ds = task.encode_labels(datasets.Dataset.from_dict({**sentences, "language": [""] * 3}), names, "train")
    prepared = task.prepare("train", spy, ds, 32, names)
    assert 0 < spy.longest[0] <= readable_chars(32)  # what the tokenizer was handed: the cut, not 5 MB
    assert prepared.cut == 1 and len(prepared.word_starts[1]) == MILLION
    kept = len(cut_words(sentences["tokens"][1], 32))
    assert kept == 205 and (prepared.word_starts[1][kept:] == -1).all()  # "anna soup ... soup" to 1,024 chars
    whole = task.prepare("train", tokenizer, ds.select([1]).map(lambda row: {"tokens": row["tokens"][:kept],
                                                                             "tags": row["tags"][:kept]}), 32, names)
    assert prepared.ids[1].tolist() == whole.ids[0].tolist()  # the wordpieces the sentence's beginning gives
    assert cut_warnings({"train": prepared.cut}, 32) == [
        "sentences longer than the 1,024 characters a model reads at max_length 32 were cut before tokenisation "
        "(the model reads none of their words past the cut, and scores them as O): train 1"]


@pytest.mark.slow
def test_a_run_on_a_conll_sentence_of_a_million_words_trains_and_counts_the_cut(tmp_path, monkeypatch, capsys):
    import shutil

    data = tmp_path / "ner"
    shutil.copytree(RESOURCES / "toy-ner", data)
    huge = conll_with_a_huge_sentence(tmp_path / "huge.txt", MILLION).read_text()
    with (data / "aa" / "test.txt").open("a") as handle:
        handle.write("\n" + huge)
    code, out, err = distil_in_process(["debug=smoke", "dataset=toy-ner", "student=bilstm-tagger",
                                        f"dataset.path={data}"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    [path] = (tmp_path / "outputs" / "runs").rglob("metrics.json")
    metrics = json.loads(path.read_text())
    assert metrics["data"]["cut"] == {"test": 1}
    cut = "sentences longer than the 2,048 characters a model reads at max_length 64"
    assert any(warning.startswith(cut) for warning in metrics["warnings"])


def test_encoding_errors_leaves_every_table_cells_key_as_it_was():
    """A cell on BBC News (turc-fig8's paper scale) keeps the key it had before the setting existed."""
    from distil.tables.cells import cell_key

    fp32 = "runtime.precision=fp32"  # the default job's precision when the key was taken (now auto)
    key = cell_key([fp32, "dataset=bbc-news", "seed=1"])
    assert key == cell_key([fp32, "dataset=bbc-news", "dataset.encoding_errors=strict", "seed=1"])
    assert key == "8e7db0f1aeb24c9a"  # its key at the commit before
