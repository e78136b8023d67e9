"""Each schedule trains: a few steps on fixed data lower its loss, and a full run works."""

import numpy as np
import pytest
import torch

from distil.cli import CONF_DIR
from distil.data.ragged import Ragged
from distil.evaluate import student_logits
from distil.losses import Targets, weighted_loss
from distil.overrides import group_options
from distil.schedule import (
    StageTrainer,
    StudentSplit,
    needs_teacher_hidden,
    run_schedule,
    stage_epochs,
    unfreezing_groups,
)
from distil.students import build_student
from distil.tasks import get_task
from distil.tasks.classification import accuracy
from distil.teacher.cache import TargetView

CLASSIFICATION = get_task("classification")
SCHEDULES = group_options(CONF_DIR, "schedule")
HIDDEN = 8  # the fake teacher's hidden size


def fake_splits(n=48, num_labels=3, seed=0):
    """Random token sequences whose label is the most frequent token class; teacher agrees."""
    rng = np.random.default_rng(seed)
    splits = {}
    for name, labeled in (("labeled", True), ("transfer", False), ("dev", True), ("test", True)):
        ids = [rng.integers(2, 2 + 3 * num_labels, size=rng.integers(4, 12)).tolist() for _ in range(n)]
        gold = torch.tensor([np.bincount([(t - 2) % num_labels for t in s], minlength=num_labels).argmax()
                             for s in ids])
        teacher = torch.nn.functional.one_hot(gold, num_labels).float() * 4 - 2
        hidden = torch.nn.functional.one_hot(gold, HIDDEN).float() * 2 - 0.5  # a layer that knows the class
        labels = gold if labeled else torch.full_like(gold, -1)
        splits[name] = StudentSplit(Ragged.from_lists(ids), labels, labels >= 0, TargetView.in_memory(teacher, hidden))
    return splits


def student_for(cfg, schedule=None):
    torch.manual_seed(0)
    schedule = schedule or cfg.schedule
    return build_student(cfg.student, vocab_size=16, num_labels=3, task=CLASSIFICATION,
                         teacher_hidden_size=HIDDEN, representation_head=needs_teacher_hidden(schedule))


def stage_loss(model, stage, pool):
    rows = np.arange(len(pool))
    ids, mask = pool.tokens.pad(rows)
    targets = Targets(pool.labels, pool.targets.logits(rows), pool.targets.hidden(rows))
    return weighted_loss(dict(stage.losses), model(ids, mask), targets, stage.temperature)


def evaluator(splits):
    def evaluate(student, name):
        return {"accuracy": accuracy(student_logits(student, splits[name].tokens, 0, 64), splits[name].labels)}
    return evaluate


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_loss_goes_down(smoke_cfg, name):
    cfg = smoke_cfg(f"schedule={name}")
    splits = fake_splits()
    model = student_for(cfg)
    for stage in cfg.schedule.stages:
        pool = StudentSplit.concat([splits[d] for d in stage.data])
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
        model.eval()  # no dropout noise in the before/after comparison
        before = stage_loss(model, stage, pool).item()
        model.train()
        for _ in range(20):
            optimizer.zero_grad()
            stage_loss(model, stage, pool).backward()
            optimizer.step()
        model.eval()
        assert stage_loss(model, stage, pool).item() < 0.8 * before


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_runs_and_reports_every_stage(smoke_cfg, name):
    cfg = smoke_cfg(f"schedule={name}", "trainer.epochs=2")
    model = student_for(cfg)
    splits = fake_splits()
    records = run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluator(splits), CLASSIFICATION, seed=0)
    assert list(dict.fromkeys(r["name"] for r in records)) == [s.name for s in cfg.schedule.stages]
    for stage in cfg.schedule.stages:
        steps = [r["step"] for r in records if r["name"] == stage.name]
        if stage.unfreeze == "gradual":
            assert steps == [group for group, _ in unfreezing_groups(model, stage)]
            assert steps[0] == "classifier" and steps[-1] == "embeddings"
        else:
            assert steps == ["all"]
    epochs = {stage.name: stage_epochs(stage, cfg.trainer) for stage in cfg.schedule.stages}
    for record in records:
        assert 0.0 <= record["dev"]["accuracy"] <= 1.0 and 0.0 <= record["test"]["accuracy"] <= 1.0
        assert 0 <= record["best_epoch"] <= record["epochs_run"] <= epochs[record["name"]]
        assert record["dev_loss"] >= 0.0


def snapshot(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_frozen_layers_do_not_change_during_a_step(smoke_cfg):
    cfg = smoke_cfg("schedule=d3.2")
    model = student_for(cfg)
    splits = fake_splits()
    stage = cfg.schedule.stages[1]  # labels + logits, gradual
    trainer = StageTrainer("d3.2", stage, cfg.trainer, model, splits, evaluator(splits), CLASSIFICATION,
                           np.random.default_rng(0), 0)
    before = snapshot(model)
    classifier = [p for name, p in model.named_parameters() if "classifier" in name]
    record = trainer.step("classifier", classifier)
    after = snapshot(model)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert record["best_epoch"] > 0, "the classifier should improve on a random start"
    assert changed and all("classifier" in k for k in changed)
    assert record["trainable_params"] == sum(p.numel() for p in classifier)


def test_gradual_unfreezing_reaches_every_layer_group(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.2")
    model = student_for(cfg)
    groups = [name for name, _ in model.layer_groups()]
    assert groups == ["classifier", "projection", "bilstm", "embeddings"]
    stages = {s.name: s for s in cfg.schedule.stages}
    # a logits-only stage cannot move the projection; a representation-only one not the classifier
    assert [n for n, _ in unfreezing_groups(model, stages["S2"])] == ["classifier", "bilstm", "embeddings"]
    assert [n for n, _ in unfreezing_groups(model, stages["S1"])] == ["projection", "bilstm", "embeddings"]


@pytest.mark.parametrize("schedule", ["d1", "d3.2"])
def test_restore_best_keeps_the_better_model_when_a_later_step_is_worse(smoke_cfg, schedule):
    """Train, then train again with a learning rate that wrecks the model: every step must
    restore the model it started from, so weights and dev score come back unchanged."""
    cfg = smoke_cfg(f"schedule={schedule}", "trainer.epochs=2")
    model = student_for(cfg)
    splits = fake_splits()
    evaluate = evaluator(splits)
    run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluate, CLASSIFICATION, seed=0)
    good_state, good_dev = snapshot(model), evaluate(model, "dev")["accuracy"]
    wrecking = smoke_cfg(f"schedule={schedule}", "trainer.epochs=2", "trainer.optimizer=sgd", "trainer.lr=1e4",
                         "trainer.grad_clip=0", "trainer.lr_schedule=constant")
    records = run_schedule(wrecking.schedule, wrecking.trainer, model, splits, evaluate, CLASSIFICATION, seed=1)
    worse = [h["dev"] for r in records for h in r["history"] if h["epoch"] > 0]
    assert min(worse) < good_dev, "the wrecking run should make some epoch worse"
    assert all(r["best_epoch"] == 0 for r in records if r["name"] == records[-1]["name"])
    assert evaluate(model, "dev")["accuracy"] == good_dev
    final = snapshot(model)
    assert all(torch.equal(good_state[k], final[k]) for k in good_state)


def test_representation_only_stage_selects_on_dev_loss(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.1", "trainer.epochs=2")
    model = student_for(cfg)
    splits = fake_splits()
    records = run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluator(splits), CLASSIFICATION, seed=0)
    assert [r["selected_on"] for r in records] == ["dev loss", "dev accuracy", "dev accuracy"]
    s1 = records[0]["history"]
    assert records[0]["dev_loss"] == pytest.approx(-max(h["dev"] for h in s1))


def test_cosine_schedule_decays_to_lr_min(smoke_cfg):
    cfg = smoke_cfg("schedule=d1", "trainer.epochs=2", "trainer.patience=5")
    assert cfg.trainer.lr_schedule == "cosine" and cfg.trainer.optimizer == "adam"
    model = student_for(cfg)
    splits = fake_splits()
    seen = []
    original = torch.optim.lr_scheduler.CosineAnnealingLR.step

    def spy(self, *args, **kwargs):
        original(self, *args, **kwargs)
        seen.append(self.get_last_lr()[0])

    torch.optim.lr_scheduler.CosineAnnealingLR.step = spy
    try:
        run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluator(splits), CLASSIFICATION, seed=0)
    finally:
        torch.optim.lr_scheduler.CosineAnnealingLR.step = original
    assert seen[-1] == pytest.approx(cfg.trainer.lr_min, abs=1e-9)
    assert all(a >= b for a, b in zip(seen, seen[1:], strict=False))


def test_paper_optimisers(smoke_cfg):
    assert smoke_cfg("schedule=rl-llce").trainer.optimizer == "adadelta"
    adadelta = smoke_cfg("schedule=hard").trainer
    assert (adadelta.lr, adadelta.rho) == (1.0, 0.95)
    assert smoke_cfg("schedule=d4.2").trainer.lr_schedule == "cosine"
    assert smoke_cfg("schedule=d4.2", "trainer=default").trainer.lr_schedule == "constant"
    joint = smoke_cfg("schedule=joint", "schedule.weights.alpha=3").schedule.stages[0].losses
    assert dict(joint) == {"ce": 3.0, "repr_mse": 10.0, "logit_mse": 1.0}


def test_labels_only_stages_get_their_own_epoch_budget(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.1", "trainer.epochs=2", "trainer.labels_only_epochs=7")
    # S1 (representation) and S2 (logits) read the transfer set; S3 reads the labels alone.
    assert [stage_epochs(stage, cfg.trainer) for stage in cfg.schedule.stages] == [2, 2, 7]
    cfg = smoke_cfg("schedule=d4.1", "trainer.epochs=2", "schedule.stages.2.epochs=5")
    assert stage_epochs(cfg.schedule.stages[2], cfg.trainer) == 5  # a stage's own epochs win
