"""One command: `distil SUB` dispatches every subcommand, `distil [run] key=value` stays the Hydra app,
and the `distil-*` console scripts are aliases kept for one release."""

from __future__ import annotations

import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distil.cli.main import SUBCOMMANDS
from tests.test_cli import distil_in_process

REPO = Path(__file__).resolve().parent.parent
# [project.scripts] (read as text: tomllib is Python 3.11+)
SCRIPTS = dict(re.findall(r'^(distil[\w-]*) = "([\w.:]+)"$',
                          (REPO / "pyproject.toml").read_text().split("[project.scripts]")[1].split("\n[")[0], re.M))
ALIASES = {name: target for name, target in SCRIPTS.items() if name != "distil"}
# alias -> the command it stands for
STANDS_FOR = {"distil-report": "distil report", "distil-data": "distil data", "distil-predict": "distil predict",
              "distil-bench": "distil bench students", "distil-bench-cache": "distil bench cache",
              "distil-bench-tang": "distil paper tang-table2", "distil-bench-turc": "distil paper turc-table1",
              "distil-bench-wu": "distil paper wu-table2", "distil-untuned": "distil paper wu-table5",
              "distil-cache": "distil cache", "distil-table": "distil table"}


def test_help_lists_every_subcommand_then_the_hydra_app(tmp_path, monkeypatch, capsys):
    code, out, _ = distil_in_process(["--help"], tmp_path, monkeypatch, capsys)
    assert code == 0
    listed = out.split("distil SUB --help")[0]
    for name in ("report", "data", "cache", "predict", "card", "export", "pretrain", "table", "search", "bench",
                 "paper"):
        assert f"\n  {name} " in listed, name
    assert set(SUBCOMMANDS) == {"report", "data", "cache", "predict", "card", "export", "pretrain", "table", "search",
                                "bench", "paper"}
    assert "== Configuration groups ==" in out.split("distil SUB --help")[1]  # the Hydra app's usage follows


@pytest.mark.parametrize("args", [["report"], ["data"], ["cache"], ["predict"], ["card"], ["export"], ["pretrain"],
                                  ["table"], ["search"], ["bench"], ["paper"], ["bench", "students"],
                                  ["bench", "cache"], ["bench", "checkpoint"], ["bench", "all"],
                                  ["paper", "tang-table2"], ["paper", "turc-table1"], ["paper", "wu-table2"],
                                  ["paper", "wu-table5"], ["paper", "all"]])
def test_each_subcommand_explains_itself(args, tmp_path, monkeypatch, capsys):
    code, out, err = distil_in_process([*args, "--help"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert f"usage: distil {' '.join(args)}" in out and "example" in out and "alias" not in out


@pytest.mark.parametrize("args", [["bench", "students"], ["bench", "cache"], ["paper", "tang-table2"],
                                  ["paper", "turc-table1"], ["paper", "wu-table2"], ["bench", "all"]])
def test_the_benches_share_their_arguments(args, tmp_path, monkeypatch, capsys):
    _, out, _ = distil_in_process([*args, "--help"], tmp_path, monkeypatch, capsys)
    assert "--threads" in out and "--quick" in out and "--out" in out
    assert ("--passes" in out) == (args[1] != "cache")


def test_every_alias_is_a_cli_function_whose_help_says_so(monkeypatch, capsys):
    assert set(ALIASES) == set(STANDS_FOR)
    for alias, target in ALIASES.items():
        module, function = target.split(":")
        assert module.startswith("distil.cli."), alias
        monkeypatch.setattr(sys, "argv", [alias, "--help"])
        with pytest.raises(SystemExit) as ended:
            getattr(importlib.import_module(module), function)()
        out = capsys.readouterr().out
        assert ended.value.code == 0, alias
        assert f"usage: {alias}" in out and f"alias of `{STANDS_FOR[alias]}`, kept for one release" in out, alias


def test_an_installed_alias_runs():
    script = shutil.which("distil-report")
    if script is None:
        pytest.skip("console scripts not installed")
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "alias of `distil report`, kept for one release" in done.stdout


def test_a_leading_run_word_is_the_hydra_app(tmp_path, monkeypatch, capsys):
    code, out, _ = distil_in_process(["run", "--help"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "== Configuration groups ==" in out and "distil SUB --help" not in out


def test_a_misspelt_subcommand_is_the_hydra_apps_one_line_error(tmp_path, monkeypatch, capsys):
    code, out, err = distil_in_process(["reprot", "outputs/multirun"], tmp_path, monkeypatch, capsys)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [err.strip()] and "Traceback" not in err
    assert err.startswith("distil: error: Error parsing override 'reprot'")
    assert not (tmp_path / "outputs").exists()


@pytest.mark.parametrize("args,message", [
    (["bench", "nope"], "distil bench: error: no bench 'nope'; choose one of: students, cache, checkpoint, demo, "
                        "table-jobs, cache-workers, deploy, all"),
    (["paper"], "distil paper: error: choose a paper: tang-table2, turc-table1, wu-table2, wu-table5, all"),
    (["table"], "distil table: error: name a preset (distil table --list shows them), or give --all"),
    (["report", "nowhere"], "distil report: error: nowhere is not a directory"),
    (["bench", "students", "--passes", "0"], "distil bench students: error: --examples, --seq-len, --threads and "
                                             "--passes must be positive"),
])
def test_bad_input_is_one_line_naming_the_subcommand(args, message, tmp_path, monkeypatch, capsys):
    code, out, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(message), err


@pytest.mark.heavy
def test_table_frontier_targets_writes_the_targets(tmp_path, monkeypatch, capsys):
    """make frontier's last step (scripts/frontier_targets.py before): with no run done, nothing is measured."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    code, out, err = distil_in_process(["table", "--frontier-targets"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    tables = tmp_path / "outputs" / "tables"
    assert (tables / "frontier-targets.csv").is_file()
    assert (tables / "frontier-targets.md").read_text().startswith("<!-- frontier targets (frontier-sst2")
    assert "not measured" in out


@pytest.mark.slow
def test_make_bench_is_one_command_that_writes_every_bench_table(tmp_path):
    """`make bench` is `distil bench all`: the three benches and the papers' timing tables (~2 min quick)."""
    run = subprocess.run([sys.executable, "-m", "distil.cli.main", "bench", "all", "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-2000:]
    written = sorted(path.name for path in tmp_path.glob("*.md"))
    assert written == ["bench-cache.md", "bench.md", "bench_augment.md", "bench_checkpoint.md", "bench_tang.md",
                       "bench_turc.md", "bench_wu.md"]
    assert (REPO / "Makefile").read_text().split("\nbench:")[1].split("\n")[1].strip() == "distil bench all"


def test_python_m_distil_cli_is_the_command():
    run = subprocess.run([sys.executable, "-m", "distil.cli", "--help"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "distil SUB [args ...]" in run.stdout
