"""distil.tables.significance: the one rule a table's difference must pass, a t-test at 95%."""

from __future__ import annotations

import pytest

from distil.tables.significance import pooled, t_quantile, welch


def test_the_critical_value_is_the_t_quantile_not_two():
    assert t_quantile(2) == pytest.approx(4.302653, abs=1e-6)
    assert t_quantile(3) == pytest.approx(3.182446, abs=1e-6)
    assert t_quantile(1e9) == pytest.approx(1.959964, abs=1e-6)  # the normal's, at infinite df


def test_welch_interval_matches_the_welch_satterthwaite_test():
    # scipy.stats.ttest_ind(equal_var=False) on these: t = 3.5237, df = 3.9811, p = 0.0246
    d = welch([80.1, 81.3, 79.8], [78.0, 78.9, 77.2])
    assert d.estimate == pytest.approx(2.366667, abs=1e-6)
    assert d.degrees == pytest.approx(3.981065, abs=1e-6)
    assert d.half_width == pytest.approx(1.868297, abs=1e-6)
    assert (d.low, d.high) == (pytest.approx(0.498370, abs=1e-6), pytest.approx(4.234964, abs=1e-6))
    assert d.significant is True
    # a smaller gap with more spread: same direction, interval across zero
    close = welch([80.1, 81.3, 79.8], [79.0, 80.9, 78.2])
    assert close.half_width == pytest.approx(2.842641, abs=1e-6) and close.significant is False


def test_two_seeds_that_pass_two_standard_errors_fail_the_t_test():
    # 2 seeds a side, s = 1 each: SE = 1, the old rule's 2 SE passed a 2.5-point gap; t(0.975, 2) = 4.30 does not
    d = welch([3.5 - 0.7071068, 3.5 + 0.7071068], [1.0 - 0.7071068, 1.0 + 0.7071068])
    assert d.degrees == pytest.approx(2.0) and d.significant is False


def test_one_value_on_a_side_has_no_interval_and_no_claim():
    d = welch([81.0], [70.0, 71.0])
    assert d.estimate == pytest.approx(10.5) and d.half_width is None and d.significant is None


def test_no_spread_on_either_side_counts_any_difference():
    assert welch([1.0, 1.0], [0.5, 0.5]).significant is True
    assert welch([1.0, 1.0], [1.0, 1.0]).significant is False


def test_the_pooled_form_uses_the_group_variance_and_its_degrees():
    d = pooled([2.0, 2.0], [1.0, 1.0], variance=0.5, degrees=10)
    assert d.half_width == pytest.approx(2.228139 * 0.5 ** 0.5, abs=1e-6)
