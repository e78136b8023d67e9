"""The regression task (STS-B-style scores): its metric, its loss, its limits, and a whole run."""

import json

import pytest
import torch

from distil.tasks import get_task
from distil.training.losses import Targets, squared_error, weighted_loss
from tests.test_cli import distil_in_process

REGRESSION = get_task("regression", pair=True)


class Scored:
    """The part of a prepared split that scoring reads."""

    def __init__(self, gold):
        self.labels = torch.tensor(gold, dtype=torch.float32)


def test_pearson_and_spearman_against_hand_computed_values():
    # x = 1 2 3 4, y = 1 3 2 4: deviations (-1.5 -.5 .5 1.5) and (-1.5 .5 -.5 1.5): r = 4 / 5
    scores = REGRESSION.score(torch.tensor([[1.0], [2.0], [3.0], [4.0]]), Scored([1, 3, 2, 4]), [])
    assert scores == {"pearson": pytest.approx(0.8), "spearman": pytest.approx(0.8)}
    # a monotone but bent prediction: ranks agree (spearman 1), values do not (149 / sqrt(7205 * 5))
    scores = REGRESSION.score(torch.tensor([[1.0], [2.0], [3.0], [100.0]]), Scored([1, 2, 3, 4]), [])
    assert scores["spearman"] == pytest.approx(1.0)
    assert scores["pearson"] == pytest.approx(149 / (7205 * 5) ** 0.5)


def test_squared_error_is_the_mean_over_examples():
    assert squared_error(torch.tensor([[1.0], [3.0]]), torch.tensor([2.0, 1.0])).item() == pytest.approx(2.5)


def test_ce_means_squared_error_on_gold_scores_only():
    """Transfer rows carry NaN for their missing score: they must not reach the supervised loss."""
    outputs = {"logits": torch.tensor([[1.0], [3.0], [9.0]])}
    labels = torch.tensor([2.0, 1.0, float("nan")])
    targets = Targets(labels, torch.tensor([[1.0], [3.0], [5.0]]), has_gold=REGRESSION.has_gold(labels))
    loss = weighted_loss({"ce": 1.0, "logit_mse": 1.0}, outputs, targets, supervised=REGRESSION.supervised_loss)
    # squared error 2.5 on the two gold rows + 1/2 (9 - 5)^2 / 3 rows of logit MSE
    assert loss.item() == pytest.approx(2.5 + 0.5 * 16 / 3)


@pytest.mark.parametrize("schedule,loss", [("hard", "hard"), ("turc-kd", "soft_ce")])
def test_losses_that_need_classes_are_refused(tmp_path, monkeypatch, capsys, schedule, loss):
    code, _, err = distil_in_process(["debug=smoke", "dataset=toy-sts", f"schedule={schedule}"], tmp_path,
                                     monkeypatch, capsys)
    assert code == 2
    assert f"loss '{loss}' cannot train a regression task (a score has no class probabilities)" in err
    assert not (tmp_path / "outputs" / "cache").exists()


def test_regression_runs_end_to_end_and_predicts_a_score(tmp_path, monkeypatch, capsys):
    from distil.cli.predict import main as predict

    code, _, err = distil_in_process(["debug=smoke", "dataset=toy-sts", "schedule=d1", "student=siamese"], tmp_path,
                                     monkeypatch, capsys)
    assert code == 0, err
    path = next((tmp_path / "outputs" / "runs").rglob("metrics.json"))
    metrics = json.loads(path.read_text())
    assert (metrics["status"], metrics["task"], metrics["metric"]) == ("ok", "regression", "pearson")
    assert metrics["data"]["sizes"] == {"labeled": 24, "transfer": 36, "dev": 24, "test": 24}
    assert set(metrics["student"]["test"]) == {"pearson", "spearman"}
    assert "majority_baseline" not in metrics and metrics["teacher"]["diagnostics"]["test"] == {}
    # deterministic on CPU: pinned, so a change in the task's encoding, loss or metric shows
    assert metrics["teacher"]["test"]["pearson"] == pytest.approx(PINNED["teacher_test"], abs=1e-4)
    assert metrics["student"]["test"]["pearson"] == pytest.approx(PINNED["student_test"], abs=1e-4)
    predict([str(path.parent), "chef soup ||| chef bread"])
    score, text = capsys.readouterr().out.rstrip("\n").splitlines()[-1].split("\t")
    assert float(score) == pytest.approx(float(score)) and text == "chef soup ||| chef bread"


PINNED = {"teacher_test": 0.16790, "student_test": 0.13921}  # debug=smoke, toy-sts, d1, siamese (U(-0.1, 0.1) init)
