"""Frontier tables: timing saved students against their teacher in one run, metric columns, the Pareto frontier."""

from __future__ import annotations

import json

import pytest

from distil.tables.plots import pareto
from distil.tables.preset import Axis, Cell, Scale, TablePreset
from distil.tables.render import write_table
from distil.tables.timing import Timed, time_models, timing_is_current, with_ratios
from tests.test_tables_render import md_rows
from tests.test_tables_run import table, write_preset


class Ticks:
    """A clock that moves only when a model does work: costs per text are exact, so are the rates."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def model(self, encode_cost: float, forward_cost: float) -> Timed:
        def encode(texts):
            self.now += encode_cost * len(texts)
            return (len(texts),)

        def forward(n):
            self.now += forward_cost * n

        return Timed(encode, forward)


def test_rates_latencies_and_ratios_come_from_the_same_passes():
    ticks = Ticks()
    # the teacher: 0.001 s to encode a text, 0.01 s to run it; the student: the same encoding, 0.001 s to run
    models = {"teacher": ticks.model(0.001, 0.01), "student": ticks.model(0.001, 0.001)}
    results = time_models(models, [f"text {i}" for i in range(96)], passes=3, clock=ticks)
    teacher, student = results["teacher"], results["student"]
    assert teacher["model_batch32_ex_per_s"] == pytest.approx(100.0)  # 1 / 0.01
    assert teacher["batch32_ex_per_s"] == pytest.approx(1 / 0.011)  # encoding counts end to end
    assert student["model_single_ms"] == pytest.approx(1.0) and student["single_ms"] == pytest.approx(2.0)
    ratios = with_ratios(results, "teacher")["student"]
    assert ratios["model_speedup"] == pytest.approx(10.0) and ratios["speedup"] == pytest.approx(5.5)
    assert ratios["single_speedup"] == pytest.approx(5.5) and ratios["model_single_speedup_min"] == pytest.approx(10)
    assert "teacher" not in with_ratios(results, "teacher")


def test_the_pareto_frontier_keeps_the_points_nothing_beats_on_both_axes():
    points = [("slow good", 10.0, 90.0), ("fast bad", 1.0, 70.0), ("mid", 5.0, 85.0), ("dominated", 6.0, 80.0),
              ("fast worse than fast bad", 2.0, 65.0)]
    assert [p[0] for p in pareto(points, lower_x=True)] == ["fast bad", "mid", "slow good"]
    assert [p[0] for p in pareto(points, lower_x=False)] == ["slow good"]


def test_metric_columns_read_one_run_per_row_each_in_its_own_format(tmp_path):
    preset = TablePreset(name="frontier", paper="p", table="T", title="t", scales={"cpu": Scale(seeds=[1])},
                         rows=[Axis("static")],
                         columns=[Axis("accuracy", value="student.test.accuracy", format="percent"),
                                  Axis("params", value="student.params", format="count"),
                                  Axis("speed-up", value="timing.speedup", format="ratio")])
    metrics = {"status": "ok", "student": {"test": {"accuracy": 0.7963}, "params": 1234567},
               "timing": {"speedup": 152.04}}
    cells = [Cell(row="static", column=c.label, seed=1, overrides=[], key="k", metrics=metrics)
             for c in preset.columns]
    rows = md_rows(write_table(preset, cells, tmp_path)[0])
    assert rows == [["", "accuracy", "params", "speed-up"], ["static", "79.63", "1,234,567", "152.0x"]]


def timed_table(tmp_path, monkeypatch, capsys, axes: str) -> tuple[int, str, str]:
    """`distil table frontier` on a table of `axes` (its rows and columns), timed, on smoke cells (d1, seed 1)
    under tmp_path."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "frontier", "timing: true\n"
                 "scales: {cpu: {base: [debug=smoke, schedule=d1], seeds: [1]}}\n" + axes)
    return table(["frontier"], capsys)


@pytest.mark.slow  # ~20 s: two students, a teacher and a timing run; the ratios and staleness have unit tests here
def test_a_timed_table_times_its_students_against_the_teacher_once(tmp_path, monkeypatch, capsys):
    """Two smoke students run, then one interleaved timing run writes each cell's timing.json (same group);
    running the table again times nothing; the table reads timing.* columns."""
    code, out, err = timed_table(tmp_path, monkeypatch, capsys,
                                 "rows: [{label: static, overrides: [student=static, student.embedding_dim=16]},"
                                 " {label: bilstm, overrides: [student=bilstm]}]\n"
                                 "columns: [{label: accuracy, value: student.test.accuracy},"
                                 " {label: speed-up, value: timing.speedup, format: ratio}]\n")
    assert code == 0, err
    timings = [json.loads(p.read_text()) for p in sorted((tmp_path / "outputs" / "cells").glob("*/timing.json"))]
    assert len(timings) == 2 and timings[0]["group"] == timings[1]["group"] and len(timings[0]["group"]) == 2
    for timing in timings:
        assert timing["speedup_min"] <= timing["speedup"] <= timing["speedup_max"]
        assert timing["teacher"]["batch32_ex_per_s"] > 0 and timing["disk_mb"] > 0
    rows = md_rows(tmp_path / "outputs" / "tables" / "frontier.md")
    assert rows[0] == ["", "accuracy", "speed-up"] and all(row[2].endswith("x") for row in rows[1:])
    code, out, _ = table(["frontier"], capsys)  # again: no cell runs, nothing is timed again
    assert code == 0 and out.count("skipped (done)") == 3 and "running" not in out
    # a timing of an older serving path (before SERVING_VERSION was recorded) is stale: the table times again
    cells = {path.parent.name: path.parent for path in (tmp_path / "outputs" / "cells").glob("*/timing.json")}
    assert timing_is_current(cells)
    stale = sorted(cells.values())[0] / "timing.json"
    stale.write_text(json.dumps({k: v for k, v in json.loads(stale.read_text()).items() if k != "serving_version"}))
    assert not timing_is_current(cells)


def frontier_run(accuracy: float, single_ms: float, batch_seconds: list[float], single_seconds: list[float]):
    return {"status": "ok", "student": {"test": {"accuracy": accuracy}},
            "timing": {"single_ms": single_ms, "seconds": {"batch32_ex_per_s": batch_seconds,
                                                           "single_ms": single_seconds}}}


def test_issue_15_targets_read_pass_by_pass_ratios_and_the_frontier():
    from distil.tables.frontier_targets import BILSTM, MODEL2VEC, MODEL2VEC_LOGITS, STATIC, targets

    runs = {(STATIC, 1): frontier_run(0.80, 0.5, [0.1, 0.1], [0.2, 0.2]),
            (STATIC, 2): frontier_run(0.79, 0.5, [0.1, 0.2], [0.2, 0.2]),
            (BILSTM, 1): frontier_run(0.86, 3.0, [2.0, 4.0], [2.0, 2.0]),
            (BILSTM, 2): frontier_run(0.84, 3.0, [2.0, 2.0], [4.0, 2.0]),
            (MODEL2VEC, 1): frontier_run(0.85, 1.0, [0.1, 0.1], [0.1, 0.1])}
    cells = [Cell(row=row, column=None, seed=seed, overrides=[], key=f"{row}{seed}", metrics=metrics)
             for (row, seed), metrics in runs.items()]
    accuracy, batch, single, model2vec, frontier = targets(cells)
    assert accuracy.ours == pytest.approx(79.5) and accuracy.required is None and accuracy.met is None  # no bar yet
    assert accuracy.spread == f"d1 (frontier-sst2); the bar: {MODEL2VEC_LOGITS}, test not run"
    # the bar is the model2vec trainer's row, measured: its mean test accuracy over seeds
    bar = [Cell(row=MODEL2VEC_LOGITS, column=None, seed=seed, overrides=[], key=f"m{seed}",
                metrics={"status": "ok", "student": {"test": {"accuracy": value}}})
           for seed, value in ((1, 0.795), (2, 0.797))]
    with_bar = targets(cells + bar)[0]
    assert with_bar.required == pytest.approx(79.6) and with_bar.met is False
    # 80, 79 against 79.5, 79.7: -0.10, Welch's df 1.08, t 11.7 x SE 0.51 = 5.45: a miss within the spread
    assert with_bar.spread == (f"d1 (frontier-sst2); the bar: {MODEL2VEC_LOGITS}, test 79.60 ± 0.14% (n=2); ours - the "
                               f"bar: -0.10 [-5.55, +5.35], within the spread (Welch, 95%)")
    # batch: seed 1 passes 2.0/0.1, 4.0/0.1; seed 2 passes 2.0/0.1, 2.0/0.2 -> 20, 40, 20, 10
    assert batch.ours == pytest.approx(20.0) and batch.spread == "10.0-40.0 over passes" and batch.met is True
    assert single.ours == pytest.approx(10.0) and single.met is False  # 10, 10, 20, 10
    assert model2vec.ours == pytest.approx(1.0) and model2vec.met is True  # seed 1 only: 0.1/0.1
    # the model2vec peer (1.0 ms, 85%) beats the faster static (80%) and is faster than the better BiLSTM
    assert frontier.met is False  # the BiLSTM is as accurate but slower; nothing faster is as accurate
    assert frontier.spread == (f"not matched: {MODEL2VEC} (85.00% (n=1) at 1.00 ms; "
                               f"{BILSTM}: 85.00 ± 1.41% (n=2) at 3.00 ms)")
    runs[(BILSTM, 1)]["timing"]["single_ms"] = runs[(BILSTM, 2)]["timing"]["single_ms"] = 0.9
    assert targets(cells)[-1].met is True  # now a runner student is as fast and more accurate (85%)


def test_a_peer_within_the_spread_of_a_faster_runner_student_is_a_tie_not_a_loss():
    from distil.tables.frontier_targets import BILSTM, targets

    setfit = "peer: SetFit (labels)"

    def cells_of(peer_accuracies: list[float]) -> list[Cell]:
        runs = {(BILSTM, 1): frontier_run(0.80, 3.0, [1.0], [1.0]), (BILSTM, 2): frontier_run(0.82, 3.0, [1.0], [1.0])}
        runs |= {(setfit, seed): frontier_run(a, 10.0, [1.0], [1.0]) for seed, a in enumerate(peer_accuracies, 1)}
        return [Cell(row=row, column=None, seed=seed, overrides=[], key=f"{row}{seed}", metrics=metrics)
                for (row, seed), metrics in runs.items()]

    # 82 +- 1.41 against 81 +- 1.41: 1 point, the pooled t margin 4.303 x 1.41 = 6.09 -> a tie, the target holds
    tie = targets(cells_of([0.81, 0.83]))[-1]
    assert tie.met is True
    assert tie.spread == (f"every peer matched; tied within the spread: {setfit} (82.00 ± 1.41% (n=2) at "
                          f"10.00 ms; {BILSTM}: 81.00 ± 1.41% (n=2) at 3.00 ms)")
    # 90.5 +- 0.71: 9.5 points, the margin 4.303 x 1.12 = 4.81 -> the peer is more accurate, the target fails
    assert targets(cells_of([0.90, 0.91]))[-1].met is False
    # one seed of the peer: no spread to judge, the means decide
    assert targets(cells_of([0.815]))[-1].met is False


def test_the_frontier_judges_a_peer_by_the_seed_noise_pooled_over_every_timed_row():
    from distil.tables.frontier_targets import BILSTM, targets

    setfit, slower = "peer: SetFit (labels)", "a slower runner student"
    runs = {(BILSTM, 1): frontier_run(0.81, 3.0, [1.0], [1.0]), (BILSTM, 2): frontier_run(0.81, 3.0, [1.0], [1.0]),
            (setfit, 1): frontier_run(0.82, 10.0, [1.0], [1.0]), (setfit, 2): frontier_run(0.82, 10.0, [1.0], [1.0]),
            (slower, 1): frontier_run(0.70, 20.0, [1.0], [1.0]), (slower, 2): frontier_run(0.74, 20.0, [1.0], [1.0])}
    cells = [Cell(row=row, column=None, seed=seed, overrides=[], key=f"{row}{seed}", metrics=metrics)
             for (row, seed), metrics in runs.items()]
    # the peer leads the BiLSTM by 1 point, each on two seeds that agree exactly; pooled with the
    # slower student's spread (variance 8) the seed variance is 8/3 on 3 df, the margin 3.182 x 1.63 = 5.20: a tie.
    # The two rows' own spread (0) would call any lead beyond it
    assert targets(cells)[-1].met is True


def test_the_static_accuracy_target_takes_the_schedule_best_on_dev_and_reports_its_test():
    from distil.tables.frontier_targets import MODEL2VEC_LOGITS, targets

    def run(dev: float, test: float) -> dict:
        return {"status": "ok", "student": {"dev": {"accuracy": dev}, "test": {"accuracy": test}}}

    # "soft" is best on dev (mean 0.81) though "d1" has the better test accuracy: dev chooses
    runs = {("d1", 1): run(0.78, 0.82), ("d1", 2): run(0.80, 0.82),
            ("soft", 1): run(0.81, 0.79), ("soft", 2): run(0.81, 0.80), ("d0", 1): run(0.70, 0.90)}
    schedules = [Cell(row=row, column=None, seed=seed, overrides=[], key=f"{row}{seed}", metrics=metrics)
                 for (row, seed), metrics in runs.items()]
    accuracy = targets([], schedules)[0]
    assert accuracy.ours == pytest.approx(79.5)
    assert accuracy.spread == f"soft (dev 81.00, n=2); the bar: {MODEL2VEC_LOGITS}, test not run"
    assert targets([], [])[0].ours is None  # nothing run: not measured


def test_a_timing_is_current_only_for_the_same_group_and_todays_serving_code(tmp_path):
    from distil.tables.timing import SERVING_VERSION

    cells = {key: tmp_path / key for key in ("a", "b")}
    for directory in cells.values():
        directory.mkdir()
        (directory / "timing.json").write_text(json.dumps({"group": ["a", "b"], "serving_version": SERVING_VERSION}))
    assert timing_is_current(cells)
    assert not timing_is_current({**cells, "c": tmp_path / "c"})  # a new row: the group is timed again
    (cells["a"] / "timing.json").write_text(json.dumps({"group": ["a", "b"], "serving_version": SERVING_VERSION - 1}))
    assert not timing_is_current(cells)  # timed on an older serving path
