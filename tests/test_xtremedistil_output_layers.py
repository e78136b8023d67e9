"""XtremeDistil's two output layers: the logit loss trains W^r (eq. 3, r^s = W^r h + b^r) and
the cross-entropy trains W^s (eq. 1, softmax(h W^s)); §5.2: stage 2 learns "W^s and <W^r, b^r>", and
Table 4 unfreezes "Linear (W^r)" in stage 2 and "Softmax (W^s)" in stage 3. Every XtremeDistil
schedule with a representation head keeps them apart by default; schedule.shared_output_layer=true is
the one shared layer this runner had before."""

import json

import numpy as np
import pytest
import torch

from distil.errors import DistilError
from distil.run.schedule import StageTrainer, needs_teacher_hidden, unfreezing_groups, validate_schedule
from distil.students import build_student, count_params, param_counts
from distil.students.heads import PredictingWithScores, predicting_view
from distil.tasks import get_task
from distil.training.losses import Targets, weighted_loss
from tests.test_cli import distil_in_process
from tests.test_schedules import evaluator, fake_splits

CLASSIFICATION = get_task("classification")
HIDDEN, LABELS = 8, 3  # the fake teacher's hidden size, the classes
XTREMEDISTIL = ["d2", "d3.1", "d3.2", "d4.1", "d4.2"]  # the schedules with a representation head


def student(cfg, seed=0):
    torch.manual_seed(seed)
    return build_student(cfg.student, vocab_size=16, num_labels=LABELS, task=CLASSIFICATION,
                         teacher_hidden_size=HIDDEN, representation_head=needs_teacher_hidden(cfg.schedule),
                         projection=cfg.schedule.projection, shared_output=cfg.schedule.shared_output_layer)


def batch():
    ids = torch.tensor([[2, 5, 7, 3], [4, 4, 6, 0]])
    return ids, (ids > 0).long()


def targets():
    return Targets(torch.tensor([1, -1]), torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, -1.0]]),
                   has_gold=torch.tensor([True, False]))


def grads(model, losses):
    model.zero_grad()
    weighted_loss(losses, model(*batch()), targets()).backward()
    return {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}


@pytest.mark.parametrize("name", XTREMEDISTIL)
def test_w_r_and_w_s_are_two_layers_by_default(smoke_cfg, name):
    cfg = smoke_cfg(f"schedule={name}")
    assert cfg.schedule.shared_output_layer is False
    model = student(cfg)
    w_s, w_r = model.output.weight, model.regression.weight  # d2-d4.x: the projection in the path
    assert w_s.shape == w_r.shape == (LABELS, HIDDEN)
    assert w_s.data_ptr() != w_r.data_ptr() and not torch.equal(w_s, w_r)
    out = model.eval()(*batch())
    assert not torch.equal(out["logits"], out["scores"])
    # both read the same projected vector (one dropout, off in eval)
    torch.testing.assert_close(out["scores"], model.regression(out["representation"]))
    torch.testing.assert_close(out["logits"], model.output(out["representation"]))


@pytest.mark.parametrize("name", XTREMEDISTIL)
def test_shared_output_layer_keeps_one_layer(smoke_cfg, name):
    model = student(smoke_cfg(f"schedule={name}", "schedule.shared_output_layer=true"))
    assert model.regression is None and "scores" not in model.eval()(*batch())
    assert [n for n, _ in model.layer_groups()] == ["classifier", "projection", "bilstm", "embeddings"]


def test_the_logit_loss_trains_w_r_and_the_cross_entropy_w_s(smoke_cfg):
    separate = student(smoke_cfg("schedule=d4.2"))
    assert {"regression.weight", "regression.bias"} <= grads(separate, {"logit_mse": 1.0})
    assert not {"output.weight", "output.bias"} & grads(separate, {"logit_mse": 1.0})
    assert {"output.weight", "output.bias"} <= grads(separate, {"ce": 1.0})
    assert not {"regression.weight", "regression.bias"} & grads(separate, {"ce": 1.0})
    shared = student(smoke_cfg("schedule=d4.2", "schedule.shared_output_layer=true"))
    assert {"output.weight", "output.bias"} <= grads(shared, {"logit_mse": 1.0}) & grads(shared, {"ce": 1.0})


def test_logit_loss_value_reads_w_r(smoke_cfg):
    """0.5 * mean over classes of (r^s - logit_t)^2 on the transfer row (teacher_rows: transfer)."""
    model = student(smoke_cfg("schedule=d4.2")).eval()
    out = model(*batch())
    expected = 0.5 * (out["scores"][1] - targets().teacher_logits[1]).pow(2).mean()
    loss = weighted_loss({"logit_mse": 1.0}, out, targets(), teacher_rows="transfer")
    torch.testing.assert_close(loss, expected)
    # pinned: seed 0, the smoke bilstm, these two rows; with one shared layer the loss reads W^s's logits
    assert loss.item() == pytest.approx(1.72237396, rel=1e-5)
    shared = student(smoke_cfg("schedule=d4.2", "schedule.shared_output_layer=true")).eval()
    loss = weighted_loss({"logit_mse": 1.0}, shared(*batch()), targets(), teacher_rows="transfer")
    assert loss.item() == pytest.approx(1.63891327, rel=1e-5)
    # ... the separate student's W^s, drawn alike (W^r draws from its own generator: nothing else moved)
    on_w_s = weighted_loss({"logit_mse": 1.0}, {"logits": out["logits"]}, targets(), teacher_rows="transfer")
    assert on_w_s.item() == pytest.approx(1.63891327, rel=1e-5)


def test_each_stage_unfreezes_the_output_layer_it_trains(smoke_cfg):
    """Table 4: stage 2's top step is Linear (W^r), stage 3's Softmax (W^s); both are the step named
    classifier. D3.2's stage 2 reads both (CE + logits) and trains them in that one step."""
    model = student(smoke_cfg("schedule=d4.2"))
    stages = {s.name: s for s in smoke_cfg("schedule=d4.2").schedule.stages}
    s2, s3 = unfreezing_groups(model, stages["S2"]), unfreezing_groups(model, stages["S3"])
    assert [n for n, _ in s2] == [n for n, _ in s3] == ["classifier", "projection", "bilstm", "embeddings"]
    assert s2[0][1] == list(model.regression.parameters())
    assert s3[0][1] == list(model.output.parameters())
    assert [n for n, _ in unfreezing_groups(model, stages["S1"])] == ["projection", "bilstm", "embeddings"]
    d3_2 = smoke_cfg("schedule=d3.2")
    top = unfreezing_groups(student(d3_2), d3_2.schedule.stages[1])[0]
    assert top[0] == "classifier" and len(top[1]) == 4  # W^s and W^r, weights and biases


def test_a_stage_that_trains_only_w_r_is_scored_by_w_r(smoke_cfg):
    """Algorithm 1, stage 2: its output is r^s; its dev and test scores read W^r, not the untrained W^s."""
    cfg = smoke_cfg("schedule=d4.2", "trainer.epochs=1")
    model = student(cfg)
    splits = fake_splits(num_labels=LABELS)
    s2 = StageTrainer("d4.2", cfg.schedule.stages[1], cfg.trainer, model, splits, evaluator(splits),
                      CLASSIFICATION, np.random.default_rng(0), 0)
    assert isinstance(s2.predictor, PredictingWithScores)
    ids, mask = batch()
    model.eval()
    torch.testing.assert_close(s2.predictor(ids, mask)["logits"], model(ids, mask)["scores"])
    for stage in (cfg.schedule.stages[0], cfg.schedule.stages[2]):  # representation only; CE
        assert predicting_view(model, {"representation"} if stage.name == "S1" else {"logits"}) is model
    shared = student(smoke_cfg("schedule=d4.2", "schedule.shared_output_layer=true"))
    assert predicting_view(shared, {"scores"}) is shared  # one layer: the scores are the logits


def test_w_r_is_not_deployed(smoke_cfg):
    model = student(smoke_cfg("schedule=d4.2"))
    total = sum(p.numel() for p in model.parameters())
    w_r = LABELS * HIDDEN + LABELS
    assert count_params(model) == total - w_r
    assert param_counts(model, None)["training_only"] == w_r
    shared = student(smoke_cfg("schedule=d4.2", "schedule.shared_output_layer=true"))
    assert count_params(shared) == total - w_r  # the same deployed student, one layer fewer in training


@pytest.mark.parametrize("overrides,message", [
    (["schedule=d1", "schedule.shared_output_layer=false"],
     "schedule 'd1': shared_output_layer=false separates W^r from W^s in the representation head, and no stage "
     "has a representation loss; use schedule.shared_output_layer=true"),
    (["schedule=d4.2", "~schedule.stages.2.losses.ce", "+schedule.stages.2.losses.logit_mse=1.0"],
     "schedule 'd4.2' stage S3: with shared_output_layer=false the student predicts with W^s, which its last "
     "stage does not train (no ce, hard, soft_ce or kl); add one, or use schedule.shared_output_layer=true"),
])
def test_output_layers_that_cannot_work_fail_before_training(smoke_cfg, overrides, message):
    cfg = smoke_cfg(*overrides)
    with pytest.raises(DistilError) as error:
        validate_schedule(cfg.schedule, cfg.trainer, CLASSIFICATION, cfg.trainer.batch_size)
    assert str(error.value) == message


def test_a_student_without_a_linear_classifier_cannot_have_its_own_w_r(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.2", "schedule.projection=side", "student=tang")
    with pytest.raises(DistilError, match="schedule.shared_output_layer=false adds a logit layer W"):
        student(cfg)


def test_a_saved_student_serves_with_w_s(tmp_path, monkeypatch, capsys):
    """The student folder rebuilds both layers (config.json's shared_output) and predicts with W^s."""
    from distil.serve.student import SavedStudent

    code, _, err = distil_in_process(["debug=smoke", "schedule=d4.2", "trainer.epochs=1",
                                      "trainer.labels_only_epochs=1"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    run = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    metrics = json.loads((run / "metrics.json").read_text())
    assert [r["step"] for r in metrics["student"]["stages"] if r["name"] == "S2"][0] == "classifier"
    assert metrics["student"]["param_counts"]["training_only"] == 3 * 32 + 3  # W^r: 3 classes x 32 units
    saved = SavedStudent(run / "student")
    assert saved.config["shared_output"] is False and saved.model.regression is not None
    ids = torch.tensor([[1, 2, 3]])
    with torch.inference_mode():
        out = saved.model(ids, torch.ones_like(ids))
        torch.testing.assert_close(out["logits"], saved.model.output(out["representation"]))
