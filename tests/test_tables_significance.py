"""distil.tables.significance: the one rule a table's difference must pass, a t-test at 95%."""

from __future__ import annotations

import pytest

from distil.tables.significance import pooled, seeds_to_separate, t_quantile, welch


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


def test_the_seeds_to_separate_a_difference_are_the_fewest_where_the_t_approximation_reaches_80_percent():
    """Wu Table 1's SST-2 gap at 3 seeds (+1.50, std 1.79 and 1.48): 20 seeds a side, not 19."""
    from scipy.stats import t

    def reaches(n, d=1.5, a=1.79, b=1.48):
        df = (n - 1) * (a * a + b * b) ** 2 / (a ** 4 + b ** 4)
        return (t.ppf(0.975, df) + t.ppf(0.80, df)) * ((a * a + b * b) / n) ** 0.5 <= d

    assert seeds_to_separate(1.5, 1.79, 1.48) == 20 and reaches(20) and not reaches(19)
    assert seeds_to_separate(-1.5, 1.79, 1.48) == 20  # the size of the gap, either way
    assert seeds_to_separate(0.86, 0.63, 0.25) == 7
    assert seeds_to_separate(1.0, 0.0, 0.0) == 2  # no spread: the fewest seeds that have one
    assert seeds_to_separate(0.0, 1.0, 1.0) is None  # no difference: no number of seeds
    assert seeds_to_separate(0.01, 3.0, 3.0) is None  # over a thousand a side


def test_at_the_seeds_to_separate_welchs_test_finds_the_difference_about_80_percent_of_the_time():
    """Simulated: normal seeds with the planned difference and spreads, Welch's 95% test at that n
    (scipy's, on 20,000 draws at once: the test `welch` passes, test_welch_interval_matches_...)."""
    import numpy as np
    from scipy.stats import ttest_ind

    n = seeds_to_separate(1.5, 1.79, 1.48)
    rng = np.random.default_rng(0)
    a = rng.normal(1.5, 1.79, size=(20000, n))
    b = rng.normal(0.0, 1.48, size=(20000, n))
    found = ttest_ind(a, b, axis=1, equal_var=False).pvalue < 0.05
    assert found.mean() == pytest.approx(0.80, abs=0.01)
