"""A killed run, run again, continues from its last checkpoint and ends with the metrics of a run
that was never interrupted; a non-finite training loss stops a stage with the best weights so far."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from distil.cli import main as cli
from distil.run.schedule import StageTrainer
from distil.training.checkpoint import Checkpoint
from distil.training.loop import fit

# every epoch is checkpointed, so an interruption anywhere has a checkpoint to resume from
EVERY_EPOCH = "trainer.checkpoint_every_seconds=0"


class Killed(BaseException):
    """As kill -9 or Ctrl-C: nothing in the runner catches it."""


def comparable(metrics: dict) -> dict:
    """metrics.json without what may differ between two runs of one command: timings, speed,
    and whether the teacher's artifacts were built or reused."""
    if isinstance(metrics, dict):
        return {k: comparable(v) for k, v in metrics.items()
                if k not in ("seconds", "phases", "speed", "teacher_reused", "targets_reused", "teacher_ran")}
    if isinstance(metrics, list):
        return [comparable(v) for v in metrics]
    return metrics


def distil_in_process(tmp_path: Path, monkeypatch, run: str, *args: str) -> tuple[dict, str]:
    """One `distil debug=smoke ...` run in this process: its metrics.json and its log."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["distil", "debug=smoke", EVERY_EPOCH, f"hydra.run.dir=runs/{run}", *args])
    cli.main()
    run_dir = tmp_path / "runs" / run
    return json.loads((run_dir / "metrics.json").read_text()), (run_dir / "distil.log").read_text()


def count_dev_scores(monkeypatch, kill_at: int | None = None) -> list[int]:
    """Count the student's dev evaluations (the baseline of each step, then one per epoch);
    with `kill_at`, the run dies at that evaluation, before the epoch it ends is checkpointed."""
    calls, score = [0], StageTrainer.dev_score

    def counted(self):
        calls[0] += 1
        if calls[0] == kill_at:
            raise Killed
        return score(self)

    monkeypatch.setattr(StageTrainer, "dev_score", counted)
    return calls


@pytest.mark.parametrize("args, kills", [
    # d4.2: S1 has 3 unfreezing steps of a baseline + 3 epochs: the 5th evaluation is S1's second
    # step's baseline (resumed from the step boundary), the 19th S2's second step after its first epoch
    (["schedule=d4.2", "trainer.labels_only_epochs=4"],
     {5: "resuming d4.2 S1 (repr_kl) unfreeze bilstm at its start from",
      19: "resuming d4.2 S2 (logit_mse) unfreeze projection after epoch 1 from"}),
    (["schedule=d1"], {3: "resuming d1 S1 (ce+logit_mse) after epoch 1 from"}),
    # tagging: a finished step's record holds per-language scores, which must load weights-only too
    (["dataset=toy-ner", "student=bilstm-tagger", "schedule=d4.2", "trainer.labels_only_epochs=4"],
     {5: "resuming d4.2 S1 (repr_kl) unfreeze bilstm at its start from"}),
])
@pytest.mark.heavy
def test_interrupted_schedule_resumes_to_identical_metrics(tmp_path, monkeypatch, args, kills):
    calls = count_dev_scores(monkeypatch)
    reference, _ = distil_in_process(tmp_path, monkeypatch, "reference", *args)
    evaluations = calls[0]
    for kill_at, resume_line in kills.items():
        count_dev_scores(monkeypatch, kill_at)
        with pytest.raises(Killed):
            distil_in_process(tmp_path, monkeypatch, f"killed-{kill_at}", *args)
        calls = count_dev_scores(monkeypatch)
        resumed, log = distil_in_process(tmp_path, monkeypatch, f"resumed-{kill_at}", *args)
        assert resume_line in log
        assert calls[0] == evaluations - (kill_at - 1)  # only what was not checkpointed runs again
        assert comparable(resumed) == comparable(reference)
    assert list((tmp_path / "outputs" / "cache" / "checkpoints").iterdir()) == []  # removed once finished


def test_checkpoint_is_atomic_and_loads_weights_only(tmp_path):
    rng = np.random.default_rng(3)
    rng.random()
    checkpoint = Checkpoint(tmp_path / "c.pt")
    checkpoint.save({"rng": rng.bit_generator.state, "score": np.float64(0.25), "weights": torch.ones(2),
                     "per_language": {np.str_("de"): 0.5}})
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no partial file left
    state = torch.load(tmp_path / "c.pt", weights_only=True)
    assert state["rng"] == rng.bit_generator.state and state["score"] == 0.25 and type(state["score"]) is float
    assert [type(key) for key in state["per_language"]] == [str]
    assert torch.equal(state["weights"], torch.ones(2))


def test_checkpoint_is_saved_only_when_due(tmp_path, monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    checkpoint = Checkpoint(tmp_path / "c.pt", every_seconds=60)
    now[0] += 59
    assert not checkpoint.due()
    now[0] += 1
    assert checkpoint.due()
    checkpoint.save({})
    assert not checkpoint.due()


def test_nonfinite_loss_stops_fit_with_the_best_weights_so_far():
    """Epoch 1 is the best on dev; epoch 2's third batch has a NaN loss: fit stops there, before
    the NaN reaches the weights, and returns epoch 1's weights."""
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x = torch.randn(8, 2)
    seen, after_epoch_1 = [], {}

    def loss(batch):
        seen.append(batch)
        value = model(x[batch]).pow(2).mean()
        return value * float("nan") if len(seen) == 4 + 3 else value  # epoch 2, batch 3

    def evaluate():
        if not after_epoch_1:
            after_epoch_1.update({k: v.clone() for k, v in model.state_dict().items()})
            return 1.0
        return 0.0

    result = fit(model, optimizer, lambda epoch: [[2 * i, 2 * i + 1] for i in range(4)], loss, evaluate,
                 epochs=5, patience=5)
    assert result.nonfinite == "epoch 2, batch 3"
    assert (result.best_epoch, result.epochs_run) == (1, 1)
    assert len(seen) == 7  # nothing after the NaN
    assert all(torch.equal(model.state_dict()[k], v) for k, v in after_epoch_1.items())


@pytest.mark.heavy
def test_nonfinite_loss_stops_the_stage_and_names_the_epoch(tmp_path, monkeypatch):
    """d4.2 S2's first step gets a NaN loss in its second epoch: the record names it, S2's later
    steps are skipped, S3 still runs, and the step keeps its best weights (epoch 1)."""
    loss, calls = StageTrainer.loss, [0]

    def nan_in_s2(self, split, rows, teacher_rows=None):
        value = loss(self, split, rows, teacher_rows)
        if self.stage.name == "S2" and torch.is_grad_enabled():
            calls[0] += 1
            if calls[0] == 3 + 2:  # 36 transfer rows, batch 12: 3 batches an epoch; epoch 2, batch 2
                return value * float("inf")
        return value

    monkeypatch.setattr(StageTrainer, "loss", nan_in_s2)
    metrics, log = distil_in_process(tmp_path, monkeypatch, "nan", "schedule=d4.2")
    steps = [(r["name"], r["step"], r.get("nonfinite")) for r in metrics["student"]["stages"]]
    assert steps[3:5] == [("S2", "classifier", "epoch 2, batch 2"), ("S3", "classifier", None)]
    record = metrics["student"]["stages"][3]
    assert (record["best_epoch"], record["epochs_run"]) == (1, 1)
    assert ("d4.2 S2 (logit_mse) unfreeze classifier: training loss is inf at epoch 2, batch 2: stopping, "
            "keeping the best weights so far (epoch 1)") in log


# ---------------------------------------------------------------------------------------------
# The "Done when": the real console script, killed with SIGKILL in every phase.

# the console script of the Python running the tests (its venv's bin need not be on PATH)
DISTIL = next((str(p) for p in [Path(sys.executable).parent / "distil"] if p.is_file()), shutil.which("distil"))
# A smoke run made long enough to be killed inside each phase: more fine-tuning evaluations,
# a shard per 4 examples, every stage epoch checkpointed.
KILL_RUN = ["debug=smoke", "schedule=d4.2", EVERY_EPOCH, "teacher.finetune.epochs=6", "teacher.finetune.patience=6",
            "teacher.shard_size=4"]
# (phase, the first log line of it that a run prints, the most a kill waits after it in seconds);
# a run resumed past a phase's first line still prints a "resuming" line with its stage
PHASES = [("fine-tuning", "data toy", 0.2), ("caching", "fine-tuned teacher", 0.03),
          ("S1", "d4.2 S1 (", 0.1), ("S2", "d4.2 S2 (", 0.1), ("S3", "d4.2 S3 (", 0.3)]


def run_until(cwd: Path, run: str, marker: str | None = None, delay: float = 0.0) -> int:
    """Run the console script (its exit code); with `marker`, SIGKILL it `delay` seconds after that line is logged."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    args = [DISTIL, *KILL_RUN, f"hydra.run.dir=runs/{run}"]
    if marker is None:
        return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600).returncode
    process = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in process.stdout:
        if marker in line:
            time.sleep(delay)
            process.send_signal(signal.SIGKILL)
            break
    process.stdout.close()
    return process.wait(timeout=600)


@pytest.mark.slow
@pytest.mark.skipif(DISTIL is None, reason="distil console script not installed")
def test_killed_ten_times_in_every_phase_ends_with_identical_metrics(tmp_path):
    """Two passes through the phases, each killed once per phase (10 kills), every kill followed
    by a rerun of the same command; the last rerun of each pass finishes."""
    reference_dir, killed_dir = tmp_path / "reference", tmp_path / "killed"
    reference_dir.mkdir()
    run_until(reference_dir, "reference")
    reference = json.loads(next((reference_dir / "runs").rglob("metrics.json")).read_text())
    chooser = random.Random(13)
    for attempt in range(2):
        shutil.rmtree(killed_dir, ignore_errors=True)
        killed_dir.mkdir()
        for phase, marker, most in PHASES:
            code = run_until(killed_dir, f"{attempt}-{phase}", marker, chooser.uniform(0, most))
            assert code == -signal.SIGKILL, f"the run for {phase} ended ({code}) before it was killed"
            log = (killed_dir / "runs" / f"{attempt}-{phase}" / "distil.log").read_text().splitlines()
            print(phase, "killed after:", log[-1] if log else "-")  # shown if the test fails
        assert run_until(killed_dir, f"{attempt}-final") == 0
        resumed = json.loads((killed_dir / "runs" / f"{attempt}-final" / "metrics.json").read_text())
        assert comparable(resumed) == comparable(reference)


@pytest.mark.slow  # ~10 s: a benchmark command, run with make test-slow
def test_checkpoint_benchmark_writes_its_table(tmp_path):
    from distil.cli.bench import checkpoint as main

    main(["--quick", "--epochs", "1", "--out", str(tmp_path)])
    table = pd.read_csv(tmp_path / "bench_checkpoint.csv")
    assert list(table["checkpoint"]) == ["none", "every epoch", "every 60 s (default)"] * 2
    # every epoch: the one epoch and the step's end; throttled: the step's end only
    assert list(table["saves"]) == [0, 2, 1] * 2
    assert (tmp_path / "bench_checkpoint.md").read_text().startswith("# Checkpoint cost")


def test_checkpoint_key_changes_with_what_changes_training(smoke_cfg):
    from distil.run.plan import training_recipe
    from distil.training.checkpoint import training_key

    def key(cfg, *parts):
        return training_key(training_recipe(cfg), *parts)

    base = key(smoke_cfg(), "en")
    assert key(smoke_cfg(), "en") == base
    assert key(smoke_cfg("trainer.checkpoint_every_seconds=5"), "en") == base  # when to save: not what
    assert key(smoke_cfg("trainer.speed_examples=3"), "en") == base
    # prose is not training: a reworded description keeps an interrupted run's checkpoint
    assert key(smoke_cfg("student.description=reworded", "schedule.description=also"), "en") == base
    for changed in (key(smoke_cfg(), "de"), key(smoke_cfg("trainer.lr=0.5"), "en"),
                    key(smoke_cfg("seed=2"), "en"), key(smoke_cfg("schedule=d4.2"), "en"),
                    key(smoke_cfg("teacher.finetune.epochs=9"), "en")):
        assert changed != base


@pytest.mark.heavy
def test_unreadable_checkpoint_is_reported_and_training_starts_over(tmp_path, monkeypatch):
    reference, _ = distil_in_process(tmp_path, monkeypatch, "reference", "schedule=d1")
    count_dev_scores(monkeypatch, kill_at=3)
    with pytest.raises(Killed):
        distil_in_process(tmp_path, monkeypatch, "killed", "schedule=d1")
    [saved] = (tmp_path / "outputs" / "cache" / "checkpoints").glob("*/schedule.pt")
    saved.write_bytes(saved.read_bytes()[:100])  # as a disk that lost the file's end
    count_dev_scores(monkeypatch)
    rerun, log = distil_in_process(tmp_path, monkeypatch, "rerun", "schedule=d1")
    assert f"checkpoint {saved.relative_to(tmp_path)} is unreadable (RuntimeError): training the student " \
           f"from the start" in log
    assert comparable(rerun) == comparable(reference)


def test_checkpoint_lock_is_held_while_the_student_trains(tmp_path, monkeypatch):
    """A second run of the same command waits instead of writing the same checkpoint."""
    import fcntl

    held, score = [], StageTrainer.dev_score

    def try_the_lock(self):
        if not held:
            [lock] = (tmp_path / "outputs" / "cache" / "locks").glob("checkpoint-*.lock")
            with lock.open("a") as other:
                try:
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held.append(False)
                except BlockingIOError:
                    held.append(True)
        return score(self)

    monkeypatch.setattr(StageTrainer, "dev_score", try_the_lock)
    distil_in_process(tmp_path, monkeypatch, "run", "schedule=d1")
    assert held == [True]
