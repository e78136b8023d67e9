"""`distil search`: the Pareto set, the limits, a real search on the toy fixtures, killed and resumed."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from distil.cli.search import main
from distil.search.pareto import best_within, pareto_front
from distil.search.preset import load_search
from distil.search.space import check_space, suggest

PRESET = """\
name: tiny-search
base: [debug=smoke]
seed: 1
reference: [student=bilstm]
trials: 3
limits: {max_latency_ms: 1000.0, max_size_mb: 10.0}
threads: 1
space:
  student:
    bilstm: {student.hidden_size: [32]}  # the reference's own run (debug=smoke): one cell trains
  backend: [eager, onnx-int8]
"""


def test_the_pareto_front_keeps_exactly_the_points_nothing_beats():
    points = [(0.9, 2.0), (0.8, 1.0), (0.85, 3.0), (0.9, 2.0), (0.7, 0.5), (0.8, 1.5)]
    assert pareto_front(points) == [0, 1, 3, 4]  # equal points both stay; (0.85, 3) and (0.8, 1.5) are beaten
    assert pareto_front([]) == []


def test_the_best_is_the_highest_dev_score_within_both_limits_the_faster_of_equals():
    points = [(0.9, 2.0, 5.0), (0.8, 1.0, 5.0), (0.8, 0.9, 20.0), (0.8, 0.8, 5.0)]
    assert best_within(points, 1.0, 10.0) == 3
    assert best_within(points, None, None) == 0
    assert best_within(points, 0.5, None) is None


@pytest.mark.parametrize("name", ["toy", "sst2"])
@pytest.mark.heavy
def test_shipped_search_presets_compose_every_choice(name):
    preset = load_search(name)
    check_space(preset)
    assert preset.limits == ({"max_latency_ms": 1.0, "max_size_mb": 10.0} if name == "sst2"
                             else {"max_latency_ms": 50.0, "max_size_mb": 10.0})


@pytest.mark.parametrize("argv,message", [
    (["nope"], "distil search: error: unknown search preset 'nope'; choose one of: sst2, toy (or give a preset file)"),
    (["toy", "--max-latency-ms", "-1"],
     "distil search: error: argument --max-latency-ms: '-1' is not a positive number (see: distil search --help)"),
    (["toy", "--max-size-mb", "ten"],
     "distil search: error: argument --max-size-mb: 'ten' is not a positive number (see: distil search --help)"),
], ids=["unknown-preset", "negative-limit", "limit-not-a-number"])
def test_a_bad_preset_or_limit_is_one_line_and_exit_2(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [message]


def test_a_bad_limit_in_a_preset_file_is_one_line(tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(PRESET.replace("max_size_mb: 10.0", "max_size_mb: -2"))
    with pytest.raises(SystemExit) as exit_:
        main([str(path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"distil search: error: search preset {path}: max_size_mb -2 is not a positive number; give one (e.g. "
        f"max_size_mb: 1.0) or null for no limit"]


def search(args: list[str], tmp_path) -> subprocess.CompletedProcess:
    env = {**os.environ, "DISTIL_OUTPUTS": str(tmp_path / "outputs")}
    return subprocess.run([sys.executable, "-m", "distil", "search", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path)


def cells(tmp_path) -> set[str]:
    return {path.name for path in (tmp_path / "outputs" / "cells").iterdir()}


def dead_worker() -> str:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return f"{socket.gethostname()}:{process.pid}"


def check_record(recorded, out, path, stdout: str) -> None:
    """--record copies the report into results/search/<preset>/ with how it was measured."""
    import json

    from distil.search.page import recorded as read_record
    from distil.search.page import write_search_page

    assert sorted(p.name for p in recorded.iterdir()) == ["pareto.csv", "pareto.png", "search.json", "study.json",
                                                              "trials.csv"]
    for name in ("trials.csv", "pareto.csv", "pareto.png"):
        assert (recorded / name).read_bytes() == (out / name).read_bytes()
    assert (recorded / "pareto.png").stat().st_size < 100_000  # small enough to commit
    record = json.loads((recorded / "search.json").read_text())
    assert record == read_record(recorded)  # its digests match its files
    assert record["command"] == f"distil search {path} --out {out} --record"
    assert {key: record[key] for key in ("preset", "trials", "complete", "pruned", "failed", "killed", "invocations",
                                         "families", "metric", "frontier", "limits")} == {
        "preset": "tiny-search", "trials": 3, "complete": 3, "pruned": 0, "failed": 0, "killed": 0, "invocations": 1,
        "families": ["bilstm"], "metric": "accuracy", "frontier": None,
        "limits": {"max_latency_ms": 1000.0, "max_size_mb": 10.0}}
    assert 0 < record["trial_s"] < record["wall_s"] == record["wall_s_total"]
    assert record["best"]["trial"] in (0, 1, 2) and record["reference"]["overrides"] == ["student=bilstm"]
    assert f"distil search: recorded in {recorded} (make results writes its page)" in stdout
    docs = recorded.parent.parent.parent / "docs"
    page = write_search_page(recorded.parent, docs, out.parent / "outputs").read_text()
    assert "## tiny-search\n\n**The question**: the most accurate student under 1000 ms per text and 10 MB" in page
    assert "**Trials**: 3 (3 complete, 0 pruned before training (predicted over a limit), 0 failed)" in page
    assert (docs / "figures" / "search-tiny-search.png").read_bytes() == (out / "pareto.png").read_bytes()


@pytest.mark.heavy
def test_a_search_runs_resumes_a_killed_trial_and_prunes_before_training(tmp_path, monkeypatch, capsys):
    """The first search is the real command (recorded); the next two run in this process (a few seconds less each)."""
    from optuna.trial import TrialState

    from distil.search.study import KILLED, WORKER, open_study

    path = tmp_path / "tiny-search.yaml"
    path.write_text(PRESET)
    out = tmp_path / "search"
    ran = search([str(path), "--out", str(out), "--record"], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (out / "pareto.md").read_text().startswith("# Search tiny-search: the Pareto set")
    assert len((out / "trials.csv").read_text().splitlines()) == 4  # header + 3 trials
    assert {p.name for p in (out / "best").iterdir()} >= {"README.md", "config.json", "model.safetensors",
                                                          "vocab.json", "tokenizer", "search.json"}
    trained = cells(tmp_path)
    check_record(tmp_path / "results" / "search" / "tiny-search", out, path, ran.stdout)

    # a worker killed during a fourth trial left it RUNNING: the next search fails it and runs its choices again
    preset = load_search(str(path))
    study, _ = open_study(preset, out)
    killed = study.ask()
    killed.set_user_attr(WORKER, dead_worker())
    choice = suggest(killed, preset)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main([str(path), "--out", str(out), "--trials", "4"]) == 0
    assert f"trial {killed.number}: its worker died; marked failed, its choices queued again" in capsys.readouterr().out
    trials = open_study(load_search(str(path)), out)[0].trials
    assert [(t.state, t.user_attrs.get(KILLED, False)) for t in trials] == [
        *[(TrialState.COMPLETE, False)] * 3, (TrialState.FAIL, True), (TrialState.COMPLETE, False)]
    assert trials[4].params == killed.params and trials[4].user_attrs["overrides"] == list(choice.overrides)
    assert cells(tmp_path) == trained  # its cell had finished: reused, not trained again

    # a limit no student meets: every trial is pruned from its untrained probe, and no cell is made for it
    path.write_text(PRESET.replace("bilstm: {student.hidden_size: [32]}", "static: {student.embedding_dim: [8]}")
                    .replace("[eager, onnx-int8]", "[eager]"))  # no probe to export: ~3 s less
    assert main([str(path), "--out", str(tmp_path / "pruned"), "--max-size-mb", "0.0001"]) == 1
    pruned = open_study(load_search(str(path), {"max_size_mb": 0.0001}), tmp_path / "pruned")[0].trials
    assert [t.state for t in pruned] == [TrialState.PRUNED] * 3
    assert all(t.user_attrs["predicted_mb"] > 0.0001 and t.user_attrs["cell"] not in cells(tmp_path) for t in pruned)
    assert cells(tmp_path) == trained
    last = capsys.readouterr().err.splitlines()[-1]
    assert last.startswith("distil search: no finished trial is within the limits") and last.endswith(
        "; best/ not written")


@pytest.mark.slow
def test_the_toy_preset_searches_three_families_and_writes_its_best(tmp_path):
    """The shipped toy preset end to end: six trials over static, BiLSTM and Transformer students."""
    ran = search(["toy", "--out", str(tmp_path / "search")], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert "distil search: trials: 6 complete;" in ran.stdout
    assert (tmp_path / "search" / "best" / "search.json").is_file()
    assert (tmp_path / "search" / "pareto.png").is_file()


@pytest.mark.slow
def test_a_search_killed_while_a_trial_trains_resumes_and_ends_with_every_trial(tmp_path):
    """SIGKILL the real command while its first trial that trains a new cell trains; the same command again
    fails that trial, runs its choices again and ends with the preset's trials, as an uninterrupted search
    would."""
    import signal

    from optuna.trial import TrialState

    from distil.search.study import KILLED, open_study

    path = tmp_path / "tiny-search.yaml"
    families = "bilstm: {student.hidden_size: [16, 32]}\n    static: {student.embedding_dim: [16]}"
    path.write_text(PRESET.replace("bilstm: {student.hidden_size: [32]}", families))
    out = tmp_path / "search"
    env = {**os.environ, "DISTIL_OUTPUTS": str(tmp_path / "outputs")}
    process = subprocess.Popen([sys.executable, "-m", "distil", "search", str(path), "--out", str(out)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=tmp_path)
    killed = None
    for line in process.stdout:
        if line.startswith("trial ") and ": training cell " in line:
            process.send_signal(signal.SIGKILL)
            killed = int(line.split()[1])
            break
    process.wait()
    ran = search([str(path), "--out", str(out)], tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert f"trial {killed}: its worker died; marked failed, its choices queued again" in ran.stdout
    trials = open_study(load_search(str(path)), out)[0].trials
    assert sum(t.state == TrialState.COMPLETE for t in trials) == 3
    assert [t.number for t in trials if t.user_attrs.get(KILLED)] == [killed]
    assert any(t.params == trials[killed].params and t.state == TrialState.COMPLETE for t in trials[killed + 1:])


@pytest.mark.slow
def test_a_recorded_search_goes_on_where_outputs_is_gone(tmp_path):
    """A new machine: outputs/ and the search directory are gone, the record (results/search) is there. The
    same command loads the recorded trials, asks for no trial again, trains the Pareto student's cell again
    for the report, and reads the test score the first machine read."""
    import json

    path = tmp_path / "tiny-search.yaml"
    # a student other than the reference's: its cell is one that only a trial trains
    path.write_text(PRESET.replace("[32]", "[48]").replace("trials: 3", "trials: 2"))
    first = search([str(path), "--out", str(tmp_path / "search"), "--record"], tmp_path)
    assert first.returncode == 0, first.stderr
    recorded = tmp_path / "results" / "search" / "tiny-search"
    saved = json.loads((recorded / "study.json").read_text())
    assert [t["state"] for t in saved["trials"]] == ["COMPLETE", "COMPLETE"]
    pareto = (tmp_path / "search" / "pareto.csv").read_text()

    import shutil

    shutil.rmtree(tmp_path / "outputs")
    again = search([str(path), "--out", str(tmp_path / "elsewhere")], tmp_path)
    assert again.returncode == 0, again.stderr
    assert f"resumed 2 trial(s) of study {saved['study']} from its record, {recorded / 'study.json'}" in again.stdout
    assert ": training cell " not in again.stdout  # no trial ran again
    retrained = [line for line in again.stdout.splitlines() if "training it again for the report" in line]
    assert len(retrained) == 1  # both trials name the one cell (two backends)
    assert (tmp_path / "elsewhere" / "pareto.csv").read_text() == pareto
    assert "distil search: trials: 2 complete;" in again.stdout


def test_a_search_stops_when_the_code_changed_under_it(tmp_path, monkeypatch):
    """A trial whose cell the table runner refuses (the package changed) stops the search, where any other
    failed run only fails its trial: every later trial would fail the same way."""
    import types

    import optuna

    from distil.search import study as study_module
    from distil.tables.preset import Cell
    from distil.tables.run import CodeChanged

    path = tmp_path / "tiny-search.yaml"
    path.write_text(PRESET.replace("limits: {max_latency_ms: 1000.0, max_size_mb: 10.0}",
                                     "limits: {max_latency_ms: null, max_size_mb: null}"))
    preset = load_search(str(path))
    study = optuna.create_study(directions=["maximize", "minimize"])
    trial = study.ask()
    choice = suggest(trial, preset)
    ctx = types.SimpleNamespace(preset=preset, root=tmp_path, extra=(), say=lambda line: None, workers=None)
    monkeypatch.setattr(study_module, "finished_here", lambda root, key: None)
    # the trial's cell as the run would name it, without composing its config (a second a trial)
    monkeypatch.setattr(study_module, "cell_of", lambda preset, overrides, row: Cell(row, None, 1, [], "key"))

    def refused(cell, root, extra=(), workers=None):
        raise CodeChanged("the distil package changed since this command started")

    monkeypatch.setattr(study_module, "ensure_cell", refused)
    with pytest.raises(CodeChanged):
        study_module.run_trial(study, trial, choice, ctx)
    monkeypatch.setattr(study_module, "ensure_cell", lambda cell, root, extra=(), workers=None: "failed: out of memory")
    second = study.ask()
    study_module.run_trial(study, second, suggest(second, preset), ctx)
    assert study.trials[1].state == optuna.trial.TrialState.FAIL
