"""scripts/time_fresh_clone.py (`make bench-fresh-clone`): what it refuses and how a failing step reads.
The measurement itself (a clone, a venv, `make install demo`: minutes) runs only as the make target."""

from __future__ import annotations

import pytest

from tests.conftest import load_script


@pytest.fixture(scope="module")
def bench():
    return load_script("time_fresh_clone")


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



def test_a_measurement_replaces_its_code_versions_row_and_keeps_the_others(tmp_path, monkeypatch):
    """record_rows, as make bench-suite and make bench-fresh-clone record: one row per code version."""
    import pandas as pd

    from distil.tables.ledger import record_rows

    monkeypatch.setenv("DISTIL_RESULTS", str(tmp_path / "results"))
    columns = ("code", "wall s")
    for code, wall, machine in (("aaa", 300.0, "here"), ("bbb", 280.0, "here"), ("aaa", 500.0, "there"),
                                ("aaa", 290.0, "here")):
        record_rows("bench-x", {"code": code, "wall s": wall}, columns, "A bench", "Seconds.",
                    {"code": code, "date": "today", "command": "make bench-x", "machine": machine})
    saved = tmp_path / "results" / "bench"
    # the same code on another machine is another row, each row naming its own machine
    assert pd.read_csv(saved / "bench-x.csv").to_dict("records") == [
        {"code": "bbb", "wall s": 280.0, "machine": "here"}, {"code": "aaa", "wall s": 500.0, "machine": "there"},
        {"code": "aaa", "wall s": 290.0, "machine": "here"}]
    text = (saved / "bench-x.md").read_text()
    assert text.startswith("### A bench\n\n|") and text.endswith("|\n\nSeconds.\n")
