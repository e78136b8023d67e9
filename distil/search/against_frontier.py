"""The search's Pareto set against the hand-made frontier table of the same teacher, row by row.

For each row of the frontier table (a student, its deployed form, or a peer, over its seeds): at that
row's measured latency, the search's best dev-selected student at or below it (the Pareto student with
the highest dev score, distil.search.pareto.best_within), and its test score against the row's.

The spread. A search trial trains at one seed, so its test score is one run's and carries no spread of
its own: Welch's test (distil.tables.significance) has no interval for a side of one. It is read as one
more run of the frontier row's distribution: the row's 95% prediction interval for a single new run,
mean ± t(0.975, n-1) · s · sqrt(1 + 1/n) (s the row's standard deviation over its n seeds), which
charges the search's run the row's own seed noise. The row's interval for its mean (without the 1)
would treat that one run as exact and call seed noise a loss. Verdicts:

  at least as accurate   the search's test score is the row's mean or above
  within the spread      below the mean, inside the interval
  below                  under the interval (or, when the row has one seed and no spread, under its
                         mean), with the reason read from the search: no student that fast, the row
                         slower than the search's latency limit (nothing over it trains), a peer (not
                         in the space), the row's own run trained but not chosen on dev, or a run the
                         search never tried
  not run                the row has no finished run (or no timing yet): no verdict

Latencies compare in one unit, which the caller chooses: the ratio to the search's reference student
(both the frontier's timing run and the search's time against it, so a machine's speed cancels), or ms.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from distil.search.pareto import best_within
from distil.tables.significance import Difference, t_quantile

AT_LEAST, WITHIN, BELOW, NOT_RUN = "at least as accurate", "within the spread", "below", "not run"
# why a row is below, in a few words: the page's summary line counts the rows below by these
TOO_FAST, OVER_LIMIT, PEER, NOT_CHOSEN, NOT_TRIED = (
    "faster than any student the search trained", "slower than the search's latency limit",
    "another tool's model", "the row's own run, not chosen on dev", "a configuration the search never tried")


@dataclass
class FrontierRow:
    """One row of the frontier table: its test scores over seeds and where it stands in latency."""

    label: str
    values: list[float]  # the test metric of each seed's run (as recorded: 0-1)
    latency: float | None  # in the comparison's unit; None: not timed yet
    ms: float | None = None  # its own ms per text (the frontier's timing), for the reader
    student: str = ""  # its student= override (its family's YAML)
    peer: bool = False  # another tool's model (distil.peers): never in a search's space
    run: tuple[str, str] | None = None  # (cell key at the search's seed, backend): the same run a trial trains


@dataclass
class Verdict:
    row: FrontierRow
    verdict: str
    reason: str = ""
    cause: str = ""  # below: why, in a few words (TOO_FAST, OVER_LIMIT, ...)
    student: dict | None = None  # the search's Pareto row compared (trial, student, backend, dev, test, latency)
    difference: Difference | None = None  # the student's test minus the row's mean, with the row's interval


def prediction_interval(values: Sequence[float], single: float) -> Difference:
    """`single` minus the mean of `values`, with the 95% interval of one new run of their distribution
    (no interval for one value: nothing to say how far a seed moves it)."""
    estimate = single - statistics.mean(values)
    if len(values) < 2:
        return Difference(estimate)
    n = len(values)
    return Difference(estimate, t_quantile(n - 1) * statistics.stdev(values) * math.sqrt(1 + 1 / n), n - 1)


def compare(rows: Sequence[FrontierRow], pareto: Sequence[dict], trials: Sequence[dict], families: Sequence[str],
            max_latency_ms: float | None) -> list[Verdict]:
    """A verdict per frontier row. `pareto`: the search's Pareto set (dev, test, latency in the rows' unit,
    trial, student, backend); `trials`: every finished trial (trial, cell, backend, dev); `families`: the
    space's student families; `max_latency_ms`: the search's latency limit (None: none)."""
    points = [(row["dev"], row["latency"], 0.0) for row in pareto]
    verdicts = []
    for row in rows:
        if not row.values or row.latency is None:
            verdicts.append(Verdict(row, NOT_RUN, "no finished run" if not row.values else "not timed yet"))
            continue
        best = best_within(points, row.latency, None)
        if best is None:
            fastest = min((p["latency"] for p in pareto), default=None)
            verdicts.append(Verdict(row, BELOW, "no student of the search is this fast" + (
                f" (its fastest: {fastest:.3g})" if fastest is not None else " (no finished trial)"), TOO_FAST))
            continue
        student = pareto[best]
        difference = prediction_interval(row.values, student["test"])
        if difference.estimate >= 0:
            verdict = AT_LEAST
        elif difference.judged and difference.estimate >= -difference.half_width:
            verdict = WITHIN
        else:
            verdict = BELOW
        cause, reason = why_below(row, student, trials, families, max_latency_ms) if verdict == BELOW else ("", "")
        verdicts.append(Verdict(row, verdict, reason, cause, student, difference))
    return verdicts


def why_below(row: FrontierRow, student: dict, trials: Sequence[dict], families: Sequence[str],
              max_latency_ms: float | None) -> tuple[str, str]:
    """What the search lacked where it is below a row, read from the row and the search's trials: (its
    cause in a few words, the reason in full)."""
    one = "; the row has one seed: by its mean, no spread" if len(row.values) < 2 else ""
    if row.peer:
        return PEER, f"a peer (another tool's model): not in the search's space{one}"
    if max_latency_ms is not None and row.ms is not None and row.ms > max_latency_ms:
        return OVER_LIMIT, (f"the row runs at {row.ms:.3g} ms, over the search's latency limit "
                            f"({max_latency_ms:g} ms): nothing over it trains, so the students compared are all "
                            f"predicted under it{one}")
    same = [t for t in trials if row.run is not None and (t["cell"], t["backend"]) == row.run]
    if same and same[0]["trial"] == student["trial"]:
        return NOT_CHOSEN, (f"the search chose this row's own run (trial {student['trial']}): its one seed is under "
                            f"the row's{one}")
    if same:
        return NOT_CHOSEN, (f"the search trained this row's own run (trial {same[0]['trial']}, dev "
                            f"{same[0]['dev']:.4f}) and chose trial {student['trial']} on dev ({student['dev']:.4f}): "
                            f"one seed each, selected on dev{one}")
    if row.student in families:
        return NOT_TRIED, (f"the search never trained this configuration of {row.student} (its family is in the "
                           f"space){one}")
    return NOT_TRIED, (f"the search never trained student={row.student}: the space's families are "
                       f"{', '.join(families)}{one}")


def summary(verdicts: Sequence[Verdict]) -> str:
    """The count of each verdict, the rows below grouped by cause: "3 at least as accurate, 1 below (1
    faster than any student the search trained)"."""
    parts = []
    for verdict in (AT_LEAST, WITHIN, BELOW, NOT_RUN):
        if n := sum(v.verdict == verdict for v in verdicts):
            causes = [v.cause for v in verdicts if v.verdict == verdict and v.cause]
            why = "; ".join(f"{causes.count(cause)} {cause}" for cause in dict.fromkeys(causes))
            parts.append(f"{n} {verdict}" + (f" ({why})" if why else ""))
    return ", ".join(parts)
