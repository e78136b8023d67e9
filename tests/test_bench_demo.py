"""distil bench demo: the default job from a cold cache, timed by phase (here the smoke run, --quick)."""

from __future__ import annotations

import pandas as pd
import pytest

from distil.cli.bench import demo


@pytest.mark.heavy
def test_the_demo_bench_times_a_cold_run_by_phase_and_records_nothing_when_quick(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert demo(["--quick", "--out", str(tmp_path / "tables")]) == 0
    [row] = pd.read_csv(tmp_path / "tables" / "bench-demo.csv").to_dict("records")
    phases = [row[f"{phase} s"] for phase in ("data", "teacher", "targets", "student")]
    assert row["wall s"] >= sum(phases) + row["start and exit s"] - 0.5  # the phases are inside the wall time
    assert row["teacher s"] > 0 and row["student s"] > 0  # a cold cache: the teacher is fine-tuned, not reused
    assert 0 <= row["student test"] <= 100
    assert "### The default job from a cold cache" in (tmp_path / "tables" / "bench-demo.md").read_text()
    assert not (tmp_path / "results").exists()  # conftest's DISTIL_RESULTS: a quick run is no measurement


def test_against_times_another_code_version_in_turn_and_gives_the_ratio(tmp_path, monkeypatch):
    """The smoke run of this code and of the previous commit, one round: two rows and the ratio line."""
    import subprocess

    from distil.bench import demo as bench_demo

    root = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True).stdout.strip()
    monkeypatch.chdir(root)  # git worktree runs in the repository
    runs = []
    monkeypatch.setattr(bench_demo, "measure", lambda overrides, code, date, source=None: runs.append(
        (overrides, code, source)) or {"code": code, "overrides": " ".join(overrides), "date": date,
                                       "wall s": 10.0 if source is None else 8.0})
    rows, ratio = bench_demo.compare(["runtime.device=cpu"], "ours", "today", "HEAD~1", rounds=2)
    assert [who for _, who, _ in runs][:2] == ["ours", runs[1][1]] and runs[2][2] is not None  # turns swap
    assert [overrides for overrides, code, _ in runs if code == "ours"] == [["runtime.device=cpu"]] * 2
    assert all(overrides == [] for overrides, code, _ in runs if code != "ours")  # the old code runs as it is
    assert ratio == 10.0 / 8.0 and len(rows) == 4
    frame = bench_demo.write(rows, tmp_path, ("ours", rows[-1]["code"], ratio))
    assert "1.250x the median wall time" in (tmp_path / "bench-demo.md").read_text() and len(frame) == 4


def test_a_measurement_replaces_only_the_recorded_rows_of_its_code_and_overrides(tmp_path, monkeypatch):
    """Three seeds of one code version measured one after another are three rows, beside the before figure."""
    from distil.bench import demo as bench_demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr("distil.common.provenance.provenance", lambda command: {"code": "new", "date": "today",
                                                                                "command": " ".join(command)})
    walls = iter([300.0, 310.0, 320.0, 305.0])
    monkeypatch.setattr(bench_demo, "measure", lambda overrides, code, date, source=None: {
        "code": code, "overrides": " ".join(overrides), "date": date, "wall s": next(walls)})
    out = str(tmp_path / "results" / "bench")
    for seed in (1, 2, 3, 2):  # seed 2 measured again: its row is replaced
        assert demo(["--out", out, f"seed={seed}"]) == 0
    rows = pd.read_csv(tmp_path / "results" / "bench" / "bench-demo.csv").to_dict("records")
    assert [(r["overrides"], r["wall s"]) for r in rows] == [("seed=1", 300.0), ("seed=3", 320.0), ("seed=2", 305.0)]


def test_no_record_writes_its_out_folder_and_leaves_the_tracked_record_alone(tmp_path, monkeypatch):
    """An experiment (--no-record) beside a recorded measurement: only the measurement reaches results/bench."""
    from distil.bench import demo as bench_demo

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr("distil.common.provenance.provenance", lambda command: {"code": "new", "date": "today",
                                                                                "command": " ".join(command)})
    monkeypatch.setattr(bench_demo, "measure", lambda overrides, code, date, source=None: {
        "code": code, "overrides": " ".join(overrides), "date": date, "wall s": 300.0})
    assert demo(["--out", str(tmp_path / "try"), "--no-record", "seed=7"]) == 0
    assert (tmp_path / "try" / "bench-demo.csv").is_file() and not (tmp_path / "results").exists()
    assert demo(["--out", str(tmp_path / "tables"), "seed=1"]) == 0
    recorded = pd.read_csv(tmp_path / "results" / "bench" / "bench-demo.csv").to_dict("records")
    assert [r["overrides"] for r in recorded] == ["seed=1"]
