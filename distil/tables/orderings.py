"""Where a table's ordering agrees with the paper's, and whether the spread over seeds supports it.

A preset with `compare: columns` ranks the columns within each row (Mukherjee Table 10: RNN, no
distillation, distillation); `compare: rows` ranks the rows within each column (XtremeDistil
Table 3: the strategies at each transfer size). Higher is better. For every pair of neighbours in
the paper's order (the paper's better one first) whose two entries both have our number, ours is

  * "holds", "reversed" or "tied": the sign of our difference against the paper's;
  * "beyond the spread" when the difference passes the project's one rule, a two-sided t-test at
    95% (distil.tables.significance): |difference| > t(0.975, df) standard errors, "within the
    spread" otherwise. The standard error is s_p * sqrt(1/n_a + 1/n_b), with s_p^2 the seed
    variance pooled over every entry of the row or column the pair is ranked within
    (sum (n_i - 1) s_i^2 / sum (n_i - 1)) and df its degrees of freedom, sum (n_i - 1): the
    pooled form of the t-test, one estimate of the seed noise from all its entries
    rather than from the two at hand, because two seeds that happen to land on the same number
    (s = 0) would otherwise make any difference from them "beyond the spread". A row that
    `reads: teacher` is left out of a column's pool: its seeds are separate teacher fine-tunes, a
    different noise from the students' the column compares (a pair with it uses the students' pool);
  * "one seed" when either entry has a single number: no spread to judge, so no claim.

The paragraph ends with each group's pooled spread (s, its degrees of freedom, and the margin
t(0.975, df) x SE a difference of two means must pass), so prose citing a spread cites the generated number.
The paragraph is generated with the table, so the README states an ordering only as the seeds
support it, and a re-run that changes a number changes the sentence too.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from distil.tables.preset import TablePreset
from distil.tables.significance import pooled


@dataclass(frozen=True)
class Spread:
    """The seed variance pooled over a group's entries and its degrees of freedom, sum (n_i - 1)."""

    variance: float
    degrees: int
    seeds: int  # the most common number of seeds per entry: the n the group's 2 SE is given for

    def typical_margin(self) -> float:
        """The margin a difference between two means of the group's usual number of seeds must pass."""
        return pooled([0.0] * self.seeds, [0.0] * self.seeds, self.variance, self.degrees).half_width


def pooled_spread(samples: Iterable[Sequence[float]]) -> Spread | None:
    """The seed variance pooled over samples, sum (n_i - 1) s_i^2 / sum (n_i - 1), each s_i^2 the
    sample variance; samples of one value carry no spread and are left out. None when none is left."""
    spread = [values for values in samples if len(values) >= 2]
    if not spread:
        return None
    degrees = sum(len(values) - 1 for values in spread)
    variance = sum((len(values) - 1) * statistics.variance(values) for values in spread) / degrees
    return Spread(variance, degrees, statistics.mode(len(values) for values in spread))


def pooled_variance(samples: Iterable[Sequence[float]]) -> float | None:
    spread = pooled_spread(samples)
    return None if spread is None else spread.variance


def beyond_spread(a: Sequence[float], b: Sequence[float], spread: Spread | None = None) -> bool | None:
    """Whether mean(a) - mean(b) passes the pooled t-test at 95%: more than t(0.975, df) standard
    errors sqrt(variance * (1/n_a + 1/n_b)), the variance and df those of `spread`, the seed spread
    pooled over the entries the pair is ranked among (pooled_spread), by default over a and b alone.
    None when either has a single value (no spread to judge, so no claim)."""
    if len(a) < 2 or len(b) < 2:
        return None
    if spread is None:
        spread = pooled_spread([a, b])
    return bool(pooled(a, b, spread.variance, spread.degrees).significant)


@dataclass(frozen=True)
class Verdict:
    group: str  # the row (compare: columns) or column (compare: rows) the pair is ranked within
    better: str  # the paper's better entry of the pair
    worse: str
    difference: float  # ours: better - worse, in the units shown
    holds: bool
    judged: bool  # both entries have >= 2 seeds
    beyond: bool  # the pooled t-test at 95% counts the difference (only when judged)

    def text(self, fmt_difference) -> str:
        order = "holds" if self.holds else "tied" if self.difference == 0 else "reversed"
        if not self.judged:
            spread = "one seed, not judged"
        else:
            spread = "beyond the spread" if self.beyond else "within the spread"
        return f"{self.better} > {self.worse}: {order} ({fmt_difference(self.difference)}, {spread})"


def grouped(preset: TablePreset, rows: list[str], columns: list[str | None]):
    """(groups, members, at): the entries are ranked within each group; at(member, group) is the
    (row, column) of an entry."""
    if preset.compare == "columns":
        return rows, columns, lambda member, group: (group, member)
    return columns, rows, lambda member, group: (member, group)


def group_label(group) -> str:
    return "all rows" if group is None else str(group)


def group_spread(preset: TablePreset, grid: dict, members: list, group, at) -> Spread | None:
    """The seed spread pooled over the group's entries, a teacher row's left out (see the module doc)."""
    entries = [grid.get(at(m, group)) for m in members
               if not (preset.compare == "rows" and preset.reads_teacher(m))]
    return pooled_spread(entry.values for entry in entries if entry is not None)


def spreads(preset: TablePreset, grid: dict, rows: list[str], columns: list[str | None]) -> dict[str, Spread]:
    """Each group's pooled seed spread, for the groups that have one (two seeds in some entry)."""
    if preset.compare is None:
        return {}
    groups, members, at = grouped(preset, rows, columns)
    found = {group_label(group): group_spread(preset, grid, members, group, at) for group in groups}
    return {label: spread for label, spread in found.items() if spread is not None}


def verdicts(preset: TablePreset, grid: dict, rows: list[str], columns: list[str | None],
             paper_value) -> list[Verdict]:
    """Each neighbouring pair of the paper's order within each group, with our verdict on it."""
    if preset.compare is None:
        return []
    groups, members, at = grouped(preset, rows, columns)
    pools = spreads(preset, grid, rows, columns)
    found = []
    for group in groups:
        published = [(paper_value(preset, *at(m, group)), m) for m in members]
        ranked = [m for value, m in sorted(((v, m) for v, m in published if v is not None),
                                           key=lambda pair: -pair[0])]
        pool = pools.get(group_label(group))
        for better, worse in zip(ranked, ranked[1:], strict=False):
            if paper_value(preset, *at(better, group)) == paper_value(preset, *at(worse, group)):
                continue  # a tie in the paper states no order
            a, b = grid.get(at(better, group)), grid.get(at(worse, group))
            if a is None or b is None or not a.values or not b.values:
                continue
            difference = a.mean - b.mean
            beyond = beyond_spread(a.values, b.values, pool)
            found.append(Verdict(group_label(group), str(better), str(worse), difference, difference > 0,
                                 beyond is not None, bool(beyond)))
    return found


def paragraph(preset: TablePreset, found: list[Verdict], fmt_number,
              group_spreads: dict[str, Spread] | None = None) -> str:
    """The md under the table: a count, every pair by group, then each group's pooled spread (in the
    units shown: fmt_number(value, signed=True) formats a difference, signed=False a spread). Empty
    without `compare`."""
    if preset.compare is None:
        return ""
    within = "row" if preset.compare == "columns" else "column"
    head = (f"**Orderings against the paper's** (within each {within}, each pair of neighbours in the paper's "
            f"order, the paper's better one first; our difference; \"beyond the spread\": a t-test at 95% "
            f"counts it, |difference| > t(0.975, df) standard errors, the seed variance and its df pooled "
            f"over the {within}).")
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
        pairs = "; ".join(v.text(fmt_number) for v in found if v.group == group)
        lines.append(f"- {group}: {pairs}")
    if group_spreads:
        lines += ["", spread_sentence(preset, group_spreads, fmt_number)]
    return "\n".join(lines)


def spread_sentence(preset: TablePreset, group_spreads: dict[str, Spread], fmt_number) -> str:
    within = "row" if preset.compare == "columns" else "column"
    teacher = (" (the teacher's row left out)" if preset.compare == "rows"
               and any(preset.reads_teacher(row.label) for row in preset.rows) else "")
    parts = [f"{group} s = {fmt_number(math.sqrt(spread.variance), signed=False)} on {spread.degrees} df, "
             f"margin {fmt_number(spread.typical_margin(), signed=False)} (means of {spread.seeds} seeds)"
             for group, spread in group_spreads.items()]
    return (f"Seed spread pooled over each {within}{teacher}: the pooled sample std s, its degrees of freedom, "
            f"and the margin t(0.975, df) x SE a difference of two means must pass: "
            + "; ".join(parts) + ".")
