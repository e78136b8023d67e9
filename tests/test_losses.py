"""Each loss against a value computed by hand."""

import math

import pytest
import torch

from distil.training.losses import (
    IGNORE,
    Targets,
    cross_entropy,
    kl_divergence,
    logit_mse,
    representation_cosine,
    representation_kl,
    representation_mse,
    soft_cross_entropy,
    weighted_loss,
)

QUARTERS = torch.tensor([[0.0, math.log(3.0)]])  # softmax = [1/4, 3/4]
HALVES = torch.tensor([[0.0, 0.0]])  # softmax = [1/2, 1/2]


def test_cross_entropy_hand_computed():
    assert cross_entropy(QUARTERS, torch.tensor([1])).item() == pytest.approx(-math.log(0.75))


def test_hard_uses_the_teacher_argmax_on_a_transfer_row():
    teacher = torch.tensor([[5.0, -1.0]])  # argmax 0
    loss = weighted_loss({"hard": 1.0}, {"logits": QUARTERS}, Targets(torch.tensor([-1]), teacher))
    assert loss.item() == pytest.approx(-math.log(0.25))


def test_hard_keeps_the_gold_label_where_the_teacher_disagrees():
    """Mukherjee & Awadallah 6.3: gold labels on the labeled set, the teacher's argmax only on
    the transfer set; one cross-entropy over the augmented data."""
    logits = torch.cat([QUARTERS, QUARTERS])  # p_s = [1/4, 3/4] on both rows
    teacher = torch.tensor([[5.0, -1.0], [5.0, -1.0]])  # argmax 0 on both rows
    targets = Targets(torch.tensor([1, -1]), teacher)  # row 1: gold 1 (teacher says 0); row 2: transfer
    loss = weighted_loss({"hard": 1.0}, {"logits": logits}, targets)
    # row 1: -log 3/4 (gold, no teacher term); row 2: -log 1/4 (teacher argmax); mean over both rows
    assert loss.item() == pytest.approx((-math.log(0.75) - math.log(0.25)) / 2)


def test_logit_mse_sums_or_averages_over_classes():
    student = torch.tensor([[1.0, 2.0], [0.0, 0.0]])
    teacher = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    # sum: example 1: 0.5 * (1 + 4) = 2.5; example 2: 0.5 * (9 + 16) = 12.5; mean 7.5
    assert logit_mse(student, teacher, reduction="sum").item() == pytest.approx(7.5)
    # mean over the 2 classes: 1.25 and 6.25; mean 3.75 (element-wise MSE, M&A eq. 5)
    assert logit_mse(student, teacher, reduction="mean").item() == pytest.approx(3.75)
    assert logit_mse(student, teacher).item() == pytest.approx(3.75)  # the papers' element-wise default


def test_soft_cross_entropy_at_temperature_one():
    # -(1/2 log 1/4 + 1/2 log 3/4)
    expected = -(0.5 * math.log(0.25) + 0.5 * math.log(0.75))
    assert soft_cross_entropy(QUARTERS, HALVES).item() == pytest.approx(expected)


def test_soft_cross_entropy_carries_the_temperature_squared():
    # At T = 2 the student logits [0, 2 log 3] soften to [1/4, 3/4]; the loss is then scaled by T^2 = 4.
    student = torch.tensor([[0.0, 2 * math.log(3.0)]])
    expected = -(0.5 * math.log(0.25) + 0.5 * math.log(0.75)) * 4
    assert soft_cross_entropy(student, HALVES, temperature=2.0).item() == pytest.approx(expected)


def test_kl_divergence_is_soft_cross_entropy_minus_teacher_entropy():
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert kl_divergence(QUARTERS, HALVES).item() == pytest.approx(expected)
    student = torch.tensor([[0.0, 2 * math.log(3.0)]])
    assert kl_divergence(student, HALVES, temperature=2.0).item() == pytest.approx(4 * expected)
    assert kl_divergence(HALVES, HALVES).item() == pytest.approx(0.0, abs=1e-7)


def test_representation_mse_sums_or_averages_over_units():
    student = torch.tensor([[1.0, 2.0, 2.0]])
    assert representation_mse(student, torch.zeros(1, 3), reduction="sum").item() == pytest.approx(0.5 * 9)
    assert representation_mse(student, torch.zeros(1, 3), reduction="mean").item() == pytest.approx(0.5 * 9 / 3)
    assert representation_mse(student, torch.zeros(1, 3)).item() == pytest.approx(1.5)  # M&A eq. 7: element-wise


def test_representation_losses_average_over_every_leading_row():
    """A sentence pair gives one vector per sentence, [B, 2, H]: every vector is a row."""
    student = torch.zeros(2, 2, 2)
    teacher = torch.tensor([[[2.0, 0.0], [0.0, 0.0]], [[0.0, 0.0], [2.0, 2.0]]])
    # squared norms per vector 4, 0, 0, 8; sum reduction: 0.5 * mean = 0.5 * 3 = 1.5; mean: 0.75
    assert representation_mse(student, teacher, reduction="sum").item() == pytest.approx(1.5)
    assert representation_mse(student, teacher, reduction="mean").item() == pytest.approx(0.75)
    pair = torch.cat([QUARTERS, HALVES]).reshape(1, 2, 2)
    # KL per vector: (soft [1/2,1/2] vs [1/4,3/4]) and 0 -> mean of the two
    kl = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert representation_kl(pair, torch.zeros(1, 2, 2), reduction="sum").item() == pytest.approx(kl / 2)
    assert representation_kl(pair, torch.zeros(1, 2, 2), reduction="mean").item() == pytest.approx(kl / 4)
    cos = representation_cosine(torch.tensor([[[1.0, 0.0], [1.0, 0.0]]]), torch.tensor([[[0.0, 1.0], [1.0, 0.0]]]))
    assert cos.item() == pytest.approx(0.25)


def test_weighted_loss_applies_the_stage_reduction():
    logits = torch.tensor([[1.0, 2.0]])
    targets = Targets(torch.tensor([-1]), torch.zeros(1, 2))
    outputs = {"logits": logits}
    assert weighted_loss({"logit_mse": 2.0}, outputs, targets).item() == pytest.approx(2 * 0.5 * 5 / 2)
    summed = weighted_loss({"logit_mse": 2.0}, outputs, targets, reductions={"logit_mse": "sum"})
    assert summed.item() == pytest.approx(2 * 0.5 * 5)


def test_representation_kl_compares_softmaxed_vectors():
    # teacher softmax [1/2, 1/2], student softmax [1/4, 3/4]
    expected = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)
    assert representation_kl(QUARTERS, HALVES).item() == pytest.approx(expected)


def test_representation_cosine_is_half_one_minus_cos():
    student = torch.tensor([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0]])
    teacher = torch.tensor([[0.0, 1.0], [2.0, 2.0], [-3.0, 0.0]])
    # orthogonal 0.5, parallel 0, opposite 1: mean 0.5
    assert representation_cosine(student, teacher).item() == pytest.approx(0.5)


def test_weighted_loss_applies_ce_to_labeled_examples_only():
    logits = torch.tensor([[0.0, math.log(3.0)], [2.0, 0.0]])
    targets = Targets(torch.tensor([1, -1]), torch.zeros(2, 2))  # example 2 is from the transfer set
    ce_only = weighted_loss({"ce": 2.0}, {"logits": logits}, targets)
    assert ce_only.item() == pytest.approx(-2 * math.log(0.75))
    both = weighted_loss({"ce": 1.0, "logit_mse": 1.0}, {"logits": logits}, targets)
    expected_mse = (0.5 * math.log(3.0) ** 2 + 0.5 * 4.0) / 2 / 2  # mean over the 2 classes
    assert both.item() == pytest.approx(-math.log(0.75) + expected_mse)


def test_weighted_loss_without_labeled_examples_skips_ce():
    logits = torch.zeros(2, 2, requires_grad=True)
    loss = weighted_loss({"ce": 1.0}, {"logits": logits}, Targets(torch.tensor([-1, -1]), torch.zeros(2, 2)))
    assert loss.item() == 0.0


def test_weighted_loss_passes_the_stage_temperature():
    student = torch.tensor([[0.0, 2 * math.log(3.0)]])
    targets = Targets(torch.tensor([-1]), HALVES)
    loss = weighted_loss({"soft_ce": 1.0}, {"logits": student}, targets, temperature=2.0)
    assert loss.item() == pytest.approx(soft_cross_entropy(student, HALVES, temperature=2.0).item())


def test_representation_loss_needs_the_teacher_layer():
    with pytest.raises(ValueError, match="hidden layer"):
        weighted_loss({"repr_mse": 1.0}, {"logits": HALVES, "representation": HALVES},
                      Targets(torch.tensor([0]), HALVES))


def test_tagging_masks_padding_specials_and_continuations():
    # One sentence: [CLS] w1 ##x w2 [SEP] pad. Logit losses see the 4 real wordpieces minus
    # the specials (w1, ##x, w2); representation losses see word starts only (w1, w2).
    labels = torch.tensor([[IGNORE, 0, 2, 1, IGNORE, IGNORE]])
    starts = torch.tensor([[False, True, False, True, False, False]])
    logits = torch.zeros(1, 6, 3)
    teacher_logits = torch.zeros(1, 6, 3)
    teacher_logits[0, 2] = torch.tensor([0.0, 0.0, 2.0])  # only the continuation differs: 0.5 * 4 / 3 rows (sum)
    teacher_logits[0, [0, 4, 5]] = 100.0  # specials and padding would dominate if not masked
    student_repr = torch.zeros(1, 6, 2)
    teacher_hidden = torch.zeros(1, 6, 2)
    teacher_hidden[0, 2] = 50.0  # the continuation: masked for the representation
    teacher_hidden[0, [0, 4, 5]] = 50.0
    teacher_hidden[0, 3] = torch.tensor([2.0, 0.0])  # w2: 0.5 * 4, averaged over 2 word starts
    targets = Targets(labels, teacher_logits, teacher_hidden, starts)
    outputs = {"logits": logits, "representation": student_repr}
    summed = {"logit_mse": "sum", "repr_mse": "sum"}
    assert weighted_loss({"logit_mse": 1.0}, outputs, targets, reductions=summed).item() == pytest.approx(2.0 / 3)
    assert weighted_loss({"repr_mse": 1.0}, outputs, targets, reductions=summed).item() == pytest.approx(1.0)
    assert weighted_loss({"ce": 1.0}, outputs, targets).item() == pytest.approx(math.log(3))


def test_teacher_rows_transfer_keeps_teacher_losses_off_labeled_rows():
    """Mukherjee & Awadallah eq. 8 / XtremeDistil eq. 7: CE over D_l, logit and representation
    losses over D_u. Row 1 is labeled, row 2 is a transfer row."""
    logits = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    teacher = torch.tensor([[3.0, 0.0], [0.0, 0.0]])
    student_repr, teacher_repr = torch.tensor([[1.0, 1.0], [0.0, 2.0]]), torch.tensor([[0.0, 0.0], [0.0, 0.0]])
    targets = Targets(torch.tensor([0, -1]), teacher, teacher_repr)
    outputs = {"logits": logits, "representation": student_repr}
    weights = {"logit_mse": 1.0, "repr_mse": 1.0}
    everywhere = weighted_loss(weights, outputs, targets, reductions={"logit_mse": "sum", "repr_mse": "sum"})
    transfer = weighted_loss(weights, outputs, targets, reductions={"logit_mse": "sum", "repr_mse": "sum"},
                             teacher_rows="transfer")
    # all rows: logit 1/2 (4 + 4) / 2 = 2, repr 1/2 (2 + 4) / 2 = 1.5; transfer row only: 1/2 * 4 = 2, 1/2 * 4 = 2
    assert everywhere.item() == pytest.approx(3.5)
    assert transfer.item() == pytest.approx(4.0)


def test_teacher_rows_transfer_on_tagging_drops_labeled_sentences():
    logits = torch.zeros((2, 3, 2))
    teacher = torch.zeros((2, 3, 2))
    teacher[1, 1] = torch.tensor([2.0, 0.0])  # the transfer sentence's one real token
    teacher[0, 1] = torch.tensor([10.0, 0.0])  # the labeled sentence: would dominate if read
    labels = torch.tensor([[IGNORE, 1, IGNORE], [IGNORE, -1, IGNORE]])
    loss = weighted_loss({"logit_mse": 1.0}, {"logits": logits}, Targets(labels, teacher),
                         reductions={"logit_mse": "sum"}, teacher_rows="transfer")
    assert loss.item() == pytest.approx(0.5 * 4.0)
