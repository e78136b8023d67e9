"""A useless model is never reported without a word: non-finite regression scores are refused where
they are read, every run stores the floors a model must beat (majority class, mean predictor, all-O
and word-lookup tagging), and a teacher or student under one, or a student under half its teacher,
carries a warning naming the setting to try."""

import json
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console

from distil.run.display import run_table
from distil.run.flags import student_hint, usefulness_warnings
from distil.tables.report import collect
from distil.tasks import get_task, make_task
from distil.tasks.tagging import valid_iob, word_lookup
from tests.test_cli import distil_in_process
from tests.test_tasks import Predicted, dataset, one_hot

TOY_STS = Path(__file__).resolve().parent.parent / "distil" / "resources" / "toy-sts"


# --- regression scores: finite numbers only --------------------------------------------------------

def sts_copy(root: Path, score: str, every_row: bool = False) -> Path:
    """toy-sts with the score of train.tsv's third example (or of every example) replaced."""
    shutil.copytree(TOY_STS, root)
    lines = (root / "train.tsv").read_text().splitlines()
    for number in range(1, len(lines)) if every_row else [3]:
        lines[number] = lines[number].rsplit("\t", 1)[0] + "\t" + score
    (root / "train.tsv").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("score,shown", [("nan", "nan"), ("inf", "inf"), ("-inf", "-inf"), ("NaN", "NaN")],
                         ids=["nan", "inf", "minus-inf", "NaN"])
def test_distil_data_refuses_a_non_finite_score_naming_the_file_and_row(tmp_path, capsys, score, shown):
    from distil.cli.data import main

    root = sts_copy(tmp_path / "sts", score)
    with pytest.raises(SystemExit) as exit_:
        main(["toy-sts", f"dataset.path={root}"])
    err = capsys.readouterr().err.strip()
    assert exit_.value.code == 2
    assert err == (f"distil data: error: dataset 'toy-sts': {root / 'train.tsv'} line 4 has "
                   f"score {shown} in label column 'score'; a regression task needs a finite number in every row: "
                   f"fix or drop that row")


def test_every_score_nan_is_the_same_error_not_the_learning_rate(tmp_path, monkeypatch, capsys):
    root = sts_copy(tmp_path / "sts", "nan", every_row=True)
    code, out, err = distil_in_process(["debug=smoke", "dataset=toy-sts", f"dataset.path={root}"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 2
    assert f"{root / 'train.tsv'} line 2 has score nan" in err
    assert "lr" not in err and len(err.strip().splitlines()) == 1


def test_a_constant_prediction_has_undefined_correlation_and_no_scipy_warning():
    task = get_task("regression")
    split = Predicted([0.0, 1.0, 2.0, 5.0])
    split.labels = split.labels.float()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # scipy's ConstantInputWarning would fail here
        scores = task.score(torch.full((4, 1), 2.5), split, [])
    assert list(scores) == ["pearson", "spearman"] and all(np.isnan(v) for v in scores.values())


# --- floors ---------------------------------------------------------------------------------------

def test_the_majority_floor_is_scored_on_accuracy_whatever_metric_selects():
    task = make_task(dataset("toy", metric="mcc", metrics=["mcc"]))
    dev = Predicted([1, 1, 1, 0])
    floors = task.floors(None, dev, {"dev": dev}, ["0", "1"])
    assert floors == {"majority_class": {"label": "1", "dev": {"mcc": 0.0, "accuracy": 0.75}}}
    # every score carries accuracy, the number the floor is compared on
    assert task.score(one_hot([1, 0, 1, 0]), dev, ["0", "1"]) == pytest.approx({"mcc": 1 / 3 ** 0.5, "accuracy": 0.75})


def cola_like(teacher_accuracy: float, student_accuracy: float) -> list[str]:
    floors = {"majority_class": {"label": "1", "dev": {"mcc": 0.0, "accuracy": 0.70},
                                 "test": {"mcc": 0.0, "accuracy": 0.691}}}
    teacher = {"labeled": {"mcc": 0.95}, "dev": {"mcc": 0.30, "accuracy": 0.72},
               "test": {"mcc": 0.35, "accuracy": teacher_accuracy}}
    student = {"dev": {"mcc": 0.20, "accuracy": 0.71}, "test": {"mcc": 0.25, "accuracy": student_accuracy}}
    return usefulness_warnings("mcc", floors, teacher, student, "try X")


def test_a_teacher_and_student_over_mcc_0_but_under_the_majority_accuracy_are_flagged():
    assert cola_like(0.656, 0.641) == [
        "teacher below the majority class (test accuracy 65.60 vs 69.10); it fits its own labeled set (95.00) but "
        "not held-out data: give it more labeled examples (dataset.split.labeled_count) or choose another teacher "
        "(teacher=...)",
        "student below the majority class (test accuracy 64.10 vs 69.10); try X",
    ]
    assert cola_like(0.70, 0.695) == []


def test_a_student_under_half_its_teacher_is_flagged_with_the_siamese_hint():
    task = get_task("regression", pair=True)
    floors = get_task("regression").floors(Predicted([1.0, 3.0]), None, {"dev": None, "test": None}, [])
    assert floors["mean_predictor"]["prediction"] == 2.0
    assert floors["mean_predictor"]["test"] == {"pearson": None, "spearman": None}
    teacher = {"labeled": {"pearson": 0.9}, "dev": {"pearson": 0.8}, "test": {"pearson": 0.811}}
    student = {"dev": {"pearson": 0.35}, "test": {"pearson": 0.114}}
    hint = student_hint(task, reads_pairs_apart=False, student_kind="bilstm")
    assert usefulness_warnings("pearson", floors, teacher, student, hint) == [
        "student keeps only 14.1% (11.40 vs 81.10) of the teacher's test pearson; the student 'bilstm' reads the "
        "two texts joined: try student=siamese, which reads them apart, or a larger transfer set (transfer_size=...)"]
    student = {"dev": {"pearson": float("nan")}, "test": {"pearson": -0.1}}  # a constant student on dev
    assert usefulness_warnings("pearson", floors, teacher, student, "try X") == [
        "student below the mean predictor (dev pearson undefined, not above 0.00, test pearson -10.00, "
        "not above 0.00); try X",
        "student keeps only -12.3% (-10.00 vs 81.10) of the teacher's test pearson; try X"]


def test_the_run_table_shows_the_floors_and_no_nan():
    metrics = {
        "choices": {"teacher": "tiny", "student": "bilstm", "schedule": "d1", "dataset": "toy-sts"},
        "metric": "pearson", "metrics": ["pearson"],
        "teacher": {"params": 2, "dev": {"pearson": float("nan")}, "test": {"pearson": float("nan")}},
        "student": {"params": 1, "dev": {"pearson": 0.2}, "test": {"pearson": 0.1}},
        "floors": {"mean_predictor": {"prediction": 2.5, "dev": {"pearson": None}, "test": {"pearson": None}}},
    }
    console = Console(width=200, record=True)
    console.print(run_table(metrics))
    text = console.export_text()
    assert "nan" not in text.lower() and "keeps" not in text
    row = next(line for line in text.splitlines() if "mean predictor" in line)
    assert [cell.strip() for cell in row.split("│")[2:-1]] == ["-", "undefined", "undefined", "-"]


# --- tagging: valid IOB, all-O and word-lookup floors ----------------------------------------------

def test_tags_are_decoded_as_valid_iob2():
    assert valid_iob(["O", "I-PER", "I-PER", "B-LOC", "I-PER", "I-LOC"]) == [
        "O", "B-PER", "I-PER", "B-LOC", "B-PER", "B-LOC"]
    assert valid_iob(["I-ORG", "B-ORG", "I-ORG"]) == ["B-ORG", "B-ORG", "I-ORG"]


def test_the_word_lookup_takes_each_words_most_frequent_tag():
    names = ["B-PER", "I-PER", "O"]
    lookup = word_lookup([["Ann", "runs"], ["Ann", "Lee"], ["Ann"]], [[0, 2], [2, 0], [0]], names)
    assert lookup == {"Ann": "B-PER", "runs": "O", "Lee": "B-PER"}


def test_a_tagging_run_stores_its_floors_and_flags_an_underfit_teacher(tmp_path, monkeypatch, capsys):
    code, out, err = distil_in_process(["debug=smoke", "dataset=toy-ner", "student=bilstm-tagger"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    floors = metrics["floors"]
    assert list(floors) == ["all_O", "word_lookup"] and floors["all_O"]["test"]["f1"] == 0.0
    assert floors["word_lookup"]["test"]["f1"] == 1.0  # toy-ner's entity words recur in every split
    teacher_flag = next(w for w in metrics["warnings"] if w.startswith("teacher below a word-lookup tagger"))
    assert "on its own labeled set, so it is underfit: train it longer" in teacher_flag
    assert "warning: teacher below a word-lookup tagger" in " ".join(out.split())
    report = collect(tmp_path / "outputs" / "runs")  # distil report's table: a column of warnings
    assert "teacher below a word-lookup tagger" in report["warnings"].iloc[0]


# --- the user's own options in distil --help --------------------------------------------------------

def test_help_lists_the_users_own_options(tmp_path, monkeypatch, capsys):
    (tmp_path / "myconf" / "dataset").mkdir(parents=True)
    (tmp_path / "myconf" / "dataset" / "mine.yaml").write_text("name: mine\n")
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "myconf"))
    code, out, err = distil_in_process(["--help"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert f"Your own options (DISTIL_CONFIG_DIR={tmp_path / 'myconf'}), beside the groups below:\n" \
           f"  dataset: mine\n" in out
