"""The frontier targets, checked on the SST-2 frontier table's runs (`make frontier`, through
`distil table --frontier-targets`, writes outputs/tables/frontier-targets.{md,csv}):

  * the static student, under the runner's best schedule for it, reaches model2vec's logit-regression
    accuracy: frontier-sst2's row of model2vec's own trainer fit to the teacher's logits (MODEL2VEC_LOGITS,
    student=peer-model2vec-logits), its mean test accuracy over the seeds it has run; "best" is the
    frontier-static row with the highest mean dev accuracy (the test accuracy only reports), else
    frontier-sst2's static row (d1);
  * at >= 20x the BiLSTM student's batch-32 throughput and >= 15x its one-sentence speed, end to end
    (tokenisation included);
  * at >= 0.8x the speed of model2vec's own pipeline on the same sentences;
  * no peer (a tool a user would otherwise pick) is more accurate than every runner student that is at
    least as fast: some student of the runner is on or above the frontier at every latency. "More
    accurate" beyond the spread over seeds, the rule of every ordering the tables state; a tie is
    named as a tie.

A student as deployed is a student a user ships: the table's deployed rows (`reads: onnx | int8`,
each student's ONNX export and int8 copy, timed in the same interleaved run) count as runner
students, each with its own test accuracy and speed (timing.<form>: distil.tables.timing). So the
frontier target takes them among the runner students, and the speed targets take the static student
in each of its served forms, against the BiLSTM served the same way (ONNX against ONNX, int8 against
int8: like against like) and against model2vec's pipeline (a peer, served one way); the form with the
highest ratio is the one reported. The accuracy target stays with the trained student: the schedule
is chosen on dev, which only the trained student was scored on (a deployed form has test scores only,
and choosing among them by test would be choosing on test). The seed spread that judges a tie is
pooled over the trained rows and the peers alone: a deployed row is the same runs again. The targets'
table says which row is behind each number (`rows`): the static form and its reference, the schedule,
and for the frontier the runner row that matches each peer.

Speed ratios between two students come pass by pass from one timing run (their timing.json `seconds`,
written by distil.tables.timing), pooled over seeds, median kept with its min-max.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from distil.tables.orderings import beyond_spread, pooled_spread
from distil.tables.preset import DEPLOYED_READS, Cell
from distil.tables.significance import CONFIDENCE, welch

STATIC, BILSTM, MODEL2VEC = "static (model2vec-style)", "BiLSTM (Mukherjee)", "peer: model2vec (labels)"
MODEL2VEC_LOGITS = "peer: model2vec (teacher logits)"  # the accuracy target's bar: measured, in the table
PEER_PREFIX = "peer: "
EAGER = "student"  # a row that reads its trained student (preset `reads`); DEPLOYED_READS a deployed form


@dataclass
class Target:
    name: str
    ours: float | None  # None: not measured yet (a row has no finished run or no timing)
    required: float | None  # None: the bar is a row not run yet
    spread: str = ""  # min-max of a per-pass ratio, or the rows that decide a frontier check
    rows: str = ""  # the row(s) behind `ours`: for the frontier, the runner row that matches each peer

    @property
    def met(self) -> bool | None:
        return None if self.ours is None or self.required is None else self.ours >= self.required


def by_row(cells: list[Cell], reads: dict[str, str] | None = None) -> dict[str, list[dict]]:
    """The finished runs of each row (one per seed), with their timing where it was measured; a
    deployed row's (`reads`: row -> onnx | int8, as the preset's rows read) as that form."""
    rows: dict[str, dict[int, dict]] = {}
    for cell in cells:
        if cell.metrics is not None and cell.metrics.get("status") == "ok":
            form = (reads or {}).get(cell.row, EAGER)
            rows.setdefault(cell.row, {})[cell.seed] = \
                as_deployed(cell.metrics, form) if form in DEPLOYED_READS else cell.metrics
    return {row: [runs[seed] for seed in sorted(runs)] for row, runs in rows.items()}


def as_deployed(metrics: dict, form: str) -> dict:
    """A run as its deployed form: that form's test scores and timing (timing.<form>, with its own
    per-pass seconds); no timing where it has none (a peer's null, a timing from before the forms were
    timed), which counts as not timed."""
    timing = (metrics.get("timing") or {}).get(form)
    if not timing:
        return {"status": "ok", "student": {}}
    return {"status": "ok", "student": {"test": timing["test"]}, "timing": timing}


def served_forms(cells: list[Cell], reads: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Each trained row's forms: EAGER -> the row itself, and each deployed row of the same runs (the
    same cell keys) by its form, e.g. {"BiLSTM": {"student": "BiLSTM", "onnx": "BiLSTM, ONNX", ...}}."""
    reads = reads or {}
    trained = {cell.key: cell.row for cell in cells if reads.get(cell.row) not in DEPLOYED_READS}
    forms = {row: {EAGER: row} for row in trained.values()}
    for cell in cells:
        form = reads.get(cell.row, EAGER)
        if form in DEPLOYED_READS and cell.key in trained:
            forms[trained[cell.key]][form] = cell.row
    return forms


def accuracies(runs: list[dict], split: str = "test") -> list[float]:
    """Each seed's student accuracy (%) on `split`."""
    return [100 * run["student"][split]["accuracy"] for run in runs]


def accuracy(runs: list[dict], split: str = "test") -> float:
    return statistics.mean(accuracies(runs, split))


def latency(runs: list[dict]) -> float:
    return statistics.median(run["timing"]["single_ms"] for run in runs)


def pass_ratio(slow: list[dict], fast: list[dict], field: str) -> tuple[float, float, float] | None:
    """How many times faster `fast` is than `slow` on `field`'s passes (same seeds, same timing run):
    (median, min, max) over every pass of every seed both have."""
    ratios = [s / f for a, b in zip(slow, fast, strict=False) if "timing" in a and "timing" in b
              for s, f in zip(a["timing"]["seconds"][field], b["timing"]["seconds"][field], strict=True)]
    return (statistics.median(ratios), min(ratios), max(ratios)) if ratios else None


def speed_target(name: str, rows: dict, slow: str, fast: str, field: str, required: float,
                 forms: dict[str, dict[str, str]] | None = None) -> Target:
    """How many times faster `fast` is than `slow`: `fast` in each of its served forms (`forms`,
    served_forms'), against `slow` in the same form where that form was timed, else its own row (a
    peer is served one way); the form with the highest median ratio, its rows named."""
    forms = forms or {}
    best = None
    for form, fast_row in forms.get(fast, {EAGER: fast}).items():
        slow_row = forms.get(slow, {}).get(form, slow)
        if not all("timing" in run for run in rows.get(slow_row, [{}])):
            slow_row = slow
        ratio = pass_ratio(rows[slow_row], rows[fast_row], field) if slow_row in rows and fast_row in rows else None
        if ratio is not None and (best is None or ratio[0] > best[0][0]):
            best = ratio, f"{fast_row} against {slow_row}"
    if best is None:
        return Target(name, None, required)
    (median, low, high), compared = best
    return Target(name, median, required, f"{low:.1f}-{high:.1f} over passes", compared)


def frontier_target(rows: dict[str, list[dict]], deployed: set[str] = frozenset()) -> Target:
    """1 when no peer is more accurate than every runner student at least as fast, else 0; the runner
    students are the trained rows and their `deployed` forms, each at its own accuracy and latency.
    "More accurate" as every ordering this project states (distil.tables.orderings): beyond the spread
    over seeds (the pooled t-test at 95%, the seed variance and df pooled over every timed row but the
    deployed ones, which are the same runs again), or by the mean when either side has one seed. A
    peer below the mean of no faster runner student but within the spread of the most accurate one is
    a tie, and the spread says so. `rows` names the runner row that matches each peer: the fastest
    of those as fast and as accurate, or the one it ties with."""
    timed = {row: runs for row, runs in rows.items() if runs and all("timing" in run for run in runs)}
    peers = [row for row in timed if row.startswith(PEER_PREFIX)]
    ours = [row for row in timed if not row.startswith(PEER_PREFIX)]
    name = "a runner student on or above the frontier at every latency"
    if not peers or not ours:
        return Target(name, None, 1)
    beaten, tied, matched = [], [], []
    # one seed noise for the task
    spread = pooled_spread(accuracies(runs) for row, runs in timed.items() if row not in deployed)
    for peer in peers:
        faster = [o for o in ours if latency(timed[o]) <= latency(timed[peer])]
        matching = [o for o in faster if accuracy(timed[o]) >= accuracy(timed[peer])]
        if matching:
            matched.append(f"{peer}: {min(matching, key=lambda o: latency(timed[o]))}")
            continue
        rival = max(faster, key=lambda o: accuracy(timed[o])) if faster else None
        if rival is not None and beyond_spread(accuracies(timed[peer]), accuracies(timed[rival]), spread) is False:
            tied.append(f"{peer} ({described(timed[peer])}; {rival}: {described(timed[rival])})")
            matched.append(f"{peer}: {rival} (a tie)")
        else:
            beaten.append(f"{peer} ({nearest(peer, timed, ours)})")
    ties = "; tied within the spread: " + "; ".join(tied) if tied else ""
    spread = ("every peer matched" if not beaten else "not matched: " + "; ".join(beaten)) + ties
    return Target(name, float(not beaten), 1, spread, "; ".join(matched))


def nearest(peer: str, timed: dict[str, list[dict]], ours: list[str]) -> str:
    """Why a peer is not matched, against the fastest runner student at least as accurate (else the
    most accurate one): its accuracy and latency beside the peer's."""
    at_least = [o for o in ours if accuracy(timed[o]) >= accuracy(timed[peer])]
    student = min(at_least, key=lambda o: latency(timed[o])) if at_least else \
        max(ours, key=lambda o: accuracy(timed[o]))
    return f"{described(timed[peer])}; {student}: {described(timed[student])}"


def described(runs: list[dict]) -> str:
    """`80.83 ± 0.73% (n=3) at 3.65 ms`: the spread over seeds says whether a loss is a tie."""
    return f"{with_spread(runs)} at {latency(runs):.2f} ms"


def with_spread(runs: list[dict]) -> str:
    """`80.83 ± 0.73% (n=3)`: the test accuracy's mean and sample std over seeds."""
    values = accuracies(runs)
    spread = f" ± {statistics.stdev(values):.2f}" if len(values) > 1 else ""
    return f"{statistics.mean(values):.2f}{spread}% (n={len(values)})"


def static_accuracy_target(rows: dict[str, list[dict]], schedules: dict[str, list[dict]]) -> Target:
    """The static student's test accuracy under the schedule with the best mean dev accuracy (each
    schedule's runs all seeds it has); frontier-sst2's own static row (d1) without schedule runs. The bar:
    model2vec's trainer fit to the teacher's logits (MODEL2VEC_LOGITS), its mean test accuracy; `met` reads
    the means, and the spread gives the difference's Welch interval, which says whether a miss is a tie."""
    name = "static student test accuracy (%), best schedule on dev"
    if schedules:
        best = max(schedules, key=lambda row: accuracy(schedules[row], "dev"))
        runs, row = schedules[best], best
        chosen = f"{best} (dev {accuracy(runs, 'dev'):.2f}, n={len(runs)})"
    else:
        runs, row, chosen = rows.get(STATIC), STATIC if STATIC in rows else "", "d1 (frontier-sst2)"
    bar = rows.get(MODEL2VEC_LOGITS)
    if not bar:
        return Target(name, accuracy(runs) if runs else None, None,
                      f"{chosen}; the bar: {MODEL2VEC_LOGITS}, test not run", row)
    against = f"{chosen}; the bar: {MODEL2VEC_LOGITS}, test {with_spread(bar)}"
    if runs:
        difference = welch(accuracies(runs), accuracies(bar))
        interval = "" if not difference.judged else (
            f" [{difference.low:+.2f}, {difference.high:+.2f}], "
            f"{'beyond' if difference.significant else 'within'} the spread (Welch, {CONFIDENCE:.0%})")
        against += f"; ours - the bar: {difference.estimate:+.2f}{interval}"
    return Target(name, accuracy(runs) if runs else None, accuracy(bar), against, row)


def targets(cells: list[Cell], schedule_cells: list[Cell] = (), reads: dict[str, str] | None = None) -> list[Target]:
    """`cells`: frontier-sst2's, its deployed rows' too; `schedule_cells`: frontier-static's (the static
    student's schedules); `reads`: row -> what it reads (onnx, int8: a deployed form; else the trained
    student), as the preset's rows say."""
    rows, forms = by_row(cells, reads), served_forms(cells, reads)
    deployed = {row for row, form in (reads or {}).items() if form in DEPLOYED_READS}
    return [
        static_accuracy_target(rows, by_row(list(schedule_cells))),
        speed_target("static vs BiLSTM, batch 32 end to end (x)", rows, BILSTM, STATIC, "batch32_ex_per_s", 20,
                     forms),
        speed_target("static vs BiLSTM, one sentence end to end (x)", rows, BILSTM, STATIC, "single_ms", 15, forms),
        speed_target("static vs model2vec's pipeline, batch 32 end to end (x)", rows, MODEL2VEC, STATIC,
                     "batch32_ex_per_s", 0.8, forms),
        frontier_target(rows, deployed),
    ]


PRESET = "frontier-sst2"
SCHEDULES = "frontier-static"  # the static student's schedules: the accuracy target takes the best on dev


def write_targets(scale: str, root: Path):
    """Write <root>/tables/frontier-targets.{md,csv} from the frontier runs done at `scale`; the frame."""
    import pandas as pd

    from distil.tables.cells import collect, expand
    from distil.tables.load import load_preset

    preset = load_preset(PRESET)
    # the students as they trained and as they deploy (reads: onnx, int8: the same runs, their timing.<form>)
    cells = [cell for cell in collect(expand(preset, scale), root) if not preset.reads_teacher(cell.row)]
    reads = {row.label: row.reads for row in preset.rows}
    schedule_cells = collect(expand(load_preset(SCHEDULES), scale), root)
    frame = pd.DataFrame([{"target": t.name, "ours": rounded(t.ours), "required": rounded(t.required),
                           "met": {None: "not measured", True: "yes", False: "no"}[t.met],
                           "rows": t.rows, "spread": t.spread} for t in targets(cells, schedule_cells, reads)])
    out = root / "tables"
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "frontier-targets.csv", index=False)
    header = f"<!-- frontier targets ({PRESET} and {SCHEDULES}, scale {scale}) -->\n"
    (out / "frontier-targets.md").write_text(header + frame.to_markdown(index=False) + "\n")
    return frame


def rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
