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
