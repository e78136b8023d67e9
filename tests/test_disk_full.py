"""A full disk at any point: one line naming the problem and the fix, exit 2, a failed metrics.json, and nothing
left behind that keeps the disk full (no empty metrics.json.tmp, no partial checkpoint, no empty build dir).

One run on a real small disk (a tmpfs, where mounting is allowed), and the same class with ENOSPC simulated
in each writer, so it is covered where mounting is not."""

import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from distil.cli import run as cli_run
from distil.common.atomic import write_atomic
from distil.common.diskspace import disk_full, disk_full_message
from distil.teacher.load import teacher_config
from distil.training import checkpoint as checkpoint_module
from distil.training.checkpoint import Checkpoint
from tests.test_cli import distil_in_process

FIX = ("; free space there (distil cache prune --stale removes what failed builds left), or put the outputs on a "
       "larger disk: DISTIL_OUTPUTS=/path/with/room distil ...")


def enospc(path: Path | str | None = None) -> OSError:
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), *([str(path)] if path is not None else []))


def leftovers(root: Path) -> list[str]:
    """What a failed write leaves that nobody reads: temporary and partial files, empty build directories."""
    files = [p for p in root.rglob("*") if p.name.endswith((".tmp", ".partial", ".reserve"))]
    empty_builds = [p for p in (root / "cache" / "tmp").glob("*") if p.is_dir() and not any(p.iterdir())]
    return sorted(str(p.relative_to(root)) for p in files + empty_builds)


# ----------------------------------------------------------------------------- a real full disk


@pytest.fixture
def small_disk(tmp_path):
    """A 540 KiB tmpfs: it holds a smoke run's directory, not its teacher's fine-tuning checkpoint."""
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=540k", "tmpfs", str(mount)],
                                 capture_output=True, text=True)
    except OSError as error:  # no mount command at all
        pytest.skip(f"cannot mount a tmpfs here ({error})")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({mounted.stderr.strip() or 'mount failed'})")
    try:
        yield mount
    finally:
        release_files_under(mount)
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)  # detached now, freed when closed


def release_files_under(mount: Path) -> None:
    """What an in-process run keeps open on its disk: the cache's read locks and Hydra's log file."""
    import logging

    from distil.store.artifacts import release_read_locks

    release_read_locks()
    for handler in list(logging.getLogger().handlers):
        if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).is_relative_to(mount):
            handler.close()
            logging.getLogger().removeHandler(handler)


def test_a_run_that_fills_its_disk_is_one_line_and_a_failed_metrics_json(small_disk, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("DISTIL_OUTPUTS", str(small_disk))
    code, _, err = distil_in_process(["debug=smoke"], tmp_path, monkeypatch, capsys)
    (lock,) = (small_disk / "cache" / "locks").glob("tiny-*.lock")
    checkpoint = small_disk / "cache" / "tmp" / lock.stem / "finetune-checkpoint.pt"
    assert code == 2, err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"distil: error: the disk is full writing {checkpoint}{FIX}"
    (metrics,) = (small_disk / "runs").rglob("metrics.json")
    assert json.loads(metrics.read_text())["status"] == f"failed: the disk is full writing {checkpoint}{FIX}"
    assert leftovers(small_disk) == []


# ----------------------------------------------------------------------------- simulated: each writer


def test_disk_full_is_recognised_however_a_writer_reports_it():
    torch_error = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    torch_error.__context__ = enospc()
    assert disk_full(enospc("model.safetensors"))
    assert disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert disk_full(torch_error)  # torch.save through a Python file: the OSError is its context
    assert disk_full(Exception("Error while serializing: I/O error: No space left on device (os error 28)"))
    assert not disk_full(PermissionError(errno.EACCES, "Permission denied", "x"))
    assert not disk_full(RuntimeError("unexpected pos 704 vs 598"))


def test_the_message_names_the_file_being_written(tmp_path):
    assert disk_full_message(enospc(tmp_path / "a.pt")) == f"the disk is full writing {tmp_path / 'a.pt'}{FIX}"
    assert disk_full_message(enospc(), tmp_path) == f"the disk is full writing {tmp_path}{FIX}"


def test_an_atomic_write_on_a_full_disk_keeps_the_old_file_and_leaves_no_tmp(tmp_path, monkeypatch):
    path = tmp_path / "metrics.json"
    path.write_text("old")

    def write_nothing(self, text, *args, **kwargs):
        Path.touch(self)  # the file is created, then the disk has no room for its bytes
        raise enospc(self)

    monkeypatch.setattr(Path, "write_text", write_nothing)
    with pytest.raises(OSError):
        write_atomic(path, "new")
    monkeypatch.undo()
    assert path.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_a_failed_metrics_json_falls_back_to_the_reserve_then_to_its_status_alone(tmp_path, monkeypatch):
    cli_run.reserve_space(tmp_path)
    assert (tmp_path / cli_run.RESERVE).stat().st_size == cli_run.RESERVE_BYTES
    attempts = []

    def full(path, payload):
        attempts.append(path.parent / cli_run.RESERVE)
        raise enospc(path)

    monkeypatch.setattr(cli_run, "write_json_atomic", full)
    cli_run.write_failed_metrics(tmp_path, {"status": "failed: x", "choices": {"seed": 1}, "overrides": ["a=b"]})
    assert len(attempts) == 2 and not (tmp_path / cli_run.RESERVE).exists()  # the reserve went before the 2nd
    assert json.loads((tmp_path / "metrics.json").read_text()) == {"status": "failed: x"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metrics.json"]


def test_a_failed_metrics_json_is_whole_when_the_reserve_makes_room(tmp_path, monkeypatch):
    cli_run.reserve_space(tmp_path)
    real = cli_run.write_json_atomic

    def full_while_reserved(path, payload):
        if (path.parent / cli_run.RESERVE).exists():
            raise enospc(path)
        real(path, payload)

    monkeypatch.setattr(cli_run, "write_json_atomic", full_while_reserved)
    payload = {"status": "failed: x", "choices": {"seed": 1}, "overrides": ["a=b"]}
    cli_run.write_failed_metrics(tmp_path, payload)
    assert json.loads((tmp_path / "metrics.json").read_text()) == payload


def test_a_disk_full_during_a_run_is_one_line_exit_2_and_a_failed_metrics_json(tmp_path, monkeypatch, capsys):
    from distil.run import pipeline

    target = tmp_path / "outputs" / "cache" / "targets" / "x.safetensors"

    def fill_the_disk(*args, **kwargs):
        raise RuntimeError("Error while serializing") from enospc(target)

    monkeypatch.setattr(pipeline, "run", fill_the_disk)
    code, _, err = distil_in_process(["debug=smoke"], tmp_path, monkeypatch, capsys)
    expected = f"the disk is full writing {target}{FIX}"
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"distil: error: {expected}"
    (metrics,) = (tmp_path / "outputs").rglob("metrics.json")
    assert json.loads(metrics.read_text())["status"] == f"failed: {expected}"
    assert not list((tmp_path / "outputs").rglob("*.reserve"))  # the reserved space goes with the run


def save_that_fills_the_disk(obj, handle):
    handle.write(b"half a checkpoint")
    handle.flush()
    raise RuntimeError("unexpected pos 704 vs 598") from enospc()


def test_a_checkpoint_that_does_not_fit_leaves_no_partial_file_and_names_itself(tmp_path, monkeypatch):
    checkpoint = Checkpoint(tmp_path / "finetune-checkpoint.pt")
    checkpoint.save({"step": 1})
    monkeypatch.setattr(checkpoint_module.torch, "save", save_that_fills_the_disk)
    with pytest.raises(OSError) as raised:
        checkpoint.save({"step": 2})
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(checkpoint.path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["finetune-checkpoint.pt"]  # the old one, whole
    monkeypatch.undo()
    assert checkpoint.load() == {"step": 1}


def test_a_checkpoint_replaces_its_predecessor_when_the_disk_has_no_room_for_both(tmp_path, monkeypatch):
    checkpoint = Checkpoint(tmp_path / "schedule.pt")
    checkpoint.save({"weights": torch.zeros(1000)})
    real_save, seen = torch.save, []

    def save(obj, handle):
        seen.append(sorted(p.name for p in tmp_path.iterdir()))
        real_save(obj, handle)

    monkeypatch.setattr(checkpoint_module.torch, "save", save)
    monkeypatch.setattr(checkpoint_module, "free_bytes", lambda path: 4096)  # less than a second checkpoint
    checkpoint.save({"weights": torch.ones(1000)})
    monkeypatch.setattr(checkpoint_module, "free_bytes", lambda path: 1 << 40)  # room for both
    checkpoint.save({"weights": torch.full((1000,), 2.0)})
    assert seen == [["schedule.pt.partial"], ["schedule.pt", "schedule.pt.partial"]]
    assert checkpoint.load()["weights"][0] == 2.0


# ----------------------------------------------------------------------------- the cache after a failed build


def cache_cli(root: Path, capsys, *args) -> tuple[int, str]:
    from distil.cli.cache import main

    code = main([*args, "--cache-dir", str(root)])
    return code, capsys.readouterr().out


def test_a_build_that_failed_before_saving_anything_leaves_no_build_dir(tmp_path):
    from distil.store.artifacts import ArtifactStore

    store = ArtifactStore(tmp_path)

    def fill_the_disk(out):
        raise enospc(out / "finetune-checkpoint.pt")

    with pytest.raises(OSError):
        store.get_or_build("teachers", "tiny", {"a": 1}, fill_the_disk)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_list_tells_empty_and_unreadable_entries_from_artifacts(tmp_path, capsys):
    hint = "(the next run that needs it rebuilds it; or: distil cache prune --damaged)"
    (tmp_path / "teachers" / "tiny-0123456789abcdef").mkdir(parents=True)
    unreadable = tmp_path / "teachers" / "tiny-fedcba9876543210"
    unreadable.mkdir()
    (unreadable / "manifest.json").write_text("{not json")
    (tmp_path / "tmp" / "tiny-1111111111111111").mkdir(parents=True)  # a build that failed before saving
    code, out = cache_cli(tmp_path, capsys, "list")
    assert code == 0
    assert ("DAMAGED: empty directory, nothing cached (the next run that needs it rebuilds it; or: distil cache "
            "prune --damaged)") in out.splitlines()[1]
    assert f"DAMAGED: unreadable manifest.json {hint}" in out.splitlines()[2]
    assert "stale: empty, a failed build saved nothing; the next run removes it, or prune --stale" in out
    listing = json.loads(cache_cli(tmp_path, capsys, "list", "--json")[1])
    assert [row["status"] for row in listing["artifacts"]] == ["damaged", "damaged"]
    assert [build["resumable"] for build in listing["builds"]] == [False]


def test_prune_stale_removes_what_failed_runs_left(tmp_path, capsys):
    (tmp_path / "tmp" / "tiny-1111111111111111").mkdir(parents=True)  # empty: failed before saving
    (tmp_path / "checkpoints" / "0123456789abcdef").mkdir(parents=True)  # a failed student's checkpoint
    (tmp_path / "checkpoints" / "0123456789abcdef" / "schedule.pt").write_bytes(b"x" * 10)
    kept = tmp_path / "teachers" / "tiny-2222222222222222"
    kept.mkdir(parents=True)
    (kept / "manifest.json").write_text(json.dumps({"files": {}}))
    (tmp_path / "locks").mkdir()
    for key in ("tiny-1111111111111111", "tiny-2222222222222222", "tiny-3333333333333333",
                "checkpoint-0123456789abcdef"):
        (tmp_path / "locks" / f"{key}.lock").touch()
    code, out = cache_cli(tmp_path, capsys, "prune", "--stale", "--dry-run")
    assert code == 0 and len(list((tmp_path / "locks").iterdir())) == 4  # a dry run removes nothing
    code, out = cache_cli(tmp_path, capsys, "prune", "--stale")
    assert code == 0
    assert out.splitlines()[:3] == [
        "deleted tmp/tiny-1111111111111111  0B  (stale build, last written just now)",
        "deleted checkpoints/0123456789abcdef  10B  (stale checkpoint, last written just now)",
        f"removed 3 unused lock file(s) in {tmp_path / 'locks'}",
    ]
    assert sorted(p.name for p in (tmp_path / "locks").iterdir()) == ["tiny-2222222222222222.lock"]
    assert not (tmp_path / "tmp" / "tiny-1111111111111111").exists()
    assert not (tmp_path / "checkpoints" / "0123456789abcdef").exists()


def test_a_lock_pruned_while_a_run_waited_on_it_is_taken_anew(tmp_path):
    """A run that opened a lock file just before prune removed it locks the file now there, not the old one."""
    from distil.store import artifacts
    from distil.store.artifacts import ArtifactStore

    store = ArtifactStore(tmp_path)
    (tmp_path / "locks").mkdir()
    path = tmp_path / "locks" / "tiny-1111111111111111.lock"
    path.touch()
    real_flock, pruned = artifacts.fcntl.flock, []

    def flock_after_prune(handle, operation):
        if not pruned:  # the prune's unlink lands between our open and our lock
            pruned.append(path.unlink())
        return real_flock(handle, operation)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(artifacts.fcntl, "flock", flock_after_prune)
        with store.lock("tiny-1111111111111111"):
            assert path.read_text() == str(os.getpid())  # the file now at the path holds our pid
    assert pruned == [None]


# ----------------------------------------------------------------------------- the preflight estimate


def test_a_run_short_of_space_is_warned_before_the_work(smoke_cfg, monkeypatch, caplog):
    from distil.run import diskspace
    from distil.run.pipeline import prepare_data
    from distil.run.plan import plan_run
    from distil.store.artifacts import ArtifactStore
    from distil.teacher.finetune import teacher_spec

    cfg = smoke_cfg()
    plan = plan_run(cfg)
    store = ArtifactStore(cfg.paths.cache)
    data, prepared = prepare_data(cfg, plan.task, store)
    need = diskspace.bytes_needed(cfg.teacher, plan, data, prepared, store, cfg.seed)
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: 500 * 1024)
    warnings = diskspace.space_warnings(cfg.teacher, plan, data, prepared, store, cfg.seed)
    assert warnings == [f"the disk holding {store.root} has 500K free, and this run needs about "
                        f"{diskspace.human_bytes(need)} (the teacher's fine-tuning checkpoint, its cached targets, "
                        f"the student): it may fail when the disk fills; free space, or put the outputs on a larger "
                        f"disk with DISTIL_OUTPUTS"]
    assert caplog.messages.count(warnings[0]) == 1
    monkeypatch.setattr(diskspace, "free_bytes", lambda path: need)
    assert diskspace.space_warnings(cfg.teacher, plan, data, prepared, store, cfg.seed) == []
    # a teacher already in the cache is not fine-tuned again: only its targets and the slack remain
    teacher = store.root / "teachers" / store.key(cfg.teacher.name, teacher_spec(cfg.teacher, data, cfg.seed))
    teacher.mkdir(parents=True)
    (teacher / "manifest.json").write_text("{}")
    targets = diskspace.target_bytes(teacher_config(cfg.teacher), plan, data, prepared)
    assert diskspace.bytes_needed(cfg.teacher, plan, data, prepared, store, cfg.seed) == targets + diskspace.SLACK


def test_a_subcommand_that_fills_the_disk_is_one_line(tmp_path, monkeypatch, capsys):
    from distil.cli import report

    def fill_the_disk(args, prog):
        raise enospc(tmp_path / "table.md")

    monkeypatch.setattr(report, "main", fill_the_disk)
    code, _, err = distil_in_process(["report", str(tmp_path)], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip() == f"distil report: error: the disk is full writing {tmp_path / 'table.md'}{FIX}"


def test_a_distil_alias_that_fills_the_disk_is_one_line_too(tmp_path, monkeypatch, capsys):
    """The `distil-*` console scripts skip the dispatcher: they share its disk-full ending."""
    from distil.cli import report

    def fill_the_disk(args, prog):
        raise enospc(tmp_path / "table.md")

    monkeypatch.setattr(report, "main", fill_the_disk)
    monkeypatch.setattr(sys, "argv", ["distil-report", str(tmp_path)])
    with pytest.raises(SystemExit) as exited:
        report.alias()
    assert exited.value.code == 2
    assert capsys.readouterr().err.strip() == (f"distil-report: error: the disk is full writing "
                                               f"{tmp_path / 'table.md'}{FIX}")
