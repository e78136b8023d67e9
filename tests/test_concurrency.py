"""Runs started together: each gets its own run directory, and a teacher and its targets are
built once, by one of them, while the others wait and reuse them."""

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from tests.test_cli import distil_in_process

# The console script of the interpreter running the tests (its venv's bin/ need not be on PATH).
DISTIL = next((str(p) for p in [Path(sys.executable).parent / "distil"] if p.exists()), shutil.which("distil"))


class FrozenClock(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime(2026, 1, 2, 12, 0, 0)


def test_two_runs_started_in_the_same_second_get_their_own_run_directory(tmp_path, monkeypatch, capsys):
    import hydra.core.utils

    monkeypatch.setattr(hydra.core.utils, "datetime", FrozenClock)  # Hydra's ${now:...}
    # A run that fails on its data still writes metrics.json into its run directory, in a second.
    for label_column in ("nope1", "nope2"):
        code, _, _ = distil_in_process(["debug=smoke", f"dataset.label_column={label_column}"],
                                       tmp_path, monkeypatch, capsys)
        assert code == 2
    day = tmp_path / "outputs" / "runs" / "2026-01-02"
    assert sorted(p.name for p in day.iterdir()) == ["12-00-00", "12-00-00_2"]
    columns = [json.loads((day / name / "metrics.json").read_text())["status"].split("'")[3]
               for name in ("12-00-00", "12-00-00_2")]
    assert columns == ["nope1", "nope2"]


@pytest.mark.slow  # ~14 s of two real processes racing: with the slow tier, to keep the default suite under 5 minutes
@pytest.mark.skipif(DISTIL is None, reason="distil console script not installed")
def test_two_runs_started_together_on_an_empty_cache_build_once(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("DISTIL_OUTPUTS", None)
    runs = [subprocess.Popen([DISTIL, "debug=smoke"], cwd=tmp_path, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [run.communicate(timeout=600)[0] for run in runs]
    assert [run.returncode for run in runs] == [0, 0], "\n".join(outputs)
    metrics = [json.loads(p.read_text()) for p in sorted((tmp_path / "outputs" / "runs").rglob("metrics.json"))]
    assert len(metrics) == 2  # two run directories, even if both started in the same second
    artifacts = [m["artifacts"] for m in metrics]
    assert artifacts[0]["teacher"] == artifacts[1]["teacher"] and artifacts[0]["targets"] == artifacts[1]["targets"]
    assert sorted(a["teacher_reused"] for a in artifacts) == [False, True]
    assert sorted(a["targets_reused"] for a in artifacts) == [False, True]
    log = "".join(outputs)
    assert log.count("fine-tuned teacher saved to") == 1 and log.count("cached teacher targets in") == 1
    cache = tmp_path / "outputs" / "cache"
    assert sorted(p.name for p in (cache / "teachers").iterdir()) == [artifacts[0]["teacher"]]
    assert list((cache / "tmp").iterdir()) == []


def test_a_run_removes_what_killed_runs_left_that_nothing_resumes(tmp_path, monkeypatch, capsys):
    from tests.test_store import dead_pid

    tmp = tmp_path / "outputs" / "cache" / "tmp"
    old_style = tmp / f"tiny-0123456789abcdef.{dead_pid()}"  # versions before the lock named builds so
    resumable = tmp / "tiny-fedcba9876543210"
    for build in (old_style, resumable):
        build.mkdir(parents=True)
        (build / "finetune-checkpoint.pt").write_bytes(b"state")
    code, out, err = distil_in_process(["debug=smoke"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp.iterdir()) == [resumable.name]
    removed = f"removed stale build directory {old_style.relative_to(tmp_path)}"
    assert f"{removed}: its run (process {old_style.suffix[1:]}) is gone" in out
