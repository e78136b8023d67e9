"""Experiment tracking (tracking=none|tensorboard|mlflow): off by default, every epoch of the one training
loop reaches the backend, and a real smoke run reads back from TensorBoard's event files and MLflow's
file store with the numbers metrics.json holds."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from distil.common import tracking
from distil.common.tracking import Tracker, flatten, metric_name, open_tracker
from distil.errors import DistilError
from distil.training.loop import fit
from tests.conftest import compose_config
from tests.test_cli import PINNED_SMOKE, distil_in_process

SMOKE_STAGE = "d1 S1 ce-logit_mse"  # the smoke run's one stage, "d1 S1 (ce+logit_mse)", in MLflow's characters
TEACHER = "fine-tuning teacher tiny"


class Recording(Tracker):
    """A backend that keeps what it is given."""

    def __init__(self):
        self.metrics: list[tuple[dict, int]] = []
        self.closed: list[str] = []

    def log_metrics(self, metrics, step=0):
        self.metrics.append((dict(metrics), step))

    def close(self, status="finished"):
        self.closed.append(status)


def tiny_fit(epochs: int = 3, description: str = "toy stage"):
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scores = iter([0.5, 0.25, 0.75])
    return fit(model, optimizer, lambda epoch: [0, 1], lambda batch: (model.weight ** 2).sum(),
               lambda: next(scores), epochs=epochs, patience=5, description=description)


def test_tracking_is_off_by_default_and_the_default_tracker_logs_nothing():
    assert compose_config().tracking.kind == "none"
    assert type(tracking.current()) is Tracker  # outside a run: the no-op one
    tiny_fit()  # the loop logs unconditionally; nothing listens
    assert isinstance(open_tracker("none"), Tracker) and type(open_tracker("none")) is Tracker


def test_every_epoch_of_fit_reaches_the_active_tracker_which_is_closed_after():
    recording = Recording()
    with tracking.use(recording):
        assert tracking.current() is recording
        result = tiny_fit(description="d1 S1 (ce+soft_ce)")
    assert type(tracking.current()) is Tracker and recording.closed == ["finished"]
    assert [step for _, step in recording.metrics] == [1, 2, 3]
    assert [m["d1 S1 ce-soft_ce/dev"] for m, _ in recording.metrics] == [0.5, 0.25, 0.75]
    assert [m["d1 S1 ce-soft_ce/train_loss"] for m, _ in recording.metrics] == pytest.approx(
        [h["train_loss"] for h in result.history])


@pytest.mark.parametrize(("error", "status"), [(ValueError("boom"), "failed"), (KeyboardInterrupt(), "killed")])
def test_a_failed_run_still_closes_its_tracker(error, status):
    recording = Recording()
    with pytest.raises(type(error)), tracking.use(recording):
        raise error
    assert recording.closed == [status] and type(tracking.current()) is Tracker


def test_names_and_params_in_the_characters_mlflow_accepts():
    assert metric_name("d1 S1 (ce+soft_ce)") == "d1 S1 ce-soft_ce"
    assert metric_name("fine-tuning teacher tiny lr 5e-05") == "fine-tuning teacher tiny lr 5e-05"
    nested = {"a": {"b": 1, "c": [1, 2]}, "stages": [{"losses": {"ce": 1.0}}], "none": None}
    assert flatten(nested) == {"a.b": 1, "a.c": [1, 2], "stages.0.losses.ce": 1.0, "none": None}


def test_an_unknown_kind_is_one_line():
    with pytest.raises(DistilError) as error:
        open_tracker("wandb", "somewhere")
    assert str(error.value) == "unknown tracking.kind 'wandb'; choose one of: none, tensorboard, mlflow"


@pytest.mark.parametrize(("kind", "module", "package"), [("tensorboard", "torch.utils.tensorboard", "tensorboard"),
                                                        ("mlflow", "mlflow.tracking", "mlflow-skinny")],
                         ids=["tensorboard", "mlflow"])
def test_a_missing_backend_names_its_package(tmp_path, monkeypatch, kind, module, package):
    monkeypatch.setitem(sys.modules, module, None)  # as if it were not installed
    with pytest.raises(DistilError) as error:
        open_tracker(kind, tmp_path / "logs")
    assert str(error.value) == (f"tracking={kind} needs the {package} package, which is not installed: "
                                f"pip install {package} (make install includes it), or run with tracking=none")


def tensorboard_scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(directory))
    events.Reload()
    return {tag: [(e.step, e.value) for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_tensorboard_tracker_writes_what_it_is_given(tmp_path):
    tracker = open_tracker("tensorboard", tmp_path / "tb")
    with tracking.use(tracker):
        tiny_fit(description="toy stage")
        tracker.log_metrics({"student/test/accuracy": 0.5, "skipped": None})
    scalars = tensorboard_scalars(tmp_path / "tb")
    assert [step for step, _ in scalars["toy stage/dev"]] == [1, 2, 3]
    assert [value for _, value in scalars["toy stage/dev"]] == [0.5, 0.25, 0.75]
    assert scalars["student/test/accuracy"] == [(0, 0.5)] and "skipped" not in scalars


@pytest.fixture
def file_store_opt_in_unset(monkeypatch):
    """MLFLOW_ALLOW_FILE_STORE unset, as on a fresh machine (the tracker opts in itself), and unset again
    after the test, whatever the run set."""
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "recorded")  # so that monkeypatch restores it: unset
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE")


def mlflow_client(store: Path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # reading MLflow 3's file store needs its opt-in too
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=store.resolve().as_uri())


def test_mlflow_tracker_round_trips_through_the_file_store(tmp_path, monkeypatch, file_store_opt_in_unset):
    (tmp_path / "student").mkdir()
    (tmp_path / "student" / "config.json").write_text("{}")
    tracker = open_tracker("mlflow", tmp_path / "mlruns", "toy", "a run")
    with tracking.use(tracker):
        tracker.log_params({"trainer": {"lr": 0.001}, "schedule": {"stages": [{"name": "S1"}]}})
        tiny_fit(description="toy stage")
        tracker.log_artifact(tmp_path / "student")
    client = mlflow_client(tmp_path / "mlruns", monkeypatch)
    [run] = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    assert (run.info.run_name, run.info.status) == ("a run", "FINISHED")
    assert run.data.params == {"trainer.lr": "0.001", "schedule.stages.0.name": "S1"}
    history = client.get_metric_history(run.info.run_id, "toy stage/dev")
    assert [(m.step, m.value) for m in history] == [(1, 0.5), (2, 0.25), (3, 0.75)]
    assert {a.path for a in client.list_artifacts(run.info.run_id)} == {"config.yaml", "student"}
    # a second run finds the experiment the first created
    open_tracker("mlflow", tmp_path / "mlruns", "toy").close()
    assert len(client.search_runs([client.get_experiment_by_name("toy").experiment_id])) == 2


def smoke_run(tmp_path, monkeypatch, capsys, *args) -> tuple[Path, dict]:
    code, _, err = distil_in_process(["debug=smoke", "schedule=d1", *args], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    [path] = (tmp_path / "outputs" / "runs").rglob("metrics.json")
    return path.parent, json.loads(path.read_text())


def test_a_smoke_run_logs_to_tensorboard(tmp_path, monkeypatch, capsys):
    run_dir, metrics = smoke_run(tmp_path, monkeypatch, capsys, "tracking=tensorboard")
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    stage = metrics["student"]["stages"][0]
    train = [value for _, value in scalars[f"{SMOKE_STAGE}/train_loss"]]
    assert train == pytest.approx(PINNED_SMOKE["train_losses"], abs=1e-4)  # event files hold float32
    assert train == pytest.approx([h["train_loss"] for h in stage["history"][1:]], rel=1e-6)
    assert [step for step, _ in scalars[f"{SMOKE_STAGE}/dev"]] == [1, 2, 3]
    assert len(scalars[f"{TEACHER}/train_loss"]) == metrics["teacher"]["finetune"]["epochs_run"]
    assert scalars["student/test/accuracy"] == [(0, pytest.approx(metrics["student"]["test"]["accuracy"]))]
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir / "tensorboard"))
    events.Reload()
    config = events.Tensors("config/text_summary")[0].tensor_proto.string_val[0].decode()
    assert "schedule:" in config and "name: d1" in config


def test_a_smoke_run_logs_to_mlflow(tmp_path, monkeypatch, capsys, file_store_opt_in_unset):
    run_dir, metrics = smoke_run(tmp_path, monkeypatch, capsys, "tracking=mlflow")
    client = mlflow_client(tmp_path / "outputs" / "mlruns", monkeypatch)
    [run] = client.search_runs([client.get_experiment_by_name("toy").experiment_id])  # the dataset's experiment
    run_id = run.info.run_id
    assert run.info.status == "FINISHED" and run.data.tags["distil.run_dir"] == str(run_dir.resolve())
    assert run.data.params["schedule.name"] == "d1" and run.data.params["tracking.kind"] == "mlflow"
    assert run.data.params["schedule.stages.0.losses.ce"] == "1.0"
    stage = metrics["student"]["stages"][0]
    train = client.get_metric_history(run_id, f"{SMOKE_STAGE}/train_loss")
    assert [m.step for m in train] == [1, 2, 3]
    assert [m.value for m in train] == [h["train_loss"] for h in stage["history"][1:]]  # doubles: exact
    dev = client.get_metric_history(run_id, f"{SMOKE_STAGE}/dev")
    assert [m.value for m in dev] == [h["dev"] for h in stage["history"][1:]]
    teacher = client.get_metric_history(run_id, f"{TEACHER}/dev")
    assert [m.step for m in teacher] == list(range(1, metrics["teacher"]["finetune"]["epochs_run"] + 1))
    for split in ("dev", "test"):  # the final scores are metrics.json's
        assert run.data.metrics[f"student/{split}/accuracy"] == metrics["student"][split]["accuracy"]
        assert run.data.metrics[f"teacher/{split}/accuracy"] == metrics["teacher"][split]["accuracy"]
    assert {a.path for a in client.list_artifacts(run_id)} == {"config.yaml", "student"}
    saved = {a.path for a in client.list_artifacts(run_id, "student")}
    assert saved == {f"student/{p.name}" for p in (run_dir / "student").iterdir()}
    assert "student/model.safetensors" in saved


def test_tracking_changes_no_key():
    """What a run logs is not what it computes: a table cell (and a student's checkpoint) is found again
    whichever tracking it runs with."""
    from distil.run.plan import training_recipe
    from distil.tables.cells import cell_key

    key = cell_key(["debug=smoke", "seed=1"])
    assert cell_key(["debug=smoke", "tracking=mlflow", "seed=1"]) == key
    assert cell_key(["debug=smoke", "tracking=tensorboard", "tracking.dir=/x", "seed=1"]) == key
    assert training_recipe(compose_config("debug=smoke", "tracking=mlflow")) == training_recipe(
        compose_config("debug=smoke"))


def test_the_demo_bench_times_tracking_against_none_in_turn(tmp_path, monkeypatch):
    """`distil bench demo --with tracking=mlflow`: runs without and with it taking turns, a row each and
    the ratio of their median wall times (here measured by a stand-in: the real one is minutes a run)."""
    import pandas as pd

    from distil.bench import demo as bench_demo
    from distil.cli.bench import demo

    monkeypatch.chdir(tmp_path)
    runs = []

    def measure(overrides, code, date, source=None):
        runs.append(overrides)
        return {"code": code, "overrides": " ".join(overrides), "date": date,
                "wall s": 102.0 if "tracking=mlflow" in overrides else 100.0}

    monkeypatch.setattr(bench_demo, "measure", measure)
    assert demo(["--quick", "--out", str(tmp_path / "tables"), "--with", "tracking=mlflow", "--rounds", "2"]) == 0
    plain, tracked = ["debug=smoke"], ["debug=smoke", "tracking=mlflow"]
    assert runs == [plain, tracked, tracked, plain]  # the order swaps every round
    rows = pd.read_csv(tmp_path / "tables" / "bench-demo.csv")
    assert list(rows["overrides"]) == ["debug=smoke"] * 2 + ["debug=smoke tracking=mlflow"] * 2
    assert ("With `tracking=mlflow` against without, timed in turn in one run: 1.020x the median wall time."
            in (tmp_path / "tables" / "bench-demo.md").read_text())


def test_only_rank_0_opens_a_tracker(tmp_path, monkeypatch):
    """Under torchrun every rank trains alike: the others get the no-op tracker and write nothing."""
    from distil.common import distributed
    from distil.run.tracked import run_tracker

    cfg = compose_config("debug=smoke", "tracking=tensorboard")
    monkeypatch.setattr(distributed, "is_main", lambda: False)
    assert type(run_tracker(cfg, tmp_path / "run")) is Tracker and not (tmp_path / "run").exists()
    cfg.tracking.kind = "wandb"  # a bad kind still stops every rank alike
    with pytest.raises(DistilError, match="unknown tracking.kind 'wandb'"):
        run_tracker(cfg, tmp_path / "run")


@pytest.mark.slow  # two processes (torchrun or workers) on a smoke run: ~20 s
def test_a_torchrun_run_is_one_mlflow_run(tmp_path, monkeypatch, file_store_opt_in_unset):
    """Two processes (torchrun, gloo): one MLflow run, each epoch logged once, by rank 0."""
    from tests.test_distributed import SMOKE, distil

    done = distil(tmp_path, *SMOKE, "schedule=d1", "tracking=mlflow", processes=2)
    assert done.returncode == 0, done.stderr[-3000:]
    client = mlflow_client(tmp_path / "outputs" / "mlruns", monkeypatch)
    [run] = client.search_runs([client.get_experiment_by_name("toy").experiment_id])
    train = client.get_metric_history(run.info.run_id, f"{SMOKE_STAGE}/train_loss")
    assert [m.step for m in train] == [1, 2, 3] and run.info.status == "FINISHED"


def test_the_pre_training_loops_log_their_curves(smoke_cfg, tmp_path):
    """Masked-LM pre-training logs its losses by step, task-agnostic SRA distillation by pass: what their
    artifacts' histories hold."""
    from tests.test_pretrain import tiny_tokenizer
    from tests.test_runtime_pretrain import masked_lm, sra_build

    recording = Recording()
    with tracking.use(recording):
        mlm_info = masked_lm(tiny_tokenizer(smoke_cfg), tmp_path / "mlm")
        sra_info, _ = sra_build(tmp_path, "sra", steps=4)
    mlm_logged = [(step, m["pre-training/mlm_loss"]) for m, step in recording.metrics if "pre-training/mlm_loss" in m]
    assert mlm_logged == [(entry["step"], entry["mlm_loss"]) for entry in mlm_info["history"]] and mlm_logged
    sra_logged = [(step, m["task-agnostic SRA/train_loss"]) for m, step in recording.metrics
                  if "task-agnostic SRA/train_loss" in m]
    assert sra_logged == [(entry["epoch"], entry["loss"]) for entry in sra_info["history"]] and sra_logged
