"""Each schedule trains: a few steps on fixed data lower its loss, and a full run works."""

import math

import numpy as np
import pytest
import torch

from distil.config.overrides import group_options
from distil.config.schema import CONF_DIR
from distil.data.ragged import Ragged
from distil.errors import DistilError
from distil.run.evaluate import student_logits
from distil.run.schedule import (
    StageTrainer,
    StudentSplit,
    needs_teacher_hidden,
    run_schedule,
    stage_epochs,
    unfreezing_groups,
    validate_schedule,
)
from distil.students import build_student
from distil.tasks import get_task
from distil.tasks.classification import accuracy
from distil.teacher.cache import TargetView
from distil.training.losses import Targets, weighted_loss

CLASSIFICATION = get_task("classification")
SCHEDULES = group_options(CONF_DIR, "schedule")
HIDDEN = 8  # the fake teacher's hidden size


def fake_splits(n=48, num_labels=3, seed=0, sizes=None):
    """Random token sequences whose label is the most frequent token class; teacher agrees.
    `sizes` overrides n per split, e.g. {"transfer": 100}."""
    rng = np.random.default_rng(seed)
    splits = {}
    for name, labeled in (("labeled", True), ("transfer", False), ("dev", True), ("test", True)):
        count = (sizes or {}).get(name, n)
        ids = [rng.integers(2, 2 + 3 * num_labels, size=rng.integers(4, 12)).tolist() for _ in range(count)]
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
                         teacher_hidden_size=HIDDEN, representation_head=needs_teacher_hidden(schedule),
                         projection=schedule.projection)


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
            assert steps[0] in ("classifier", "projection") and steps[-1] == "embeddings"
        else:
            assert steps == ["all"]
    epochs = {stage.name: stage_epochs(stage, cfg.trainer) for stage in cfg.schedule.stages}
    for record in records:
        assert 0 <= record["best_epoch"] <= record["epochs_run"] <= epochs[record["name"]]
        assert record["dev_loss"] >= 0.0
    # what the last step reports is the model the run hands back (its best on dev, restored)
    evaluate = evaluator(splits)
    assert records[-1]["dev"] == evaluate(model, "dev") and records[-1]["test"] == evaluate(model, "test")


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
    name, top = model.layer_groups()[0]
    classifier = list(top.parameters())
    record = trainer.step(name, classifier)
    after = snapshot(model)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert record["best_epoch"] > 0, "the classifier should improve on a random start"
    assert changed == {"output.weight", "output.bias"}  # d3.2's projection sits under it (path)
    assert record["trainable_params"] == sum(p.numel() for p in classifier)


def test_gradual_unfreezing_reaches_every_layer_group(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.2", "schedule.projection=side")
    model = student_for(cfg)
    groups = [name for name, _ in model.layer_groups()]
    assert groups == ["classifier", "projection", "bilstm", "embeddings"]
    stages = {s.name: s for s in cfg.schedule.stages}
    # a side head: a logits-only stage cannot move the projection; a representation-only one not the classifier
    assert [n for n, _ in unfreezing_groups(model, stages["S2"])] == ["classifier", "bilstm", "embeddings"]
    assert [n for n, _ in unfreezing_groups(model, stages["S1"])] == ["projection", "bilstm", "embeddings"]


@pytest.mark.parametrize("place", ["side", "path"])
def test_projection_place_decides_whether_logits_read_it(smoke_cfg, place):
    """path: logits = W^r gelu(W^f h + b^f) (XtremeDistil Table 4), so the projection moves the logits
    and is a step of the logit stages; side: it feeds the representation losses only."""
    cfg = smoke_cfg("schedule=d4.2", f"schedule.projection={place}")
    model = student_for(cfg).eval()
    ids = torch.tensor([[2, 5, 7, 3]])
    mask = torch.ones_like(ids)
    before = model(ids, mask)
    with torch.no_grad():
        model.projection.weight.mul_(2.0)
    after = model(ids, mask)
    assert not torch.equal(before["representation"], after["representation"])
    assert torch.equal(before["logits"], after["logits"]) == (place == "side")
    if place == "path":
        pooled = before["pooled"]
        output = model.layer_groups()[0][1]
        expected = output(torch.nn.functional.gelu(pooled @ (model.projection.weight / 2).T + model.projection.bias))
        assert torch.allclose(before["logits"], expected, atol=1e-6)
    # deployed parameters: a path projection ships with the student, a side head does not
    from distil.students import count_params
    total, head = sum(p.numel() for p in model.parameters()), HIDDEN * model.student.representation_size + HIDDEN
    assert count_params(model) == (total if place == "path" else total - head)
    stage_2 = cfg.schedule.stages[1]
    steps = [n for n, _ in unfreezing_groups(model, stage_2)]
    assert steps == (TABLE_4 if place == "path" else ["classifier", "bilstm", "embeddings"])


def test_projection_path_needs_a_linear_classifier(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.2", "student=tang")
    with pytest.raises(DistilError, match="schedule.projection=path needs a student whose classifier is one linear"):
        student_for(cfg)


TABLE_4 = ["classifier", "projection", "bilstm", "embeddings"]  # Linear/Softmax, Projection, BiLSTM, Word Emb


def test_d4_2_steps_are_algorithm_1_and_table_4(smoke_cfg):
    """XtremeDistil Algorithm 1: every stage unfreezes top to bottom, stage 1 included (its top
    layer is the projection; it has no output layer); stages 2 and 3 step through Table 4's rows."""
    cfg = smoke_cfg("schedule=d4.2", "trainer.epochs=1", "trainer.labels_only_epochs=1")
    model = student_for(cfg)
    splits = fake_splits()
    records = run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluator(splits), CLASSIFICATION, seed=0)
    assert [(r["name"], r["step"]) for r in records] == [
        ("S1", "projection"), ("S1", "bilstm"), ("S1", "embeddings"),
        *[("S2", step) for step in TABLE_4], *[("S3", step) for step in TABLE_4]]


@pytest.mark.parametrize("schedule", ["d3.2", "d4.2"])
def test_xtremedistil_steps_select_on_dev_loss(smoke_cfg, schedule):
    """XtremeDistil 5.3: every step keeps the best model on validation loss. With a dev metric
    that never moves, metric selection would keep epoch 0 everywhere; loss selection does not."""
    cfg = smoke_cfg(f"schedule={schedule}", "trainer.epochs=2", "trainer.labels_only_epochs=2")
    model = student_for(cfg)
    splits = fake_splits()
    records = run_schedule(cfg.schedule, cfg.trainer, model, splits, lambda m, name: {"accuracy": 0.5},
                           CLASSIFICATION, seed=0)
    assert {r["selected_on"] for r in records} == {"dev loss"}
    for r in records:
        losses = [-h["dev"] for h in r["history"]]
        assert r["dev_loss"] == pytest.approx(min(losses))
        assert r["best_epoch"] == int(np.argmin(losses))
    assert any(r["best_epoch"] > 0 for r in records if r["name"] != "S1")


def test_select_metric_stays_available(smoke_cfg):
    cfg = smoke_cfg("schedule=d4.2", "schedule.stages.2.select=metric")
    stage = cfg.schedule.stages[2]
    splits = fake_splits()
    trainer = StageTrainer("d4.2", stage, cfg.trainer, student_for(cfg), splits, evaluator(splits),
                           CLASSIFICATION, np.random.default_rng(0), 0)
    assert not trainer.select_on_loss


@pytest.mark.parametrize("alpha", [0.5, 0.0])
def test_bilstm_soft_is_tangs_formula(smoke_cfg, alpha):
    """Tang et al.: L = alpha * CE + (1 - alpha) * ||z_t - z_s||^2 (no 1/2; alpha = 0 is BiLSTM_SOFT)."""
    cfg = smoke_cfg("schedule=bilstm-soft", f"schedule.weights.alpha={alpha}")
    stage = cfg.schedule.stages[0]
    student = torch.tensor([[0.0, math.log(3.0)]])  # p_s = [1/4, 3/4]
    teacher = student + torch.tensor([[1.0, 2.0]])  # ||z_t - z_s||^2 = 5
    targets = Targets(torch.tensor([1]), teacher)  # gold 1: CE = -log 3/4
    loss = weighted_loss(dict(stage.losses), {"logits": student}, targets, reductions=dict(stage.reduction))
    assert loss.item() == pytest.approx(alpha * -math.log(0.75) + (1 - alpha) * 5.0)


def test_balanced_batches_are_half_labeled(smoke_cfg):
    """Mukherjee & Awadallah 5.1 (eq. 8): every batch holds as many labeled as transfer rows; an
    epoch is one pass over the larger set, the smaller one cycled."""
    cfg = smoke_cfg("schedule=joint", "trainer.batch_size=8")
    stage = cfg.schedule.stages[0]
    assert stage.sampler == "balanced"
    splits = fake_splits(sizes={"labeled": 12, "transfer": 50})
    trainer = StageTrainer("joint", stage, cfg.trainer, student_for(cfg), splits, evaluator(splits),
                           CLASSIFICATION, np.random.default_rng(0), 0)
    batches = trainer.batches(1)
    labeled = [int((rows < 12).sum()) for rows in batches]
    assert all(2 * n == len(rows) for n, rows in zip(labeled, batches, strict=True))
    transfer_rows = np.concatenate([rows[rows >= 12] for rows in batches])
    assert sorted(transfer_rows.tolist()) == list(range(12, 62))  # each transfer row once per epoch
    assert len(batches) == math.ceil(50 / 4)


@pytest.mark.parametrize("schedule", ["d1", "d3.2"])
def test_restore_best_keeps_the_better_model_when_a_later_step_is_worse(smoke_cfg, schedule, monkeypatch):
    """Train, then train again with a learning rate that wrecks the model: every step must
    restore the model it started from, so weights and dev score come back unchanged. (The growth
    guard, which fails such a run as diverged, is off here: what is tested is the restore.)"""
    monkeypatch.setattr("distil.training.loop.DIVERGED_GROWTH", float("inf"))
    cfg = smoke_cfg(f"schedule={schedule}", "trainer.epochs=2")
    model = student_for(cfg)
    splits = fake_splits()
    evaluate = evaluator(splits)
    run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluate, CLASSIFICATION, seed=0)
    good_state, good_dev = snapshot(model), evaluate(model, "dev")["accuracy"]
    wrecking = smoke_cfg(f"schedule={schedule}", "trainer.epochs=2", "trainer.optimizer=sgd", "trainer.lr=1e4",
                         "trainer.grad_clip=0", "trainer.lr_schedule=constant")
    records = run_schedule(wrecking.schedule, wrecking.trainer, model, splits, evaluate, CLASSIFICATION, seed=1)
    # an epoch worse on dev, or a loss so large it is not finite (fit stops at once: distil.training.loop)
    wrecked = [h["dev"] < good_dev for r in records for h in r["history"] if h["epoch"] > 0]
    assert any(wrecked + [bool(r.get("nonfinite")) for r in records]), "the wrecking run should wreck something"
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


@pytest.mark.parametrize("override,message", [
    ("schedule.stages.0.reduction={logit_mse: max}", "unknown logit_mse reduction 'max'; choose one of: mean, sum"),
    ("++schedule.stages.0.reduction.ce=sum", "reduction applies to logit_mse, repr_mse, repr_kl"),
    ("++schedule.stages.0.reduction.repr_kl=sum", "reduction names repr_kl, which the stage does not use"),
    ("schedule.stages.0.sampler=balanced", "sampler 'balanced' needs data [labeled, transfer]"),
    ("schedule.stages.0.sampler=even", "unknown sampler 'even'; choose one of: shuffle, balanced"),
    ("schedule.stages.0.sampler=shufle", "unknown sampler 'shufle' (did you mean 'shuffle'?); choose one of: "),
])
def test_bad_stage_settings_fail_before_training(smoke_cfg, override, message):
    cfg = smoke_cfg("schedule=d1", override)
    if "balanced" in override:
        cfg = smoke_cfg("schedule=d4.1", "schedule.stages.2.sampler=balanced")
    with pytest.raises(DistilError) as error:
        validate_schedule(cfg.schedule, cfg.trainer, CLASSIFICATION, cfg.trainer.batch_size)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_weight_expressions_are_arithmetic_only():
    from distil.config.schema import arithmetic
    assert arithmetic("2 * (1 - 0.25)") == 1.5 and arithmetic("-1 / 4 + 1") == 0.75
    with pytest.raises(ValueError, match="not arithmetic"):
        arithmetic("__import__('os').getcwd()")


@pytest.mark.parametrize("schedule", ["d1", "d2", "d3.1", "d3.2", "d4.1", "d4.2",
                                      "soft", "joint", "rl-llce", "rlll-ce"])
def test_papers_with_d_u_read_the_teacher_on_the_transfer_set_only(smoke_cfg, schedule):
    """Mukherjee & Awadallah eq. 8 and XtremeDistil eq. 7 / Algorithm 1: teacher targets on D_u."""
    from distil.training.losses import LOSSES
    for stage in smoke_cfg(f"schedule={schedule}").schedule.stages:
        if any(LOSSES[name].needs == "teacher" for name in stage.losses):
            assert list(stage.data) == ["transfer"] or stage.teacher_rows == "transfer", stage.name
