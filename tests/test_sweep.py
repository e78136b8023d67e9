"""An interrupted sweep re-run into its own directory skips finished cells and re-runs the rest."""

import json
import os

from distil.sweep import finished_metrics
from tests.test_cli import distil_in_process

# What a finished cell's metrics.json needs for the skip (and for the sweeper's return value).
FINISHED = {"status": "ok", "metric": "accuracy", "student": {"dev": {"accuracy": 0.5}}}


def write_cell(sweep_dir, cell: str, metrics: dict) -> None:
    (sweep_dir / cell).mkdir(parents=True)
    (sweep_dir / cell / "metrics.json").write_text(json.dumps(metrics))


def test_a_rerun_sweep_skips_finished_cells_and_reruns_failed_and_missing_ones(tmp_path, monkeypatch, capsys):
    sweep_dir = tmp_path / "sweep"
    # cell 0 finished before the sweep was interrupted; cell 1 crashed; cell 2 never started
    write_cell(sweep_dir, "0", {**FINISHED, "overrides": ["debug=smoke", "schedule=hard"]})
    write_cell(sweep_dir, "1", {"status": "failed: unexpected RuntimeError: boom", "overrides": ["debug=smoke", "schedule=d0"]})
    finished = sweep_dir / "0" / "metrics.json"
    os.utime(finished, (1_000_000_000, 1_000_000_000))
    before = finished.read_text()

    code, out, err = distil_in_process(["-m", "debug=smoke", "schedule=hard,d0,d1", f"hydra.sweep.dir={sweep_dir}"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert finished.read_text() == before and finished.stat().st_mtime == 1_000_000_000  # not run again
    assert "cell 0 already done; skipping" in out + err
    assert "cell 1 already done" not in out + err and "cell 2 already done" not in out + err
    statuses = {cell: json.loads((sweep_dir / cell / "metrics.json").read_text())["status"] for cell in "012"}
    assert statuses == {"0": "ok", "1": "ok", "2": "ok"}
    assert json.loads((sweep_dir / "2" / "metrics.json").read_text())["choices"]["schedule"] == "d1"


def test_a_cell_counts_as_finished_only_with_status_ok_and_the_same_overrides(tmp_path):
    cell = tmp_path / "0"
    assert finished_metrics(cell, ["schedule=d1"]) is None  # no metrics.json yet
    cell.mkdir()
    (cell / "metrics.json").write_text('{"status": "ok", "overr')  # half-written
    assert finished_metrics(cell, ["schedule=d1"]) is None
    (cell / "metrics.json").write_text(json.dumps({**FINISHED, "overrides": ["seed=2", "schedule=d1"]}))
    assert finished_metrics(cell, ["schedule=d1", "seed=2"])["status"] == "ok"  # order does not matter
    assert finished_metrics(cell, ["schedule=d1", "seed=3"]) is None  # the sweep changed: run again
    (cell / "metrics.json").write_text(json.dumps({"status": "failed: dataset 'toy' ...", "overrides": ["schedule=d1"]}))
    assert finished_metrics(cell, ["schedule=d1"]) is None
