"""Each loss against a value computed by hand."""

import math

import pytest
import torch

from distil.losses import cross_entropy, hard_distillation, logit_mse, weighted_loss


def test_cross_entropy_hand_computed():
    logits = torch.tensor([[0.0, math.log(3.0)]])  # softmax = [1/4, 3/4]
    assert cross_entropy(logits, torch.tensor([1])).item() == pytest.approx(-math.log(0.75))


def test_hard_distillation_uses_teacher_argmax():
    logits = torch.tensor([[0.0, math.log(3.0)]])
    teacher = torch.tensor([[5.0, -1.0]])  # argmax 0
    assert hard_distillation(logits, teacher).item() == pytest.approx(-math.log(0.25))


def test_logit_mse_is_half_squared_norm_per_example():
    student = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    teacher = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    # example 1: 0.5 * (1 + 4) = 2.5; example 2: 0.5 * (9 + 16) = 12.5; mean 7.5
    assert logit_mse(student, teacher).item() == pytest.approx(7.5)


def test_weighted_loss_applies_ce_to_labeled_examples_only():
    logits = torch.tensor([[0.0, math.log(3.0)], [2.0, 0.0]])
    labels = torch.tensor([1, -1])  # second example is from the transfer set
    teacher = torch.zeros(2, 2)
    ce_only = weighted_loss({"ce": 2.0}, logits, labels, teacher)
    assert ce_only.item() == pytest.approx(-2 * math.log(0.75))
    both = weighted_loss({"ce": 1.0, "logit_mse": 1.0}, logits, labels, teacher)
    expected_mse = (0.5 * math.log(3.0) ** 2 + 0.5 * 4.0) / 2
    assert both.item() == pytest.approx(-math.log(0.75) + expected_mse)


def test_weighted_loss_without_labeled_examples_skips_ce():
    logits = torch.zeros(2, 2, requires_grad=True)
    loss = weighted_loss({"ce": 1.0}, logits, torch.tensor([-1, -1]), torch.zeros(2, 2))
    assert loss.item() == 0.0
