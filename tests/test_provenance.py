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
    (tmp_path / "a.py").write_text("x = 2\n")
    assert code_version(tmp_path) == commit + "+changes"


def test_the_machine_names_its_cores():
    import os

    assert f", {os.cpu_count()} cores, " in machine()
