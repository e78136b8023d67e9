"""Metrics per task as the papers report them, through whole runs:
F1 of the positive class beside accuracy for pairs, MNLI matched and mismatched, the metric
that selects on dev, and where they show (metrics.json, the end-of-run table, distil-report)."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from rich.console import Console
from safetensors.torch import load_file

from distil.run.display import run_table
from distil.tables.report import collect
from tests.test_cli import distil_in_process
from tests.test_data import NLI, write_mnli


def run_metrics(tmp_path, monkeypatch, capsys, *args) -> tuple[dict, Path]:
    code, _, err = distil_in_process(["debug=smoke", *args], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    newest = max(tmp_path.rglob("metrics.json"), key=lambda p: p.stat().st_mtime_ns)
    return json.loads(newest.read_text()), newest.parent


def f1_by_hand(predicted, gold, positive=1) -> float:
    predicted, gold = np.asarray(predicted), np.asarray(gold)
    tp = int(((predicted == positive) & (gold == positive)).sum())
    fp = int(((predicted == positive) & (gold != positive)).sum())
    fn = int(((predicted != positive) & (gold == positive)).sum())
    return 2 * tp / (2 * tp + fp + fn)


def toy_pair_test() -> tuple[list[str], list[int]]:
    from distil.config.schema import CONF_DIR

    lines = (CONF_DIR.parent / "resources" / "toy-pair" / "test.tsv").read_text().splitlines()[1:]
    rows = [line.split("\t") for line in lines if line.strip()]
    return [f"{a} ||| {b}" for a, b, _ in rows], [int(label) for _, _, label in rows]


def test_pair_run_reports_accuracy_and_positive_f1_for_teacher_and_student(tmp_path, monkeypatch, capsys):
    metrics, run_dir = run_metrics(tmp_path, monkeypatch, capsys, "+experiment=smoke-pair")
    assert (metrics["metric"], metrics["metrics"]) == ("accuracy", ["accuracy", "f1"])
    for model in ("teacher", "student"):
        for split in ("dev", "test"):
            assert set(metrics[model][split]) == {"accuracy", "f1"}, (model, split)
    texts, gold = toy_pair_test()

    # the student's test F1, recomputed from the saved student's own predictions
    from distil.serve.student import SavedStudent

    student = SavedStudent(run_dir / "student")
    predicted = [int(student.predict(text).split("\t")[0]) for text in texts]
    assert metrics["student"]["test"]["f1"] == pytest.approx(f1_by_hand(predicted, gold), abs=1e-6)
    assert metrics["student"]["test"]["accuracy"] == pytest.approx(np.mean(np.equal(predicted, gold)), abs=1e-6)

    # the teacher's, from its cached logits on the test split
    targets = next((tmp_path / "outputs" / "cache" / "targets").iterdir())
    logits = torch.cat([load_file(shard)["logits"] for shard in sorted(targets.glob("test-*.safetensors"))])
    assert metrics["teacher"]["test"]["f1"] == pytest.approx(f1_by_hand(logits.argmax(-1).tolist(), gold), abs=1e-6)

    # always the dev majority: F1 = 2p / (1 + p) when it is the positive class (p: its test share), else 0
    share = np.mean(gold)
    assert metrics["majority_baseline"]["test"]["f1"] in (pytest.approx(2 * share / (1 + share)), 0.0)
    assert all(set(stage["dev"]) == {"accuracy", "f1"} for stage in metrics["student"]["stages"])


def test_metric_f1_selects_on_dev_f1(tmp_path, monkeypatch, capsys):
    metrics, _ = run_metrics(tmp_path, monkeypatch, capsys, "+experiment=smoke-pair", "dataset.metric=f1",
                             "trainer.epochs=4")
    assert (metrics["metric"], metrics["metrics"]) == ("f1", ["f1", "accuracy"])
    assert metrics["teacher"]["finetune"]["metric"] == "f1"
    differs = False
    for stage in metrics["student"]["stages"]:
        assert stage["selected_on"] == "dev f1"
        chosen = next(h for h in stage["history"] if h["epoch"] == stage["best_epoch"])
        # what selected the epoch is the restored model's dev F1 and the best over the epochs
        assert chosen["dev"] == pytest.approx(stage["dev"]["f1"], abs=1e-6)
        assert chosen["dev"] == max(h["dev"] for h in stage["history"])
        differs |= stage["dev"]["f1"] != pytest.approx(stage["dev"]["accuracy"], abs=1e-6)
    assert differs  # else this run could not tell accuracy and F1 apart


def test_mnli_mismatched_is_reported_and_never_selects(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    write_mnli(data / "mnli", per_class=20, mismatched_per_class=6)
    args = ["dataset=mnli", f"paths.data_dir={data}", "dataset.split.labeled_per_class=6"]
    first, first_dir = run_metrics(tmp_path, monkeypatch, capsys, *args, f"hydra.run.dir={tmp_path / 'first'}")
    assert first["data"]["sizes"]["test_mismatched"] == 18
    assert first["extra_tests"] == ["test_mismatched"]
    for model in ("teacher", "student"):
        assert set(first[model]["test_mismatched"]) == {"accuracy"}
    assert "test_mismatched" in first["teacher"]["diagnostics"]

    # every mismatched label moved to the next class: no weight, dev or test score changes
    mismatched = data / "mnli" / "dev_mismatched.tsv"
    lines = mismatched.read_text().splitlines()
    moved = [lines[0]] + [
        "\t".join([*fields[:3], NLI[(NLI.index(fields[3]) + 1) % 3], fields[4]])
        for fields in (line.split("\t") for line in lines[1:])]
    mismatched.write_text("\n".join(moved) + "\n")
    second, second_dir = run_metrics(tmp_path, monkeypatch, capsys, *args, f"hydra.run.dir={tmp_path / 'second'}")
    for model in ("teacher", "student"):
        assert second[model]["dev"] == first[model]["dev"] and second[model]["test"] == first[model]["test"]
    assert [s["history"] for s in second["student"]["stages"]] == [s["history"] for s in first["student"]["stages"]]
    weights = [load_file(d / "student" / "model.safetensors") for d in (first_dir, second_dir)]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    # ... while each mismatched score is the saved student's accuracy on that run's labels
    from distil.serve.student import SavedStudent

    for metrics, run_dir, rows in ((first, first_dir, lines[1:]), (second, second_dir, moved[1:])):
        student = SavedStudent(run_dir / "student")
        fields = [row.split("\t") for row in rows]
        right = [student.predict(f"{premise} ||| {hypothesis}").split("\t")[0] == label
                 for _, premise, hypothesis, label, _ in fields]
        assert metrics["student"]["test_mismatched"]["accuracy"] == pytest.approx(np.mean(right), abs=1e-6)


METRICS = {
    "choices": {"teacher": "tiny", "student": "siamese", "schedule": "d1", "dataset": "mnli",
                "transfer_size": "all", "seed": 1},
    "status": "ok", "overrides": [], "metric": "accuracy", "metrics": ["accuracy", "f1"],
    "extra_tests": ["test_mismatched"],
    "teacher": {"params": 4_000_000, "dev": {"accuracy": 0.81, "f1": 0.71}, "test": {"accuracy": 0.82, "f1": 0.72},
                "test_mismatched": {"accuracy": 0.83, "f1": 0.73}},
    "student": {"params": 1_000_000, "dev": {"accuracy": 0.61, "f1": 0.51}, "test": {"accuracy": 0.62, "f1": 0.52},
                "test_mismatched": {"accuracy": 0.63, "f1": 0.53}},
    "majority_baseline": {"test": {"accuracy": 0.4, "f1": 0.57}, "test_mismatched": {"accuracy": 0.3, "f1": 0.46}},
    "speed": {}, "seconds": 60,
}


def test_run_table_shows_every_metric_and_extra_split():
    console = Console(width=200, record=True)
    console.print(run_table(METRICS))
    text = console.export_text()
    for header in ("dev accuracy %", "dev f1 %", "test accuracy %", "test f1 %",
                   "test_mismatched accuracy %", "test_mismatched f1 %"):
        assert header in text
    def cells(model):
        line = next(line for line in text.splitlines() if model in line)
        return [cell.strip() for cell in line.split("│")[2:-1]]

    assert cells("teacher tiny") == ["4.00M", "81.00", "71.00", "82.00", "72.00", "83.00", "73.00", "-"]
    assert cells("majority class") == ["-", "-", "-", "40.00", "57.00", "30.00", "46.00", "-"]


def test_report_has_a_column_per_metric_and_extra_split(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "metrics.json").write_text(json.dumps(METRICS))
    row = collect(tmp_path).iloc[0]
    assert (row["teacher_test"], row["student_dev"], row["student_test"]) == pytest.approx((82, 61, 62))
    assert (row["teacher_test_f1"], row["student_dev_f1"], row["student_test_f1"]) == pytest.approx((72, 51, 52))
    assert (row["teacher_test_mismatched"], row["student_test_mismatched"]) == pytest.approx((83, 63))
    assert (row["teacher_test_mismatched_f1"], row["student_test_mismatched_f1"]) == pytest.approx((73, 53))
