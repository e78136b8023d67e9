"""distil.common.provenance: what a recorded measurement says about where it was made."""

from __future__ import annotations

import subprocess

from distil.common.provenance import code_version, machine


def git(where, *args):
    subprocess.run(["git", *args], cwd=where, check=True, capture_output=True)


def test_the_code_version_is_the_commit_marked_when_tracked_files_changed(tmp_path):
    assert code_version(tmp_path) == "unknown"  # not a checkout
    git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git(tmp_path, "add", "a.py")
    git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "one")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=tmp_path, capture_output=True,
                            text=True).stdout.strip()
    (tmp_path / "notes.txt").write_text("untracked files are not the code\n")
    assert code_version(tmp_path) == commit
    for recorded in ("results/bench/bench.csv", "docs/results/index.md"):  # what a measurement writes
        (tmp_path / recorded).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / recorded).write_text("before\n")
        git(tmp_path, "add", recorded)
    git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "two")
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=tmp_path, capture_output=True,
                            text=True).stdout.strip()
    (tmp_path / "results/bench/bench.csv").write_text("after\n")
    (tmp_path / "docs/results/index.md").write_text("after\n")
    assert code_version(tmp_path) == commit  # the recorded results are not the code
    assert code_version(tmp_path / "docs") == commit  # from a subfolder too
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path) == code_version(tmp_path / "docs") == commit + "+changes"


def test_the_machine_names_its_cores():
    import os

    assert f", {os.cpu_count()} cores, " in machine()


def test_a_full_bench_is_recorded_with_its_provenance_and_a_quick_one_is_not(tmp_path, monkeypatch):
    import argparse
    import json

    from distil.cli.bench import record

    out = tmp_path / "tables"
    out.mkdir()
    (out / "bench.csv").write_text("model,speedup\nbilstm,8.7\n")
    (out / "bench.md").write_text("| model | speedup |\n")
    record(argparse.Namespace(quick=True, out=out, record=True), "bench", "distil bench students", ["--quick"])
    record(argparse.Namespace(quick=False, out=out, record=False), "bench", "distil bench students", ["--no-record"])
    assert not (tmp_path / "results" / "bench").exists()  # conftest: DISTIL_RESULTS is tmp_path/results
    record(argparse.Namespace(quick=False, out=out, record=True), "bench", "distil bench students", ["--passes", "3"])
    saved = tmp_path / "results" / "bench"
    assert (saved / "bench.csv").read_text() == "model,speedup\nbilstm,8.7\n"
    assert (saved / "bench.md").read_text() == "| model | speedup |\n"
    provenance = json.loads((saved / "bench.json").read_text())
    assert provenance["command"] == "distil bench students --passes 3" and provenance["machine"] == machine()
