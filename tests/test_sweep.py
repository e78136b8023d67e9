"""An interrupted sweep re-run into its own directory skips finished cells and re-runs the rest."""

import json
import os

import pytest

from distil.run.sweep import finished_metrics
from tests.test_cli import distil_in_process

# What a finished cell's metrics.json needs for the skip (and for the sweeper's return value).
FINISHED = {"status": "ok", "metric": "accuracy", "student": {"dev": {"accuracy": 0.5}}}


@pytest.mark.heavy
def test_a_rerun_sweep_skips_finished_cells_and_reruns_crashed_and_missing_ones(tmp_path, monkeypatch, capsys):
    from distil.run import pipeline
    from distil.tables.report import collect

    sweep_dir = tmp_path / "sweep"
    real_run = pipeline.run

    def crash_on_d0(cfg, *args):
        if cfg.schedule.name == "d0":
            raise RuntimeError("boom")  # not a DistilError: a bug, an out-of-memory, ...
        return real_run(cfg, *args)

    monkeypatch.setattr(pipeline, "run", crash_on_d0)
    code, _, _ = distil_in_process(["-m", "debug=smoke", "schedule=hard,d0", f"hydra.sweep.dir={sweep_dir}"],
                                   tmp_path, monkeypatch, capsys)
    assert code != 0
    assert collect(sweep_dir)["status"].str.startswith("failed: ").tolist() == [False, True]  # the crash is a row
    finished = sweep_dir / "0" / "metrics.json"
    os.utime(finished, (1_000_000_000, 1_000_000_000))
    before = finished.read_text()

    monkeypatch.setattr(pipeline, "run", real_run)
    # re-run, grown by a cell the interrupted sweep never started
    code, out, err = distil_in_process(["-m", "debug=smoke", "schedule=hard,d0,d1", f"hydra.sweep.dir={sweep_dir}"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert finished.read_text() == before and finished.stat().st_mtime == 1_000_000_000  # not run again
    assert "cell 0 already done; skipping" in out + err
    assert "cell 1 already done" not in out + err and "cell 2 already done" not in out + err
    cells = {cell: json.loads((sweep_dir / cell / "metrics.json").read_text()) for cell in "012"}
    assert {cell: (m["status"], m["choices"]["schedule"]) for cell, m in cells.items()} == {
        "0": ("ok", "hard"), "1": ("ok", "d0"), "2": ("ok", "d1")}


def test_a_cell_counts_as_finished_only_with_status_ok_and_the_same_overrides(tmp_path):
    cell = tmp_path / "0"
    assert finished_metrics(cell, ["schedule=d1"]) is None  # no metrics.json yet
    cell.mkdir()
    (cell / "metrics.json").write_text('{"status": "ok", "overr')  # half-written
    assert finished_metrics(cell, ["schedule=d1"]) is None
    (cell / "metrics.json").write_text(json.dumps({**FINISHED, "overrides": ["seed=2", "schedule=d1"]}))
    assert finished_metrics(cell, ["schedule=d1", "seed=2"])["status"] == "ok"  # order does not matter
    assert finished_metrics(cell, ["schedule=d1", "seed=3"]) is None  # the sweep changed: run again
    failed = {"status": "failed: dataset 'toy' ...", "overrides": ["schedule=d1"]}
    (cell / "metrics.json").write_text(json.dumps(failed))
    assert finished_metrics(cell, ["schedule=d1"]) is None


def test_a_sweeps_failures_are_its_cells_whose_metrics_json_says_failed_since_it_started(tmp_path):
    import os

    from distil.run.sweep import failed_cells

    for cell, status in (("0", "ok"), ("1", "failed: bad"), ("2", "failed: interrupted"), ("3", "failed: old")):
        (tmp_path / cell).mkdir()
        (tmp_path / cell / "metrics.json").write_text(json.dumps({"status": status}))
    (tmp_path / "4").mkdir()
    (tmp_path / "4" / "metrics.json").write_text('{"status": "fai')  # killed mid-write
    os.utime(tmp_path / "3" / "metrics.json", (1000.0, 1000.0))  # an earlier sweep's, in a reused directory
    assert failed_cells(tmp_path, since=2000.0) == [str(tmp_path / c) for c in ("1", "2", "4")]
