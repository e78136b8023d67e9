"""Where a table's ordering agrees with the paper's, and whether the spread over seeds supports it.

A preset with `compare: columns` ranks the columns within each row (Mukherjee Table 10: RNN, no
distillation, distillation); `compare: rows` ranks the rows within each column (XtremeDistil
Table 3: the strategies at each transfer size). Higher is better. For every pair of neighbours in
the paper's order (the paper's better one first) whose two entries both have our number, ours is

  * "holds", "reversed" or "tied": the sign of our difference against the paper's;
  * "beyond the spread" when |difference| > 2 standard errors of the difference over seeds,
    "within the spread" otherwise. The standard error is s_p * sqrt(1/n_a + 1/n_b), with s_p^2 the
    seed variance pooled over every entry of the row or column the pair is ranked within
    (sum (n_i - 1) s_i^2 / sum (n_i - 1)): one estimate of the seed noise from all its entries
    rather than from the two at hand, because two seeds that happen to land on the same number
    (s = 0) would otherwise make any difference from them "beyond the spread";
  * "one seed" when either entry has a single number: no spread to judge, so no claim.

The paragraph is generated with the table, so the README states an ordering only as the seeds
support it, and a re-run that changes a number changes the sentence too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from distil.tables.preset import TablePreset

SPREAD_FACTOR = 2.0  # a difference counts when it is more than twice its standard error


def pooled_variance(samples: Iterable[Sequence[float]]) -> float | None:
    """The seed variance pooled over samples, sum (n_i - 1) s_i^2 / sum (n_i - 1), each s_i^2 the
    sample variance; samples of one value carry no spread and are left out. None when none is left."""
    spread = [values for values in samples if len(values) >= 2]
    if not spread:
        return None
    degrees = sum(len(values) - 1 for values in spread)
    return sum((len(values) - 1) * statistics.variance(values) for values in spread) / degrees


def beyond_spread(a: Sequence[float], b: Sequence[float], variance: float | None = None) -> bool | None:
    """Whether mean(a) - mean(b) is more than SPREAD_FACTOR standard errors of the difference,
    sqrt(variance * (1/n_a + 1/n_b)); `variance` is the seed variance pooled over the entries the
    pair is ranked among (pooled_variance), by default over a and b alone. None when either has a
    single value (no spread to judge, so no claim)."""
    if len(a) < 2 or len(b) < 2:
        return None
    if variance is None:
        variance = pooled_variance([a, b])
    error = math.sqrt(variance * (1 / len(a) + 1 / len(b)))
    return abs(statistics.mean(a) - statistics.mean(b)) > SPREAD_FACTOR * error


@dataclass(frozen=True)
class Verdict:
    group: str  # the row (compare: columns) or column (compare: rows) the pair is ranked within
    better: str  # the paper's better entry of the pair
    worse: str
    difference: float  # ours: better - worse, in the units shown
    holds: bool
    judged: bool  # both entries have >= 2 seeds
    beyond: bool  # |difference| > SPREAD_FACTOR standard errors (only when judged)

    def text(self, fmt_difference) -> str:
        order = "holds" if self.holds else "tied" if self.difference == 0 else "reversed"
        if not self.judged:
            spread = "one seed, not judged"
        else:
            spread = "beyond the spread" if self.beyond else "within the spread"
        return f"{self.better} > {self.worse}: {order} ({fmt_difference(self.difference)}, {spread})"


def verdicts(preset: TablePreset, grid: dict, rows: list[str], columns: list[str | None],
             paper_value) -> list[Verdict]:
    """Each neighbouring pair of the paper's order within each group, with our verdict on it."""
    if preset.compare is None:
        return []
    groups, members = (rows, columns) if preset.compare == "columns" else (columns, rows)
    found = []
    for group in groups:
        def at(member, group=group):
            return (group, member) if preset.compare == "columns" else (member, group)
        published = [(paper_value(preset, *at(m)), m) for m in members]
        ranked = [m for value, m in sorted(((v, m) for v, m in published if v is not None),
                                           key=lambda pair: -pair[0])]
        variance = pooled_variance(grid[at(m)].values for m in members if grid.get(at(m)) is not None)
        for better, worse in zip(ranked, ranked[1:], strict=False):
            if paper_value(preset, *at(better)) == paper_value(preset, *at(worse)):
                continue  # a tie in the paper states no order
            a, b = grid.get(at(better)), grid.get(at(worse))
            if a is None or b is None or not a.values or not b.values:
                continue
            difference = a.mean - b.mean
            beyond = beyond_spread(a.values, b.values, variance)
            label = "all rows" if group is None else str(group)
            found.append(Verdict(label, str(better), str(worse), difference, difference > 0, beyond is not None,
                                 bool(beyond)))
    return found


def paragraph(preset: TablePreset, found: list[Verdict], fmt_difference) -> str:
    """The md under the table: a count, then every pair by group. Empty without `compare`."""
    if preset.compare is None:
        return ""
    within = "row" if preset.compare == "columns" else "column"
    head = (f"**Orderings against the paper's** (within each {within}, each pair of neighbours in the paper's "
            f"order, the paper's better one first; our difference; \"beyond the spread\": more than "
            f"{SPREAD_FACTOR:g} standard errors, the seed variance pooled over the {within}).")
    if not found:
        return f"{head} No pair has both our numbers yet."
    held = sum(v.holds for v in found)
    supported = sum(v.holds and v.beyond for v in found)
    against = sum(not v.holds and v.beyond for v in found)
    unjudged = sum(not v.judged for v in found)
    count = (f"The paper's order holds in {held} of {len(found)} pairs: {supported} beyond the spread, "
             f"{against} reversed beyond the spread, {unjudged} on one seed (not judged).")
    lines = [head, count, ""]
    for group in dict.fromkeys(v.group for v in found):
        pairs = "; ".join(v.text(fmt_difference) for v in found if v.group == group)
        lines.append(f"- {group}: {pairs}")
    return "\n".join(lines)
