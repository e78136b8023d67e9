"""The one training loop's early stopping: patience in epochs, never before min_steps optimiser steps."""

import itertools

import pytest
import torch

from distil.train import fit


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
