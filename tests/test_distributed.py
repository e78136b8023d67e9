"""One run on several processes: `torchrun --nproc_per_node=2 -m distil ...` on the CPU (gloo), as a user
runs it, against the same command on one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from distil.cli.run import PEER_STOPPED
from distil.store.artifacts import MANIFEST
from tests.test_teacher import INTERRUPTED_CACHE

SMOKE = ["debug=smoke", "teacher.shard_size=10"]  # several shards a split: both processes cache some


def distil(cwd: Path, *args: str, processes: int = 1, script: str | None = None) -> subprocess.CompletedProcess:
    """The command in `cwd`, on one process or under torchrun (a free port per call: tests run in parallel)."""
    if processes == 1:
        command = [sys.executable, "-m", "distil", *args]
    else:
        start = ["-c", script] if script else ["-m", "distil"]
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
                   *(["--no-python", sys.executable] if script else []), *start, *args]
    env = {k: v for k, v in os.environ.items() if k != "DISTIL_OUTPUTS"}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1")
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def run_dirs(cwd: Path) -> list[Path]:
    return sorted(p for p in (cwd / "outputs/runs").glob("*/*") if p.is_dir())


def targets_dir(cwd: Path) -> Path:
    (found,) = (cwd / "outputs/cache/targets").iterdir()
    return found


def shard_bytes(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.glob("*.safetensors"))}


@pytest.mark.heavy
def test_torchrun_fine_tunes_caches_and_distils_as_one_process_would(tmp_path):
    """Two processes (one torchrun launch, ~15 s: the two checks share it): the teacher fine-tuned on split
    batches, the cache built by both, a Transformer student; one run directory, one metrics.json, rank 0's
    log alone. Then one process, reusing that teacher, caches the same bytes and its student has the same
    first-epoch loss: nothing random between the two (no dropout of units or words), and a loss averaged
    over every row of a batch (soft: logit regression on the transfer set), so the two processes'
    gradients, weighted by their rows, are the batch's gradient."""
    args = [*SMOKE, "student=transformer-tiny", "student.dropout=0", "student.unk_dropout=0", "schedule=soft",
            "trainer.epochs=1"]
    two = distil(tmp_path, *args, processes=2)
    assert two.returncode == 0, two.stderr[-3000:]
    (run,) = run_dirs(tmp_path)
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["status"] == "ok" and not metrics["artifacts"]["teacher_reused"]
    assert two.stdout.count("metrics: ") == 1  # rank 0 alone prints the result
    assert sorted(p.name for p in run.iterdir()) == [".hydra", "distil.log", "metrics.json", "student"]
    teacher = next((tmp_path / "outputs/cache/teachers").iterdir())
    manifest = json.loads((teacher / MANIFEST).read_text())
    assert manifest["info"]["steps"] == metrics["teacher"]["finetune"]["steps"]
    assert not any(name.endswith(".pt") for name in manifest["files"])  # no checkpoint sealed into it
    assert not list((tmp_path / "outputs/cache/tmp").iterdir())  # no build directory, no claims left

    built = targets_dir(tmp_path)
    kept = tmp_path / "two-process-targets"
    shutil.move(built, kept)  # the one-process run reuses the teacher and caches again
    one = distil(tmp_path, *args)
    assert one.returncode == 0, one.stderr[-3000:]
    rebuilt = targets_dir(tmp_path)
    assert rebuilt.name == built.name
    assert shard_bytes(rebuilt) == shard_bytes(kept)
    files = [json.loads((p / MANIFEST).read_text())["files"] for p in (rebuilt, kept)]
    assert files[0] == files[1]
    first, second = (json.loads((run / "metrics.json").read_text()) for run in run_dirs(tmp_path))
    assert second["artifacts"]["teacher_reused"] and not second["artifacts"]["targets_reused"]
    losses = [m["student"]["stages"][0]["history"][1]["train_loss"] for m in (first, second)]
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)


@pytest.mark.slow  # three smoke runs, one of them on two processes: ~25 s (the one-process kill: test_teacher)
def test_a_worker_killed_mid_cache_is_resumed_by_the_next_run_byte_identical(tmp_path, monkeypatch):
    """kill -9 of one of two processes while it writes a shard (half of it on disk): torchrun stops the
    run, and the next run (one process) keeps every finished shard and ends with the bytes of an
    uninterrupted cache."""
    one = distil(tmp_path, *SMOKE)
    assert one.returncode == 0, one.stderr[-3000:]
    kept = tmp_path / "one-process-targets"
    shutil.move(targets_dir(tmp_path), kept)
    monkeypatch.setenv("KILL_ONLY_RANK", "1")  # half its second shard on disk, then kill -9
    killed = distil(tmp_path, "2", "mid", *SMOKE, processes=2, script=INTERRUPTED_CACHE)
    assert killed.returncode != 0
    assert not list((tmp_path / "outputs/cache/targets").iterdir())  # stopped before the cache was sealed
    build = next(p for p in (tmp_path / "outputs/cache/tmp").iterdir() if p.suffix != ".claims")
    assert list(build.glob("*.safetensors"))  # the shards finished before the kill, kept for the next run
    resumed = distil(tmp_path, *SMOKE)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert shard_bytes(targets_dir(tmp_path)) == shard_bytes(kept)


ONE_RANK_FAILS = """
import os, sys
from distil.errors import DistilError
from distil.run import pipeline
def failing(*args, **kwargs):
    raise DistilError("only rank 1 meets this")
if os.environ["RANK"] == "1":
    pipeline.run = failing
from distil.cli.main import main
sys.argv = ["distil", *sys.argv[1:]]
main()
"""


@pytest.mark.slow  # two processes (torchrun or workers) on a smoke run: ~20 s
def test_an_error_on_one_rank_is_told_by_that_rank_and_stops_the_run(tmp_path):
    """A bad-input error that one process alone meets (a file missing on one host): that process tells it,
    rank 0 (whose collective fails as the other leaves) says another process stopped and records it in
    metrics.json, rather than reporting the broken connection as a bug of its own or waiting for it."""
    done = distil(tmp_path, *SMOKE, processes=2, script=ONE_RANK_FAILS)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("distil: ")]
    assert lines == ["distil: error (rank 1): only rank 1 meets this", f"distil: error: {PEER_STOPPED}"]
    (run,) = run_dirs(tmp_path)
    assert json.loads((run / "metrics.json").read_text())["status"] == f"failed: {PEER_STOPPED}"


STOPPED_AFTER_EPOCH_2 = """
import os, sys
from distil.training.checkpoint import Checkpoint
saved = Checkpoint.save
def save_then_stop(checkpoint, state):
    saved(checkpoint, state)
    if state.get("epoch") == 2 and os.environ["RANK"] == "0":
        raise KeyboardInterrupt  # as Ctrl-C after the second epoch's checkpoint
Checkpoint.save = save_then_stop
from distil.cli.main import main
sys.argv = ["distil", *sys.argv[1:]]
main()
"""


@pytest.mark.slow  # three two-process runs
def test_fine_tuning_stopped_under_torchrun_resumes_to_the_uninterrupted_weights(tmp_path):
    """Stopped after its second epoch's checkpoint and run again, a two-process fine-tuning ends with the
    weights and history of one never stopped. Batches of 5 split 3 + 2, so the two ranks' dropout
    generators part: each must take up its own state, not rank 0's."""
    args = [*SMOKE, "schedule=d1", "teacher.finetune.batch_size=5", "teacher.finetune.epochs=3",
            "teacher.finetune.patience=3"]
    reference, resumed = tmp_path / "reference", tmp_path / "resumed"
    for path in (reference, resumed):
        path.mkdir()
    done = distil(reference, *args, processes=2)
    assert done.returncode == 0, done.stderr[-3000:]
    stopped = distil(resumed, *args, processes=2, script=STOPPED_AFTER_EPOCH_2)
    assert stopped.returncode != 0 and not list((resumed / "outputs/cache/teachers").glob("*/manifest.json"))
    again = distil(resumed, *args, processes=2)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resuming" in (run_dirs(resumed)[-1] / "distil.log").read_text()
    teachers = [next((path / "outputs/cache/teachers").iterdir()) for path in (reference, resumed)]
    infos = [json.loads((t / MANIFEST).read_text())["info"] for t in teachers]
    assert infos[1]["history"] == infos[0]["history"]
    assert (teachers[1] / "model.safetensors").read_bytes() == (teachers[0] / "model.safetensors").read_bytes()
