"""distil bench demo: the default job from a cold cache, timed by phase (here the smoke run, --quick)."""

from __future__ import annotations

import pandas as pd

from distil.cli.bench import demo


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
