"""scripts/time_fresh_clone.py (`make bench-fresh-clone`): what it refuses and how a failing step reads.
The measurement itself (a clone, a venv, `make install demo`: minutes) runs only as the make target."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "time_fresh_clone.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("time_fresh_clone", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_checkout_with_uncommitted_changes_is_refused_in_one_line(bench, monkeypatch):
    monkeypatch.setattr(bench, "provenance", lambda command: {"code": "abc123+changes", "date": "today"})
    with pytest.raises(SystemExit, match=r"^time_fresh_clone: this checkout has uncommitted changes.*commit first"):
        bench.main()


def test_a_failing_step_stops_the_bench_with_its_last_line_and_its_log(bench, tmp_path):
    log = tmp_path / "install.log"
    with pytest.raises(SystemExit) as stopped:
        bench.timed(["sh", "-c", "echo building; echo 'no matching distribution for torch' >&2; exit 3"],
                    tmp_path, {"PATH": "/usr/bin:/bin"}, log)
    message = str(stopped.value)
    assert "\n" not in message and "failed (exit 3): no matching distribution for torch" in message
    assert message.endswith(f"whole log: {log}") and "building" in log.read_text()

