"""distil-bench in --quick mode: files, one row per model, honest param counts, every target judged.

No timing assertions on real models: timings depend on the machine and its load; only their presence and sign
are checked. The ratio aggregation is tested on hand-made timings and on fake models driving a fake clock.
"""

from __future__ import annotations

import itertools
import statistics
from dataclasses import astuple

import pandas as pd
import pytest

from distil.bench import students as bench
from distil.students.bilstm import BiLSTMClassifier


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    from distil.cli.bench import students

    students(["--quick", "--out", str(out), "--examples", "64", "--seq-len", "8"])  # 2 batches: 2 passes
    return out


@pytest.mark.heavy
def test_writes_markdown_and_csv(quick_run):
    assert (quick_run / "bench.md").is_file()
    assert (quick_run / "bench.csv").is_file()
    assert not list(quick_run.glob("*.tmp"))  # atomic writes leave no temporaries behind


@pytest.mark.heavy
def test_csv_has_every_model_with_positive_measurements(quick_run):
    table = pd.read_csv(quick_run / "bench.csv")
    names = {spec.name for spec in (*bench.TEACHERS, *bench.STUDENTS)}
    assert set(table["model"]) == names
    assert set(table["kind"]) == {"teacher", "student"}
    assert (table["batch32_ex_per_s"] > 0).all()
    assert (table["online_ms"] > 0).all()
    assert (table["params"] > 0).all()


@pytest.mark.parametrize(("name", "vocab", "embedding", "hidden"), [
    ("BiLSTM E300 H2x300", 30522, 300, 300),
    ("BiLSTM E50 H2x100", 119547, 50, 100),
])
@pytest.mark.heavy
def test_student_params_match_an_independently_built_model(quick_run, name, vocab, embedding, hidden):
    table = pd.read_csv(quick_run / "bench.csv")
    rows = table[table["model"] == name]
    expected = sum(p.numel() for p in BiLSTMClassifier(vocab, embedding, hidden, 2, 0.0).parameters())
    assert (rows["params"] == expected).all()
    assert (rows["vocab"] == vocab).all()


@pytest.mark.heavy
def test_tang_row_is_tangs_architecture(quick_run):
    """Tang Fig. 1 at the Table 2 sizes (E300, H2x150, ReLU layer 200) over bert-large's 30,522 wordpieces:
    embedding + 2 directions x (4 gates x H(E+H) + 2 x 4H biases) + ReLU layer + output, by hand."""
    table = pd.read_csv(quick_run / "bench.csv")
    rows = table[table["model"] == "Tang BiLSTM E300 H2x150 ReLU200"]
    expected = 30522 * 300 + 2 * (4 * 150 * (300 + 150) + 8 * 150) + (300 * 200 + 200) + (200 * 2 + 2)
    assert expected == 9_759_602
    assert list(rows["params"]) == [expected, expected]  # one row per teacher it is compared with
    assert list(rows["vs_teacher"]) == ["bert-base", "bert-large"]


@pytest.mark.heavy
def test_students_are_compared_with_teachers_sharing_their_vocabulary(quick_run):
    table = pd.read_csv(quick_run / "bench.csv")
    xtreme = table[table["model"] == "BiLSTM E50 H2x100"]
    assert list(xtreme["vs_teacher"]) == ["mbert"]
    mbert_params = int(table.loc[table["model"] == "mbert", "params"].iloc[0])
    assert xtreme["compression"].iloc[0] == pytest.approx(mbert_params / xtreme["params"].iloc[0], rel=1e-3)


@pytest.mark.heavy
def test_targets_section_judges_every_check(quick_run):
    text = (quick_run / "bench.md").read_text()
    assert "## Targets" in text
    section = text.split("## Targets", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(bench.TARGETS) == 6
    for target in bench.TARGETS:
        matching = [row for row in rows if target.check in row]
        assert len(matching) == 1, target.check
        verdict = [cell.strip() for cell in matching[0].strip().strip("|").split("|")][-1]
        assert verdict in {"met", "not met"}


@pytest.mark.heavy
def test_csv_keeps_its_columns_and_adds_each_ratios_spread(quick_run):
    table = pd.read_csv(quick_run / "bench.csv")
    # Other readers find these by name: they stay, in this order, and the spread comes after them.
    assert list(table.columns) == ["model", "kind", "params", "vocab", "batch32_ex_per_s", "online_ms",
                                   "vs_teacher", "compression", "speedup", "online_speedup",
                                   "speedup_min", "speedup_max", "online_speedup_min", "online_speedup_max",
                                   "passes"]
    students = table[table["kind"] == "student"]
    assert list(students["passes"]) == [2] * len(students)
    for ratio in ("speedup", "online_speedup"):  # the median of two passes is their mean
        halfway = (students[f"{ratio}_min"] + students[f"{ratio}_max"]) / 2
        # within the csv's 4 decimals: a ratio of 0.0388 may be the mean of 0.0387 and 0.0388
        assert list(students[ratio]) == pytest.approx(list(halfway), rel=1e-3, abs=1e-4)
    assert table.loc[table["kind"] == "teacher", "passes"].isna().all()


@pytest.mark.heavy
def test_targets_show_the_spread_and_the_overhead_is_interleaved(quick_run):
    section = (quick_run / "bench.md").read_text().split("## Targets", 1)[1]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    cells = [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines]
    assert cells[0] == ["check", "source", "target", "measured", "min", "max", "passes", "met"]
    passes = {row[0]: row[6] for row in cells[2:]}
    assert passes["BiLSTM E50 H2x100 params, x fewer than mbert"] == "-"  # a count does not vary by pass
    assert passes["runner overhead: BiLSTM E300 H2x300 throughput / bare Embedding+BiLSTM"] == "2"
    assert passes["BiLSTM E50 H2x100 online latency vs mbert (x)"] == "2"


def test_ratio_aggregation_of_hand_made_pass_timings():
    teacher = [10.0, 12.0, 9.0, 30.0, 11.0]
    student = [0.1, 0.1, 0.1, 0.1, 0.5]
    ratios = bench.pass_ratios(teacher, student)
    assert ratios == pytest.approx([100, 120, 90, 300, 22])
    assert astuple(bench.spread(ratios)) == pytest.approx((100, 22, 300, 5))  # median, min, max, passes


class FakeClock:
    """Time moves only when a fake model runs, by exactly what it costs: no machine noise."""

    def __init__(self):
        self.now = 0.0
        self.calls: list[str] = []

    def __call__(self) -> float:
        return self.now

    def model(self, name: str, seconds: float, slow_call: int | None = None, slowdown: float = 1.0):
        calls = itertools.count(-1)  # call -1 is the warm-up, then call k is pass k (one batch per pass)

        def forward(ids, mask):
            call = next(calls)
            self.calls.append(name)
            self.now += seconds * (slowdown if call == slow_call else 1.0)
        return forward


def test_a_slow_pass_moves_the_median_ratio_less_than_the_mean():
    """A neighbour slows the student 5x during pass 2 only: that pass's ratio drops from 100 to 20; the
    mean of the ratios follows it (100 -> 84), the median does not move."""
    batch = (None, None)
    clock = FakeClock()
    forwards = {"teacher": clock.model("teacher", 1.0), "student": clock.model("student", 0.01, 2, 5.0)}
    seconds = bench.interleaved_seconds(forwards, [[batch]] * 5, clock)
    ratios = bench.pass_ratios(seconds["teacher"], seconds["student"])
    assert ratios == pytest.approx([100, 100, 20, 100, 100])
    summary = bench.spread(ratios)
    assert astuple(summary) == pytest.approx((100, 20, 100, 5))
    assert statistics.mean(ratios) == pytest.approx(84)
    assert abs(summary.median - 100) < abs(statistics.mean(ratios) - 100)


def test_passes_alternate_which_model_runs_first():
    clock = FakeClock()
    forwards = {"teacher": clock.model("teacher", 1.0), "student": clock.model("student", 0.01)}
    bench.interleaved_seconds(forwards, [[(None, None)]] * 3, clock)
    assert clock.calls == ["teacher", "student",  # warm-ups
                           "teacher", "student", "student", "teacher", "teacher", "student"]


def test_targets_are_judged_on_the_median(monkeypatch):
    target = bench.Target("check", "S", "T", "speedup", 15, "paper")
    monkeypatch.setattr(bench, "TARGETS", (target,))
    raw = [{"model": "T", "kind": "teacher", "params": 100, "vocab": 1, "batch32_ex_per_s": 1.0, "online_ms": 10.0},
           {"model": "S", "kind": "student", "params": 10, "vocab": 1, "batch32_ex_per_s": 20.0, "online_ms": 1.0}]
    spread = bench.Spread(median=20, min=5, max=21, passes=3)  # one disturbed pass below the target
    table = bench.comparison_table(raw, {("S", "T"): {"speedup": spread, "online_speedup": spread}})
    overhead = bench.Spread(1.0, 1.0, 1.0, 3)
    row = bench.targets_table(table, overhead).iloc[0]
    assert (row["measured"], row["min"], row["max"], row["passes"], row["met"]) == (20, 5, 21, 3, "met")


def test_a_student_is_timed_in_the_group_of_each_teacher_sharing_its_vocabulary():
    teachers = (bench.TeacherSpec("t1", 1, 8, 1, 8, vocab=10), bench.TeacherSpec("t2", 1, 8, 1, 8, vocab=20))
    students = (bench.StudentSpec("s10", 4, 4, vocab=10), bench.StudentSpec("s30", 4, 4, vocab=30))
    names = [[spec.name for spec in group] for group in bench.groups(teachers, students)]
    assert names == [["t1", "s10"], ["t2"], ["s30"]]
