"""The one rule by which a table's difference counts: a two-sided t-test at 95%.

A difference of two means over seeds, mean(a) - mean(b), counts ("significant") when its 95%
confidence interval, difference ± t(0.975, df) x SE, leaves out zero. Two forms, one rule:

  * Welch's test (`welch`), for two entries on their own: SE^2 = s_a^2/n_a + s_b^2/n_b, df by
    Welch–Satterthwaite. The findings blocks use it: a finding names two entries and nothing else.
  * The pooled form (`pooled`), for a pair ranked within a row or column of entries that share one
    seed noise: SE^2 = s_p^2 (1/n_a + 1/n_b), s_p^2 pooled over the group and df its pooled degrees
    of freedom (the t-quantile for those df, not a fixed 2). The orderings paragraphs use it
    (distil.tables.orderings says why a group's pool rather than the pair's own spread).

Before this rule the tables passed a difference beyond 2 standard errors; with 2 seeds a side that
is a z-test on 2 degrees of freedom, and a t-test rejects many of its claims (t(0.975, 2) = 4.30).
A side with a single value carries no spread: no interval, no claim (None).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

CONFIDENCE = 0.95
POWER = 0.80  # the chance of a significant result that a plan for more seeds aims at (seeds_to_separate)


@lru_cache(maxsize=1024)
def t_quantile(degrees: float, p: float = 1 - (1 - CONFIDENCE) / 2) -> float:
    """t(p, degrees); by default t(1 - (1 - CONFIDENCE)/2, degrees), the two-sided critical value."""
    from scipy.stats import t

    return float(t.ppf(p, degrees))


@dataclass(frozen=True)
class Difference:
    """mean(a) - mean(b) with its 95% interval (half_width None: a side has one value, no interval)."""

    estimate: float
    half_width: float | None = None
    degrees: float | None = None

    @property
    def judged(self) -> bool:
        return self.half_width is not None

    @property
    def low(self) -> float | None:
        return None if self.half_width is None else self.estimate - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.half_width is None else self.estimate + self.half_width

    @property
    def significant(self) -> bool | None:
        """Whether the interval leaves out zero; None when there is no interval."""
        if self.half_width is None:
            return None
        return abs(self.estimate) > self.half_width


def welch(a: Sequence[float], b: Sequence[float]) -> Difference:
    """Welch's two-sample t interval for mean(a) - mean(b). Two sides with no spread at all (every
    seed the same number) have SE 0: any difference then counts, and none does when they are equal."""
    estimate = statistics.mean(a) - statistics.mean(b)
    if len(a) < 2 or len(b) < 2:
        return Difference(estimate)
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se2 = va + vb
    if se2 == 0:
        return Difference(estimate, 0.0, float(len(a) + len(b) - 2))
    degrees = se2 ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    return Difference(estimate, t_quantile(degrees) * math.sqrt(se2), degrees)


def pooled(a: Sequence[float], b: Sequence[float], variance: float, degrees: int) -> Difference:
    """The t interval with the seed variance pooled over a group (its `degrees` of freedom):
    SE = sqrt(variance (1/n_a + 1/n_b)), critical value t(0.975, degrees)."""
    estimate = statistics.mean(a) - statistics.mean(b)
    if len(a) < 2 or len(b) < 2 or degrees < 1:
        return Difference(estimate)
    return Difference(estimate, t_quantile(degrees) * math.sqrt(variance * (1 / len(a) + 1 / len(b))), degrees)


def seeds_to_separate(estimate: float, spread_a: float, spread_b: float, most: int = 1000) -> int | None:
    """The seeds a side (as many on each) at which Welch's test finds a difference `estimate` significant
    with probability POWER, were it and the sides' seed std `spread_a`, `spread_b` the true ones: the
    fewest n >= 2 with (t(0.975, df) + t(POWER, df)) x sqrt((spread_a^2 + spread_b^2) / n) <= |estimate|,
    df Welch's for n a side (the usual t approximation to the power). None: no difference, or more than
    `most` seeds. It plans a run; it is no verdict (the estimate and the spreads are themselves noisy)."""
    if estimate == 0:
        return None
    total = spread_a ** 2 + spread_b ** 2
    if total == 0:
        return 2  # no spread at all: two seeds a side already show it
    # the normal quantiles give a floor (t's are larger), from which the scan starts
    floor = math.ceil(total * ((t_quantile(math.inf) + t_quantile(math.inf, POWER)) / estimate) ** 2)
    for n in range(max(2, floor), most + 1):
        degrees = (n - 1) * total ** 2 / (spread_a ** 4 + spread_b ** 4)
        if (t_quantile(degrees) + t_quantile(degrees, POWER)) * math.sqrt(total / n) <= abs(estimate):
            return n
    return None
