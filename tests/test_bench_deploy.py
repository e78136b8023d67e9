"""distil bench deploy: a smoke run's student served by PyTorch, ONNX and int8 ONNX (--quick: its tables and
targets, nothing recorded, the run left as it was), the run it picks by default, the smoke students it trains
for every family (the `distil -m` sweeps faked), and how it judges and shows a target. Nothing here asserts a
time: timings depend on the machine and its load; only their presence and sign are checked."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf

from distil.bench import deploy
from distil.cli.bench import deploy as deploy_command
from distil.config.schema import CONF_DIR
from distil.errors import DistilError
from distil.students import FAMILIES
from distil.tasks import get_task
from tests.test_cli import distil_in_process

TABLES = ("targets", "backends", "speed", "api overhead", "families")


@pytest.mark.heavy
def test_quick_serves_a_smoke_run_three_ways_judges_every_target_and_records_nothing(tmp_path, monkeypatch,
                                                                                      capsys):
    assert distil_in_process(["debug=smoke"], tmp_path, monkeypatch, capsys)[0] == 0
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    before = sorted(p.relative_to(run_dir) for p in run_dir.rglob("*"))
    out = tmp_path / "tables"
    assert deploy_command([str(run_dir), "--quick", "--threads", "1", "--out", str(out)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert sorted(p.relative_to(run_dir) for p in run_dir.rglob("*")) == before  # exported into a copy
    assert not (tmp_path / "results").exists()  # conftest's DISTIL_RESULTS: a quick run is no measurement

    csv = pd.read_csv(out / "bench-deploy.csv")
    assert list(csv["table"].unique()) == list(TABLES)
    assert set(csv["command"]) == {f"distil bench deploy {run_dir} --quick --threads 1 --out {out}"}
    assert csv[["machine", "code", "date"]].notna().all().all()
    tables = {name: csv[csv["table"] == name] for name in TABLES}
    backends = tables["backends"].set_index("backend")
    assert list(backends.index) == list(deploy.BACKENDS)
    assert list(backends["file"]) == ["model.safetensors", "model.onnx", "model.int8.onnx"]
    recorded = json.loads((run_dir / "metrics.json").read_text())["student"]["test"]["accuracy"]
    assert backends.loc["torch", "test score"] == pytest.approx(100 * recorded)
    assert backends.loc["onnx", "agree with torch %"] == 100 and backends.loc["onnx", "largest logit difference"] < 1e-4
    speed = tables["speed"]
    assert len(speed) == 2 * len(deploy.BACKENDS) and (speed["value"] > 0).all() and (speed["x torch"] > 0).all()
    assert set(speed["passes"]) == {2}
    overhead = tables["api overhead"]
    assert list(overhead["backend"]) == list(deploy.OVERHEAD_BACKENDS) and set(overhead["texts"]) == {256}
    [family] = tables["families"].to_dict("records")  # quick: the run's own student alone
    assert (family["family"], family["dataset"], family["test examples"], family["met"]) == ("bilstm", "toy", 24,
                                                                                            "met")

    targets = tables["targets"]
    assert list(targets["check"]) == [deploy.LATENCY.check, deploy.THROUGHPUT.check, deploy.SCORE.check,
                                      deploy.SIZE.check, deploy.families_target(1).check,
                                      *(deploy.overhead_target(b).check for b in deploy.OVERHEAD_BACKENDS)]
    judged = [deploy.LATENCY, deploy.THROUGHPUT, deploy.SCORE, deploy.SIZE, deploy.families_target(1),
              *map(deploy.overhead_target, deploy.OVERHEAD_BACKENDS)]
    for target, row in zip(judged, targets.to_dict("records"), strict=True):  # computed, never typed
        assert row["target"] == target.text and row["met"] == ("met" if target.met(float(row["measured"])) else
                                                               "not met")
    assert targets["passes"].notna().sum() == 4  # the timed ratios carry their spread

    md = (out / "bench-deploy.md").read_text()
    assert md.startswith("### Serving a student: PyTorch, ONNX and int8 ONNX (`distil bench deploy`)\n\n`distil "
                         "bench deploy ")
    assert "quick (small sizes" in md and "Load average (1 minute)" in md
    assert [line for line in md.splitlines() if line.startswith("#### ")] == [
        "#### Targets", "#### Each backend on the test split", "#### Speed, end to end",
        "#### The Python API against the bare model loop", "#### Every family's ONNX export against PyTorch"]
    assert "| all 1 " in md and "| 1.5e" not in md.split("#### Targets")[1].split("####")[0]


def write_run(root: Path, stamp: str, status: str = "ok", overrides: list[str] | None = None) -> Path:
    run_dir = root / "runs" / stamp
    run_dir.mkdir(parents=True)
    (run_dir / "metrics.json").write_text(json.dumps({"status": status, "overrides": overrides or []}))
    return run_dir


def test_the_default_run_is_the_newest_finished_run_of_the_default_job(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path))
    with pytest.raises(DistilError, match=f"no finished run of the default job under {tmp_path / 'runs'}; run "
                                          f"`make demo` first, or pass a run directory"):
        deploy.default_run()
    write_run(tmp_path, "2026-01-01/10-00-00")
    demo = write_run(tmp_path, "2026-01-02/09-00-00", overrides=["runtime.device=cpu"])  # where, not what
    write_run(tmp_path, "2026-01-02/09-00-00_2", overrides=["student=rnn"])  # another job
    write_run(tmp_path, "2026-01-02/10-00-00", status="failed: interrupted")
    assert deploy.default_run() == demo


def test_every_family_has_a_smoke_student_on_a_toy_dataset_it_reads():
    kinds = set()
    for student, dataset in deploy.FAMILY_JOBS:
        kind = OmegaConf.load(CONF_DIR / "student" / f"{student}.yaml").kind
        task = get_task(OmegaConf.load(CONF_DIR / "dataset" / f"{dataset}.yaml").task)
        assert task.inputs in FAMILIES[kind].INPUTS, (student, dataset)
        kinds.add(kind)
    assert kinds == set(FAMILIES)


def test_the_families_are_trained_by_one_smoke_sweep_per_dataset(tmp_path, monkeypatch):
    commands = []

    def fake_run(command, **kwargs):
        commands.append(command[1:])
        sweep = Path(next(arg for arg in command if arg.startswith("hydra.sweep.dir=")).split("=", 1)[1])
        students = next(arg for arg in command if arg.startswith("student=")).split("=", 1)[1].split(",")
        for number, student in enumerate(reversed(students)):  # cells in another order than asked
            (sweep / str(number)).mkdir(parents=True)
            (sweep / str(number) / "metrics.json").write_text(json.dumps({"choices": {"student": student}}))
        return subprocess.CompletedProcess(command, 0, "", "")

    monkeypatch.setattr(deploy.subprocess, "run", fake_run)
    jobs = [("bilstm", "toy"), ("bilstm-tagger", "toy-ner"), ("rnn", "toy")]
    runs = deploy.train_families(tmp_path, jobs)
    assert [json.loads((run / "metrics.json").read_text())["choices"]["student"] for run in runs] == [
        "bilstm", "bilstm-tagger", "rnn"]
    assert commands == [["-m", "debug=smoke", "dataset=toy", "student=bilstm,rnn", f"paths.outputs={tmp_path}/outputs",
                         f"hydra.sweep.dir={tmp_path}/toy"],
                        ["-m", "debug=smoke", "dataset=toy-ner", "student=bilstm-tagger",
                         f"paths.outputs={tmp_path}/outputs", f"hydra.sweep.dir={tmp_path}/toy-ner"]]
    monkeypatch.setattr(deploy.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 2, "", "distil: error: 1 of 2 sweep cells failed"))
    with pytest.raises(DistilError, match=r"the smoke runs of bilstm, rnn on toy failed \(exit 2\).*cells failed"):
        deploy.train_families(tmp_path / "again", jobs)


@pytest.mark.parametrize("target,passing,failing", [
    (deploy.LATENCY, 2.0, 1.99), (deploy.SIZE, 0.30, 0.31), (deploy.SCORE, -0.5, 0.51),
    (deploy.families_target(9), 9, 8)])
def test_a_target_is_met_at_its_bound_and_missed_past_it(target, passing, failing):
    assert target.met(passing) and not target.met(failing)


def test_the_tables_show_counts_ratios_and_differences_each_in_its_format():
    frame = pd.DataFrame({"backend": ["torch", "onnx"], "largest logit difference": [None, 1.5e-8],
                          "texts": pd.array([10_000, 256], dtype="Int64"), "API / bare": [0.987, 1.0]})
    header, rule, *rows = deploy.shown(frame).splitlines()
    assert [(cell.startswith(":"), cell.endswith(":")) for cell in rule.split("|")[1:-1]] == [
        (True, False), (False, True), (False, True), (False, True)]  # text to the left, numbers to the right
    assert [[cell.strip() for cell in row.split("|")[1:-1]] for row in rows] == [["torch", "-", "10,000", "0.99"],
                                                                                  ["onnx", "1.5e-08", "256", "1.00"]]


@pytest.mark.parametrize("args", [["--passes", "0"], ["--texts", "0"], ["--latency-texts", "0"]],
                         ids=["passes", "texts", "latency-texts"])
def test_bad_sizes_are_one_line(args, capsys):
    with pytest.raises(SystemExit) as exit_:
        deploy_command(args)
    assert exit_.value.code == 2
    assert "--passes, --latency-texts, --texts and --threads must be positive" in capsys.readouterr().err


def test_make_results_puts_the_recorded_tables_on_the_deploy_page_never_typed(tmp_path, monkeypatch):
    """scripts/readme_results.py (make results) fills the deploy page's block: where the tables will come
    from before a record, the recorded bench-deploy.md after; nothing outside the markers changes."""
    from distil.tables.ledger import record_bench
    from tests.test_tables_render import readme_results

    monkeypatch.setenv("DISTIL_RESULTS", str(tmp_path / "results"))
    readme, page = tmp_path / "README.md", tmp_path / "docs" / "how-to" / "deploy.md"
    readme.write_text("# x\n")
    page.parent.mkdir(parents=True)
    page.write_text("# Deploy\n\n<!-- bench-deploy:start -->\n1.9x, typed by hand\n<!-- bench-deploy:end -->\n\n"
                    "after\n")
    script = readme_results()
    script.main(["--readme", str(readme), "--tables", str(tmp_path / "tables")])
    text = page.read_text()
    assert "typed by hand" not in text and text.endswith("<!-- bench-deploy:end -->\n\nafter\n")
    assert "Not measured yet. `distil bench deploy`, run on a quiet machine after `make demo`, records " in text
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "bench-deploy.csv").write_text("table,check\ntargets,x\n")
    (measured / "bench-deploy.md").write_text("### Serving a student\n\n| check |\n|:--|\n| x |\n")
    record_bench(measured / "bench-deploy.csv", {"command": "distil bench deploy", "machine": "m", "code": "c",
                                                 "date": "d"})
    script.main(["--readme", str(readme), "--tables", str(tmp_path / "tables")])
    text = page.read_text()
    assert "Not measured yet" not in text
    assert "### Serving a student\n\n| check |\n|:--|\n| x |\n<!-- bench-deploy:end" in text
    assert "from the recorded `results/bench/bench-deploy.md`: do not edit by hand" in text
    assert readme.read_text() == "# x\n"


def test_a_run_with_a_student_per_language_asks_for_one_of_them(tmp_path, capsys):
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "config.yaml").write_text("seed: 1\n")
    for language in ("de", "en"):
        (run_dir / f"student-{language}").mkdir()
        (run_dir / f"student-{language}" / "config.json").write_text(json.dumps({"student": {"kind": "bilstm"}}))
    with pytest.raises(SystemExit) as exit_:
        deploy_command([str(run_dir), "--quick"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err == (f"distil bench deploy: error: {run_dir} has a student per language (de, en); "
                                       f"pass one of its student-<lang>/ folders\n")
