"""A table's findings: each claim of the paper its preset lists (`findings:`), judged on our seeds.

A finding names two rows (read in each column) or two columns (read in each row) and the paper's
relation between them: `>` (the better one above) or `>=` (it reaches the other, at most `margin`
below). In every group it is read in, our difference is mean(better) - mean(worse) over seeds with
its 95% Welch interval (distil.tables.significance; with `>=` the margin is added, so the same rule
asks whether better is above worse - margin), and the verdict is

  * reproduced: the paper's direction, and the interval leaves out zero;
  * consistent: the paper's direction, the interval reaches zero (not significant);
  * inconclusive: tied or reversed, not significant;
  * contradicts: reversed, and the interval leaves out zero;

provided both entries have at least MIN_SEEDS seeds and no seed's run stopped at its epoch cap while
still improving (distil.tables.render's "still improving"): a comparison short of either is "not
judged", with why. A finding the scale cannot test, because the scale lacks the mechanism it
depends on (the preset's `not_comparable`, which names that mechanism), is "not comparable".

A finding read in several groups (Table 8 over four datasets) takes the weakest verdict of the
groups where it was judged: it is reproduced only where every judged group reproduces it. The
verdict is computed here from the recorded cells and never written by hand.
"""

from __future__ import annotations

import functools
import shlex
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from distil.tables.preset import Finding, TablePreset
from distil.tables.significance import CONFIDENCE, POWER, Difference, seeds_to_separate, welch

MIN_SEEDS = 3
VERDICTS = ("reproduced", "consistent", "inconclusive", "contradicts")  # best first
NOT_JUDGED, NOT_COMPARABLE = "not judged", "not comparable"
RANKED = (*VERDICTS, NOT_COMPARABLE, NOT_JUDGED)  # best first: a finding over several claims takes the last
WANTING = ("not run", f"fewer than {MIN_SEEDS} seeds")  # a reading's `why` that more runs answer
RULE = (f"Welch's t-test at {CONFIDENCE:.0%} on the seeds, each side at least {MIN_SEEDS} seeds and no run "
        "stopped still improving")
LEGEND = ("reproduced: the paper's direction, significant; consistent: the paper's direction, not significant; "
          "inconclusive: tied or reversed, not significant; contradicts: reversed, significant; not comparable: "
          "this scale lacks the mechanism the finding depends on; not judged: too few seeds, a run still "
          "improving, or not run")


@dataclass(frozen=True)
class Reading:
    """The finding in one group (a column for two rows, a row for two columns)."""

    group: str | None
    paper: tuple[float | None, float | None]  # the paper's better, worse
    ours: tuple[float | None, float | None]  # our means
    seeds: tuple[int, int]
    difference: Difference | None  # mean(better) - mean(worse); None: a side has no number
    verdict: str
    why: str = ""  # for "not judged": what is missing
    sides: tuple[dict[str, float], dict[str, float]] = ({}, {})  # each side's runs (cell key -> own seconds)
    builds: dict[str, float | None] = field(default_factory=dict)  # artifacts they read -> build seconds
    needed: int | None = None  # consistent: the seeds a side that would separate it (seeds_to_separate)

    @property
    def runs(self) -> dict[str, float]:
        """The runs read, both sides (a run on both counted once)."""
        return {**self.sides[0], **self.sides[1]}

    @property
    def paces(self) -> tuple[float | None, float | None]:
        """Each side's seconds a seed, every run its number needed (None: none timed)."""
        return tuple(sum(side.values()) / seeds if side and seeds else None
                     for side, seeds in zip(self.sides, self.seeds, strict=True))

    def minutes_for(self, seeds: int) -> float | None:
        """The CPU minutes of the runs that would bring each side to `seeds` seeds, each side at its pace
        (a side not timed yet at the other's; None: neither timed)."""
        timed = [pace for pace in self.paces if pace is not None]
        if not timed:
            return None
        paces = [timed[0] if pace is None else pace for pace in self.paces]
        return sum(max(0, seeds - have) * pace for have, pace in zip(self.seeds, paces, strict=True)) / 60


@dataclass
class Judgement:
    finding: Finding
    scale: str
    readings: list[Reading] = field(default_factory=list)
    table: str = ""  # the preset's name, for the command that judges the claim
    labels: frozenset[str] = frozenset()  # its rows' and columns' labels: what `--only` names

    @property
    def verdict(self) -> str:
        if self.finding.not_comparable.get(self.scale):
            return NOT_COMPARABLE
        judged = [r.verdict for r in self.readings if r.verdict in VERDICTS]
        return max(judged, key=VERDICTS.index) if judged else NOT_JUDGED

    @property
    def runs(self) -> dict[str, float | None]:
        """The runs the finding reads and the artifacts they read, each once: cell key -> its run's seconds
        without its builds, artifact key -> its build's seconds (None: not recorded; distil.tables.costs)."""
        return {key: seconds for reading in self.readings for key, seconds in {**reading.builds,
                                                                               **reading.runs}.items()}

    @property
    def minutes(self) -> float:
        """The CPU time of the runs the finding reads and of the builds they read, each once."""
        return minutes_of(self.runs)

    @property
    def explanation(self) -> str:
        """The preset's reason this scale may not show the finding, where it is not reproduced."""
        return "" if self.verdict == VERDICTS[0] else self.finding.explanation.get(self.scale, "")

    @property
    def reason(self) -> str:
        """Why the verdict is what it is, where it is no comparison: the mechanism, or what is missing."""
        if self.verdict == NOT_COMPARABLE:
            return self.finding.not_comparable[self.scale]
        if self.verdict == NOT_JUDGED:
            return "; ".join(dict.fromkeys(r.why for r in self.readings)) or "no group to read it in"
        return ""

    @functools.cached_property  # read by the block and the record; judge() has appended every reading by then
    def to_judge(self) -> tuple[str, float | None] | None:
        """For a claim not judged for want of runs: the `distil table` command that runs the cells of
        the group nearest to a verdict (the most seeds on its thinner side, then the first), and its
        CPU minutes, each side's missing runs at the pace of its runs so far (None: none ran); None
        otherwise."""
        if self.verdict != NOT_JUDGED or self.finding.not_comparable.get(self.scale):
            return None
        wanting = [r for r in self.readings if r.why in WANTING]
        if not wanting:
            return None  # runs still improving: a budget to raise, not runs to add
        nearest = max(wanting, key=lambda r: (min(r.seeds), sum(r.seeds), -wanting.index(r)))
        # a group that is no row or column (a curve's epoch, rows_from) is every run's: no --only for it
        group = [nearest.group] if nearest.group in self.labels else []
        command = " ".join(["distil table", self.table, *(f"--only {shlex.quote(label)}" for label in
                                                           [*group, self.finding.better, self.finding.worse])])
        return command, nearest.minutes_for(MIN_SEEDS)

    @property
    def to_separate(self) -> tuple[int | None, float | None] | None:
        """For a consistent claim (the paper's direction, not significant): the seeds a side at which
        every consistent group would separate with POWER's chance, were its difference and spread the
        true ones (None: more than seeds_to_separate's most), and the CPU minutes of the runs that adds
        (None: not timed, or no such count); None for any other verdict."""
        if self.verdict != VERDICTS[1]:
            return None
        wanting = [r for r in self.readings if r.verdict == VERDICTS[1]]
        if any(r.needed is None for r in wanting):
            return None, None
        seeds = max(r.needed for r in wanting)
        minutes = [r.minutes_for(seeds) for r in wanting]
        return seeds, None if None in minutes else sum(minutes)


def minutes_of(costs: dict[str, float | None]) -> float:
    """The minutes of runs and builds, those without recorded seconds left out (the pages count them)."""
    return sum(seconds for seconds in costs.values() if seconds is not None) / 60


def verdict_of(difference: Difference) -> str:
    """The verdict of one judged difference (the margin already added)."""
    if difference.significant:
        return VERDICTS[0] if difference.estimate > 0 else VERDICTS[3]
    return VERDICTS[1] if difference.estimate > 0 else VERDICTS[2]


def judge(preset: TablePreset, finding: Finding, grid: dict, scale: str,
          paper_value: Callable[[TablePreset, str, str | None], float | None]) -> Judgement:
    """The finding read in each of its groups of `grid` ((row, column) -> render.Entry)."""
    by_rows = finding.better in {row.label for row in preset.rows}
    groups = finding.groups or ([c.label for c in preset.columns] or [None] if by_rows
                                else [r.label for r in preset.rows])

    def at(member: str, group: str | None) -> tuple[str, str | None]:
        return (member, group) if by_rows else (group, member)

    judgement = Judgement(finding, scale, table=preset.name,
                          labels=frozenset(axis.label for axis in [*preset.rows, *preset.columns]))
    for group in groups:
        a, b = grid.get(at(finding.better, group)), grid.get(at(finding.worse, group))
        paper = (paper_value(preset, *at(finding.better, group)), paper_value(preset, *at(finding.worse, group)))
        judgement.readings.append(reading(finding, group, a, b, paper))
    return judgement


def reading(finding: Finding, group: str | None, a, b, paper: tuple) -> Reading:
    sides = tuple({} if entry is None else dict(entry.runs) for entry in (a, b))
    builds = {key: seconds for entry in (a, b) if entry is not None for key, seconds in entry.builds.items()}
    values = [[] if entry is None else entry.values for entry in (a, b)]
    seeds = (len(values[0]), len(values[1]))
    ours = tuple(sum(v) / len(v) if v else None for v in values)
    if not all(values):
        return Reading(group, paper, ours, seeds, None, NOT_JUDGED, "not run", sides, builds)
    raw = welch(values[0], values[1])
    improving = sum(entry.improving for entry in (a, b))
    if min(seeds) < MIN_SEEDS:
        verdict, why = NOT_JUDGED, f"fewer than {MIN_SEEDS} seeds"
    elif improving:
        verdict, why = NOT_JUDGED, f"{improving} run{'s' * (improving > 1)} still improving"
    else:
        verdict, why = verdict_of(Difference(raw.estimate + finding.margin, raw.half_width, raw.degrees)), ""
    needed = (seeds_to_separate(raw.estimate + finding.margin, *map(statistics.stdev, values))
              if verdict == VERDICTS[1] else None)
    return Reading(group, paper, ours, seeds, raw, verdict, why, sides, builds, needed)


def judgements(preset: TablePreset, grid: dict, scale: str, paper_value) -> list[Judgement]:
    return [judge(preset, finding, grid, scale, paper_value) for finding in preset.findings]


def claim_text(finding: Finding) -> str:
    relation = (f"reaches (at most {finding.margin:g} below)" if finding.margin else "reaches") \
        if finding.relation == ">=" else ">"
    return f"{finding.better} {relation} {finding.worse}"


def reading_text(r: Reading, fmt: Callable[..., str]) -> str:
    where = f"{r.group}: " if r.group is not None else ""
    paper = (f"paper {fmt(r.paper[0], signed=False)} vs {fmt(r.paper[1], signed=False)} "
             f"({fmt(r.paper[0] - r.paper[1])}); " if None not in r.paper else "paper –; ")
    if r.difference is None:
        return f"{where}{paper}ours not run"
    d = r.difference
    interval = (f" [{fmt(d.low)}, {fmt(d.high)}]" if d.judged else " (no interval: one seed)")
    ours = (f"ours {fmt(r.ours[0], signed=False)} vs {fmt(r.ours[1], signed=False)}: {fmt(d.estimate)}{interval} "
            f"(n={r.seeds[0]}, {r.seeds[1]})")
    verdict = r.verdict if r.verdict != NOT_JUDGED else f"not judged: {r.why}"
    return f"{where}{paper}{ours} → {verdict}"


def block(found: list[Judgement], fmt: Callable[..., str]) -> str:
    """The md findings block under a table: each claim, its verdict, and its reading in each group."""
    if not found:
        return ""
    lines = [f"**Findings** (each of the paper's claims this table tests, judged by {RULE}; a claim read in "
             f"several groups takes its weakest judged verdict. {LEGEND[0].upper()}{LEGEND[1:]}.)", ""]
    for i, judgement in enumerate(found, 1):
        f = judgement.finding
        cite = f" ({f.section})" if f.section else ""
        reason = f": {judgement.reason}" if judgement.reason else ""
        lines.append(f"{i}. *{f.claim}*{cite}, {claim_text(f)}: **{judgement.verdict}**{reason}")
        lines += [f"   - {reading_text(r, fmt)}" for r in judgement.readings]
        lines += [f"   - scale probe: {f.probe}"] if f.probe else []
        lines += [f"   - at {judgement.scale} scale: {judgement.explanation}"] if judgement.explanation else []
        if step := judgement.to_judge:
            lines.append(f"   - to judge it: {to_judge_text(step)}")
        if plan := judgement.to_separate:
            lines.append(f"   - to separate it: {to_separate_text(plan)}")
    return "\n".join(lines)


def to_judge_text(to_judge: tuple[str, float | None]) -> str:
    """"`distil table ...` (~12 CPU minutes at the pace of its runs so far, ...)", or without a run to time
    it by, the command and where its cost is."""
    command, minutes = to_judge
    # a run's own seconds leave out its teacher and pre-trained student (distil.tables.costs), which a new
    # seed may have to build: the pace says so rather than pass for the whole cost
    cost = (f"~{minutes:.0f} CPU minutes at the pace of its runs so far, besides any teacher or pre-trained "
            "student a new seed builds" if minutes is not None
            else "none of its runs has run yet: its preset's first line estimates the table")
    return f"`{command}` ({cost})"


def to_separate_text(plan: tuple[int | None, float | None]) -> str:
    """"~20 seeds a side to find it significant 80% of the time ...; ~40 CPU minutes ...", or that no plan
    of seeds would."""
    seeds, minutes = plan
    if seeds is None:
        return "more seeds than a plan can hold (over a thousand a side) at this difference and spread"
    cost = (f"; ~{minutes:.0f} CPU minutes of runs at their pace so far, besides any teacher or pre-trained "
            "student a new seed builds" if minutes is not None else "")
    return (f"~{seeds} seeds a side to find it significant {POWER:.0%} of the time, were this difference and "
            f"spread the true ones{cost}")


def rounded(to_judge: tuple[str, float | None] | None) -> list | None:
    """A plan (a command, or seeds a side) and its whole minutes, as the findings record keeps them."""
    if to_judge is None:
        return None
    command, minutes = to_judge
    return [command, None if minutes is None else round(minutes)]


def record(preset: TablePreset, found: list[Judgement]) -> list[dict]:
    """The findings as data (outputs/tables/<name>.findings.json), for the overview page and the README."""
    return [{"table": preset.name, "paper": preset.paper, "table_title": f"{preset.table}: {preset.title}",
             "claim": j.finding.claim, "section": j.finding.section, "relation": claim_text(j.finding),
             "headline": j.finding.headline, "scale": j.scale, "verdict": j.verdict, "reason": j.reason,
             "minutes": round(j.minutes, 1),
             "runs": {key: None if s is None else round(s, 1) for key, s in sorted(j.runs.items())},
             "probe": j.finding.probe, "explanation": j.explanation,
             "to_judge": rounded(j.to_judge),
             "to_separate": rounded(j.to_separate),
             "readings": [{"group": r.group, "paper": list(r.paper), "ours": list(r.ours), "seeds": list(r.seeds),
                           "difference": None if r.difference is None else r.difference.estimate,
                           "low": None if r.difference is None else r.difference.low,
                           "high": None if r.difference is None else r.difference.high,
                           "verdict": r.verdict, "why": r.why, "needed": r.needed} for r in j.readings]}
            for j in found]
