"""distil-report on a sweep with finished, failed, crashed and damaged cells: every cell is a row."""

import json
import re

import pandas as pd
import pytest

from distil.cli.report import main
from tests.test_metrics import METRICS


def hydra_dir(cell, schedule: str) -> None:
    """What Hydra writes into a cell's directory before the run starts."""
    (cell / ".hydra").mkdir(parents=True)
    (cell / ".hydra" / "overrides.yaml").write_text(f"- debug=smoke\n- schedule={schedule}\n")
    (cell / ".hydra" / "hydra.yaml").write_text(
        "hydra:\n  runtime:\n    choices:\n      teacher: tiny\n      student: bilstm\n"
        f"      schedule: {schedule}\n      dataset: toy\n      transfer_size: all\n")
    (cell / ".hydra" / "config.yaml").write_text("seed: 3\ndataset:\n  name: toy\n")


@pytest.fixture
def sweep(tmp_path):
    cells = {name: tmp_path / name for name in ("0", "1", "2", "3")}
    for name, schedule in zip(cells, ("d1", "d2", "d3", "hard"), strict=True):
        hydra_dir(cells[name], schedule)
    (cells["0"] / "metrics.json").write_text(json.dumps({**METRICS, "overrides": ["debug=smoke", "schedule=d1"]}))
    (cells["1"] / "metrics.json").write_text(json.dumps(
        {"status": "failed: unexpected RuntimeError: boom (traceback in distil.log)",
         "choices": {"schedule": "d2"}, "overrides": ["debug=smoke", "schedule=d2"]}))
    # cell 2 crashed before writing anything; cell 3's metrics.json is cut short
    (cells["3"] / "metrics.json").write_text('{"status": "ok", "choi')
    return tmp_path


def test_report_shows_every_cell_with_the_reason_it_failed(sweep, capsys):
    main([str(sweep)])  # no SystemExit: the table was written, exit 0
    captured = capsys.readouterr()
    table = pd.read_csv(sweep / "table.csv")
    assert list(table["run"]) == [0, 1, 2, 3]
    assert list(table["status"]) == [
        "ok",
        "failed: unexpected RuntimeError: boom (traceback in distil.log)",
        "failed: no metrics.json (crashed or still running)",
        "failed: unreadable metrics.json: not valid JSON (Unterminated string starting at: line 1 column 18 (char 17))",
    ]
    assert list(table["schedule"]) == ["d1", "d2", "d3", "hard"]  # a crashed cell's choices from .hydra/
    assert table["seed"].iloc[2] == 3
    assert captured.err.strip().splitlines() == [
        f"distil-report: warning: skipping {sweep / '3' / 'metrics.json'}: not valid JSON "
        f"(Unterminated string starting at: line 1 column 18 (char 17))"]
    assert "3 of 4 cells failed" in captured.out.strip().splitlines()[-1]
    assert "| failed: no metrics.json (crashed or still running)" in (sweep / "table.md").read_text()


def test_report_summary_when_every_cell_is_ok(tmp_path, capsys):
    (tmp_path / "0").mkdir()
    (tmp_path / "0" / "metrics.json").write_text(json.dumps(METRICS))
    main([str(tmp_path)])
    last_line = capsys.readouterr().out.strip().splitlines()[-1]
    assert last_line == f"0 of 1 cells failed; wrote {tmp_path / 'table.md'} and {tmp_path / 'table.csv'}"


def test_a_pipe_in_a_run_label_keeps_the_md_row_in_its_columns(tmp_path):
    """Every md writer escapes '|' (distil/common/markdown.py): a sweep over a schedule named "RL | LL + CE"."""
    from distil.tables.report import write_tables

    table = pd.DataFrame({"run": ["schedule=RL | LL + CE"], "student_test": [81.234], "params": [1200]})
    md, _ = write_tables(table, tmp_path)
    row = md.read_text().splitlines()[2]
    assert [c.strip() for c in re.split(r"(?<!\\)\|", row)[1:-1]] == ["schedule=RL \\| LL + CE", "81.23", "1200"]
