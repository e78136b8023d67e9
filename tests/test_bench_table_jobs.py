"""distil bench table-jobs: its table of 8 cells, the runs it makes in turn and what it writes, with the
`distil table` commands faked (nothing here is timed)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from distil.bench import table_jobs
from distil.cli.bench import cache_workers as cache_workers_command
from distil.cli.bench import table_jobs as table_jobs_command
from distil.errors import DistilError
from distil.tables.cells import expand
from distil.tables.load import load_preset


def test_the_timed_table_is_8_smoke_cells_on_the_threads_asked_for(tmp_path):
    preset = load_preset(table_jobs.write_preset(tmp_path, table_jobs.preset(threads=1)))
    cells = expand(preset, "cpu")
    assert preset.name == table_jobs.NAME and len(cells) == 8 and len({cell.key for cell in cells}) == 8
    assert all({"debug=smoke", "trainer.threads=1"} <= set(cell.overrides) for cell in cells)
    assert sorted({cell.row for cell in cells}) == sorted(table_jobs.SCHEDULES) and {c.seed for c in cells} == {1, 2}
    # the threads change no result: the cells are the same cells whatever --jobs gives them
    two = expand(load_preset(table_jobs.write_preset(tmp_path, table_jobs.preset(threads=2))), "cpu")
    assert [cell.key for cell in two] == [cell.key for cell in cells]


def test_jobs_n_gives_each_cell_a_share_of_the_cores_and_jobs_1_the_tables_own(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    assert [table_jobs.threads_per_cell(jobs, threads=1) for jobs in (1, 2, 4)] == [1, 1, 1]
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert [table_jobs.threads_per_cell(jobs, threads=1) for jobs in (1, 2, 4)] == [1, 8, 4]


def test_a_measurement_runs_distil_table_into_fresh_outputs_and_results(tmp_path, monkeypatch):
    """Each run gets directories of its own (no cell found done, none recorded in the checkout's results/)
    and its row counts the cells its metrics.json files report."""
    calls = []

    def fake_run(command, cwd, env, **kwargs):
        calls.append((command[1:], env["DISTIL_OUTPUTS"], env["DISTIL_RESULTS"]))
        for n in range(3):
            cell = Path(env["DISTIL_OUTPUTS"]) / "cells" / f"key{n}"
            cell.mkdir(parents=True)
            (cell / "metrics.json").write_text(json.dumps({"status": "ok", "seconds": 2.5}))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(table_jobs.subprocess, "run", fake_run)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    first = table_jobs.measure(tmp_path / "p.yaml", 2, threads=1, round_=1)
    second = table_jobs.measure(tmp_path / "p.yaml", 1, threads=1, round_=1)
    assert [args for args, *_ in calls] == [["table", str(tmp_path / "p.yaml"), "--jobs", "2"],
                                            ["table", str(tmp_path / "p.yaml"), "--jobs", "1"]]
    assert calls[0][1] != calls[1][1] and calls[0][2] != calls[1][2]
    assert not any(Path(directory).exists() for _, *directories in calls for directory in directories)  # removed
    assert {key: first[key] for key in ("round", "jobs", "threads per cell", "cores", "cells", "cells' own s")} == {
        "round": 1, "jobs": 2, "threads per cell": 1, "cores": 2, "cells": 3, "cells' own s": 7.5}
    assert second["jobs"] == 1 and first["wall s"] >= 0


def test_a_failed_table_or_cell_is_an_error_not_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(table_jobs.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 2, "", "distil table: error: 1 cell(s) failed"))
    with pytest.raises(DistilError, match=r"--jobs 2 failed \(exit 2\).*1 cell\(s\) failed"):
        table_jobs.measure(tmp_path / "p.yaml", 2, threads=1, round_=1)
    with pytest.raises(DistilError, match="a cell did not finish"):
        table_jobs.row(1, 2, 1, [{"status": "ok"}, {"status": "failed: interrupted"}], 3.0)


def test_the_two_settings_take_turns_and_the_ratio_is_of_their_median_wall_times(tmp_path, monkeypatch):
    walls = {1: iter([40.0, 44.0, 42.0]), 2: iter([25.0, 21.0, 30.0])}
    order = []

    def fake_measure(preset_file, jobs, threads, round_, cache):
        assert preset_file.is_file() and cache is None  # the preset is written for the runs
        order.append((round_, jobs))
        return {"round": round_, "jobs": jobs, "threads per cell": 1, "cores": 2, "cells": 8,
                "wall s": next(walls[jobs]), "cells' own s": 30.0}

    monkeypatch.setattr(table_jobs, "measure", fake_measure)
    rows, speedup = table_jobs.compare(2, threads=1, rounds=3)
    assert order == [(1, 1), (1, 2), (2, 2), (2, 1), (3, 1), (3, 2)]  # the first in turn swaps every round
    assert [(r["round"], r["jobs"]) for r in rows] == order  # rows in the order measured
    assert speedup == pytest.approx(42.0 / 25.0)


def test_the_table_gives_a_row_per_run_and_the_ratio(tmp_path):
    rows = [table_jobs.row(1, 1, 1, [{"status": "ok", "seconds": 5.0}] * 8, 41.04),
            table_jobs.row(1, 2, 1, [{"status": "ok", "seconds": 6.0}] * 8, 25.0)]
    frame = table_jobs.write(rows, tmp_path / "tables", jobs=2, speedup=41.0 / 25.0)
    csv = pd.read_csv(tmp_path / "tables" / "bench-table-jobs.csv")
    assert list(csv.columns) == list(table_jobs.COLUMNS) and len(frame) == 2
    assert csv[["jobs", "cells", "wall s", "cells' own s"]].values.tolist() == [[1, 8, 41.0, 40.0], [2, 8, 25.0, 48.0]]
    md = (tmp_path / "tables" / "bench-table-jobs.md").read_text()
    assert md.startswith("### A table of 8 cells with `distil table --jobs 2` against `--jobs 1`")
    assert "timed in turn in one run: 1.64x as fast" in md


@pytest.mark.parametrize("command,args,message", [
    (table_jobs_command, ["--jobs", "1"], "--jobs 1: give 2 or more"),
    (table_jobs_command, ["--rounds", "0"], "--rounds and --threads must be positive"),
    (cache_workers_command, ["--workers", "1"], "--workers 1: give 2 or more"),
    (cache_workers_command, ["--rounds", "0"], "--rounds and --shard-size must be positive"),
    (cache_workers_command, ["--shard-size", "0"], "--rounds and --shard-size must be positive")])
def test_bad_arguments_are_one_line(command, args, message, capsys):
    """The two several-worker benchmarks (bench table-jobs, bench cache-workers) refuse a bad count in one line."""
    with pytest.raises(SystemExit) as exit_:
        command(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_quick_is_one_round_of_4_cells_and_records_nothing(tmp_path, monkeypatch, capsys):
    seen = []

    def fake_compare(jobs, threads, rounds, table, cache):
        seen.append((jobs, threads, rounds, [row["label"] for row in table["rows"]], table["scales"]["cpu"]["seeds"]))
        return [table_jobs.row(1, 1, 1, [{"status": "ok"}] * 4, 10.0),
                table_jobs.row(1, 2, 1, [{"status": "ok"}] * 4, 8.0)], 1.25

    monkeypatch.setattr(table_jobs, "compare", fake_compare)
    assert table_jobs_command(["--quick", "--out", str(tmp_path / "tables")]) == 0
    assert seen == [(2, 1, 1, ["hard", "soft"], [1, 2])]
    assert "1.25x as fast" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()  # conftest's DISTIL_RESULTS: a quick run is no measurement


def test_real_times_two_sst2_cells_on_every_core_against_two_at_once_reading_the_cached_teacher(
        tmp_path, monkeypatch, capsys):
    """--real: the frontier's BiLSTM under d1 and soft for one epoch, a --jobs 1 cell on every core, the
    teacher read from <outputs>/cache; its own files, recorded as bench-table-jobs-real."""
    seen = []

    def fake_compare(jobs, threads, rounds, table, cache):
        seen.append((jobs, threads, rounds, table, cache))
        return [table_jobs.row(1, 1, 2, [{"status": "ok"}] * 2, 10.0),
                table_jobs.row(1, 2, 1, [{"status": "ok"}] * 2, 8.0)], 1.25

    monkeypatch.setattr(table_jobs, "compare", fake_compare)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    assert table_jobs_command(["--real", "--rounds", "1", "--out", str(tmp_path / "tables")]) == 0
    (jobs, threads, rounds, table, cache), = seen
    assert (jobs, threads, rounds, cache) == (2, 2, 1, tmp_path / "outputs" / "cache")
    assert table["scales"]["cpu"] == {"base": ["+experiment=sst2-low", "teacher=minilm", "student=bilstm",
                                               "trainer.epochs=1", "trainer.threads=2"], "seeds": [1]}
    assert [row["overrides"] for row in table["rows"]] == [["schedule=d1"], ["schedule=soft"]]
    md = (tmp_path / "tables" / "bench-table-jobs-real.md").read_text()
    assert md.startswith("### A table of 2 real cells with `distil table --jobs 2` against `--jobs 1`")
    assert "the MiniLM teacher and its targets read from the cache" in md
    assert not (tmp_path / "tables" / "bench-table-jobs.md").exists()
    recorded = Path(os.environ["DISTIL_RESULTS"]) / "bench" / "bench-table-jobs-real.csv"
    assert recorded.is_file()


def test_a_real_run_links_the_cache_and_refuses_one_that_fine_tuned_a_teacher(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    (cache / "teachers").mkdir(parents=True)
    reused = {"value": True}

    def fake_run(command, cwd, env, **kwargs):
        outputs = Path(env["DISTIL_OUTPUTS"])
        assert (outputs / "cache").resolve() == cache.resolve() and (outputs / "cache" / "teachers").is_dir()
        cell = outputs / "cells" / "key"
        cell.mkdir(parents=True)
        (cell / "metrics.json").write_text(json.dumps({"status": "ok", "seconds": 1.0,
                                                       "artifacts": {"teacher_reused": reused["value"]}}))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(table_jobs.subprocess, "run", fake_run)
    assert table_jobs.measure(tmp_path / "p.yaml", 1, threads=2, round_=1, cache=cache)["cells"] == 1
    assert (cache / "teachers").is_dir()  # the link is removed with the run's directory, the cache stays
    reused["value"] = False
    with pytest.raises(DistilError, match=r"fine-tuned a teacher: cache one in .* first"):
        table_jobs.measure(tmp_path / "p.yaml", 1, threads=2, round_=1, cache=cache)
