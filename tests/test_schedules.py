"""Each schedule trains: a few steps on fixed data lower its loss, and a full run works."""

import numpy as np
import pytest
import torch

from distil.cli import CONF_DIR
from distil.data.batching import pad
from distil.evaluate import accuracy, student_logits
from distil.losses import weighted_loss
from distil.overrides import group_options
from distil.schedule import StudentSplit, run_schedule
from distil.students import build_student

SCHEDULES = group_options(CONF_DIR, "schedule")


def fake_splits(n=48, num_labels=3, seed=0):
    """Random token sequences whose label is the most frequent token class; teacher agrees."""
    rng = np.random.default_rng(seed)
    splits = {}
    for name, labeled in (("labeled", True), ("transfer", False), ("dev", True), ("test", True)):
        ids = [rng.integers(2, 2 + 3 * num_labels, size=rng.integers(4, 12)).tolist() for _ in range(n)]
        gold = torch.tensor([np.bincount([(t - 2) % num_labels for t in s], minlength=num_labels).argmax()
                             for s in ids])
        teacher = torch.nn.functional.one_hot(gold, num_labels).float() * 4 - 2
        splits[name] = StudentSplit(ids, gold if labeled else torch.full_like(gold, -1), teacher)
    return splits


def stage_loss(model, stage, pool):
    ids, mask = pad(pool.ids)
    return weighted_loss(dict(stage.losses), model(ids, mask)["logits"], pool.labels, pool.teacher_logits)


@pytest.mark.parametrize("name", SCHEDULES)
def test_schedule_loss_goes_down(smoke_cfg, name):
    cfg = smoke_cfg(f"schedule={name}")
    torch.manual_seed(0)
    splits = fake_splits()
    model = build_student(cfg.student, vocab_size=16, num_labels=3, task="classification")
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
    torch.manual_seed(0)
    model = build_student(cfg.student, vocab_size=16, num_labels=3, task="classification")
    splits = fake_splits()

    def evaluate(student, name):
        return {"accuracy": accuracy(student_logits(student, splits[name].ids, 0, 64), splits[name].labels)}

    stages = run_schedule(cfg.schedule, cfg.trainer, model, splits, evaluate, "accuracy", seed=0)
    assert [s["name"] for s in stages] == [s.name for s in cfg.schedule.stages]
    for stage in stages:
        assert 0.0 <= stage["dev"]["accuracy"] <= 1.0 and 0.0 <= stage["test"]["accuracy"] <= 1.0
        assert 1 <= stage["best_epoch"] <= stage["epochs_run"] <= 2
