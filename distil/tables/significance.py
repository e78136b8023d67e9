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


@lru_cache(maxsize=256)
def t_quantile(degrees: float) -> float:
    """t(1 - (1 - CONFIDENCE)/2, degrees): the two-sided critical value."""
    from scipy.stats import t

    return float(t.ppf(1 - (1 - CONFIDENCE) / 2, degrees))


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
