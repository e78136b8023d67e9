"""The one training loop's early stopping: patience in epochs, never before min_steps optimiser steps."""

import itertools

import pytest
import torch

from distil.training.loop import fit


@pytest.mark.parametrize(("min_steps", "epochs_run"), [(0, 1), (10, 4), (12, 4), (13, 5)])
def test_early_stopping_waits_for_min_steps(min_steps, epochs_run):
    """Three steps an epoch and a dev score that never beats the untrained model: patience 1
    stops after the first epoch, unless min_steps asks for more steps (10 or 12 steps: the
    fourth epoch ends at step 12; 13: the fifth)."""
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    falling = itertools.count()
    result = fit(model, optimizer, lambda epoch: [0, 1, 2], lambda batch: (model.weight ** 2).sum(),
                 lambda: -float(next(falling)), epochs=10, patience=1, min_steps=min_steps, baseline=True)
    assert result.epochs_run == epochs_run
    assert result.best_epoch == 0  # the untrained model stays the best on dev, and is restored


@pytest.mark.parametrize(("min_improvement", "best_epoch", "epochs_run"), [(0.0, 10, 10), (0.002, 3, 5), (0.02, 1, 3)])
def test_a_gain_below_min_improvement_is_no_improvement(min_improvement, best_epoch, epochs_run):
    """A dev loss creeping down (1.0, 0.95, 0.94, 0.938, then 0.1% an epoch): any gain counts at 0, so
    the run reaches its cap still 'improving'; at 0.2% of the best the gains after epoch 3 do not
    count and patience 2 stops at epoch 5; at 2% only the first epoch's gain counts."""
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    losses = iter([1.0, 0.95, 0.94, 0.938] + [0.938 * 0.999 ** k for k in range(1, 10)])
    result = fit(model, optimizer, lambda epoch: [0], lambda batch: (model.weight ** 2).sum(),
                 lambda: -next(losses), epochs=10, patience=2, min_improvement=min_improvement, baseline=True)
    assert (result.best_epoch, result.epochs_run) == (best_epoch, epochs_run)


def test_min_steps_raises_a_stages_epochs(smoke_cfg, tmp_path, monkeypatch, capsys):
    """A stage of 2 epochs over the toy labeled set (24 examples, batch 12: 2 steps an epoch) trains
    5 epochs with trainer.min_steps=10 (patience high enough not to stop it)."""
    import json

    from tests.test_cli import distil_in_process

    code, _, err = distil_in_process(["debug=smoke", "schedule=d0-s", "trainer.labels_only_epochs=2",
                                      "trainer.patience=20", "trainer.min_steps=10"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    stage = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())["student"]["stages"][0]
    assert (stage["examples"], stage["batch_size"], stage["epochs_run"]) == (24, 12, 5)


def test_every_epoch_logs_its_own_time_left(monkeypatch, caplog):
    """Without a terminal the loop logs each epoch's count and time left; an epoch after a finished
    one must not read '~0:00:00 left' (a task updated back to 0 stays marked finished)."""
    import logging

    from distil.common.progress import progress_bar
    from distil.training import loop

    now = itertools.count(0.0, 10.0)  # every clock reading is 10 s later: steps take time
    monkeypatch.setattr(loop, "progress_bar", lambda: progress_bar(heartbeat=0, get_time=lambda: next(now)))
    caplog.set_level(logging.INFO, logger="distil.common.progress")
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    fit(model, optimizer, lambda epoch: [0, 1, 2, 3], lambda batch: (model.weight ** 2).sum(), lambda: 0.0,
        epochs=2, patience=5, description="toy")
    second = [r.getMessage() for r in caplog.records if r.getMessage().startswith("toy epoch 2/2: 2/4")]
    assert second and all("left" in m and "~0:00:00 left" not in m for m in second), second
