"""Content-addressed artifacts: reuse, new keys on new bytes, damage detection, no partials."""

import pytest

from distil.errors import DistilError
from distil.store.artifacts import ArtifactStore, release_read_locks


def writer(calls):
    def build(out):
        calls.append(out)
        (out / "data.bin").write_bytes(b"payload")
        return {"size": 7}
    return build


def test_built_once_then_reused(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    first = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    second = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    assert len(calls) == 1 and not first.reused and second.reused
    assert first.path == second.path and second.info == {"size": 7}


def test_a_different_spec_is_a_different_key(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    a = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    b = store.get_or_build("things", "x", {"seed": 2}, writer(calls))
    assert a.key != b.key and len(calls) == 2


def test_damaged_artifact_is_rebuilt(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    art = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    (art.path / "data.bin").write_bytes(b"tampere")
    assert store.verify(art.path) == "checksum mismatch in data.bin"
    (art.path / "data.bin").write_bytes(b"tamp")
    assert store.verify(art.path) == "data.bin is truncated (4 of 7 bytes)"
    again = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    assert not again.reused and len(calls) == 2
    assert (again.path / "data.bin").read_bytes() == b"payload"


def test_interrupted_build_is_no_artifact_and_the_next_build_resumes_it(tmp_path):
    store = ArtifactStore(tmp_path)

    def broken(out):
        (out / "half.bin").write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        store.get_or_build("things", "x", {"seed": 1}, broken)
    assert not (tmp_path / "things").exists()  # nothing a run could mistake for a finished artifact
    seen = []

    def resume(out):
        seen.append(sorted(p.name for p in out.iterdir()))
        (out / "rest.bin").write_bytes(b"rest")
        return {}

    art = store.get_or_build("things", "x", {"seed": 1}, resume)
    assert seen == [["half.bin"]] and sorted(p.name for p in art.path.iterdir()) == [
        "half.bin", "manifest.json", "rest.bin"]


def test_bad_input_during_a_build_leaves_nothing_behind(tmp_path):
    store = ArtifactStore(tmp_path)

    def broken(out):
        (out / "half.bin").write_bytes(b"half")
        raise DistilError("teacher diverged")

    with pytest.raises(DistilError):
        store.get_or_build("things", "x", {"seed": 1}, broken)
    assert [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".lock"] == []


def test_a_second_process_waits_for_the_build_and_reuses_it(tmp_path, caplog):
    """Two runs on an empty cache: one builds, the other waits on the lock and reuses."""
    import logging
    import multiprocessing

    caplog.set_level(logging.INFO, logger="distil.store.artifacts")

    context = multiprocessing.get_context("fork")
    started = context.Event()

    def slow_build(out):
        started.set()
        import time
        time.sleep(1.0)
        (out / "data.bin").write_bytes(b"payload")
        return {"by": "first"}

    first = context.Process(target=lambda: ArtifactStore(tmp_path).get_or_build("things", "x", {"s": 1}, slow_build))
    first.start()
    assert started.wait(30)
    second = ArtifactStore(tmp_path).get_or_build("things", "x", {"s": 1}, lambda out: pytest.fail("built twice"))
    first.join(30)
    assert first.exitcode == 0 and second.reused and second.info == {"by": "first"}
    assert f"waiting for another run (process {first.pid}) to build {second.key}" in caplog.text


def test_a_run_holds_a_read_lock_on_what_it_uses(tmp_path):
    """While a run uses an artifact, another process cannot take its exclusive lock (so
    `distil cache prune` keeps it); the lock goes with the run."""
    import subprocess
    import sys

    probe = ("import fcntl, sys; f = open(sys.argv[1], 'a')\n"
             "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
             "except BlockingIOError:\n    print('held')")

    def state(key):
        lock = tmp_path / "locks" / f"{key}.lock"
        return subprocess.run([sys.executable, "-c", probe, str(lock)], capture_output=True, text=True).stdout.strip()

    store = ArtifactStore(tmp_path)
    art = store.get_or_build("things", "x", {"seed": 1}, writer([]))
    assert state(art.key) == "held"
    release_read_locks()
    assert state(art.key) == "free"
    reader = ArtifactStore(tmp_path)
    assert reader.get_or_build("things", "x", {"seed": 1}, writer([])).reused
    assert state(art.key) == "held"


def dead_pid() -> int:
    import subprocess
    import sys

    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid  # reaped: no process has it (pids are not reused this quickly)


def test_a_run_removes_build_directories_nobody_can_resume(tmp_path, caplog):
    """Killed builds stay when the next build of their key resumes them; what no build would
    ever read again goes: an old-style `<key>.<pid>` directory of a dead process, and the
    build directory of a key whose artifact is complete."""
    import fcntl
    import logging
    import os

    store = ArtifactStore(tmp_path)
    done = store.get_or_build("things", "x", {"seed": 1}, writer([]))
    release_read_locks()
    tmp = tmp_path / "tmp"
    names = {"superseded": done.key, "resumable": "x-1111111111111111", "building": "x-2222222222222222",
             "dead": f"x-3333333333333333.{dead_pid()}", "alive": f"x-4444444444444444.{os.getpid()}",
             "not ours": "notes"}
    for name in names.values():
        (tmp / name).mkdir(parents=True)
        (tmp / name / "finetune-checkpoint.pt").write_bytes(b"state")
    (tmp_path / "things" / "x-2222222222222222").mkdir()  # a damaged artifact another run is rebuilding
    held = (tmp_path / "locks" / "x-2222222222222222.lock").open("a")
    fcntl.flock(held, fcntl.LOCK_EX)
    with caplog.at_level(logging.INFO, logger="distil.store.artifacts"):
        store.remove_stale_builds()
    held.close()
    assert sorted(p.name for p in tmp.iterdir()) == sorted([names["resumable"], names["building"], names["alive"],
                                                            names["not ours"]])
    assert [r.getMessage() for r in caplog.records] == [
        f"removed stale build directory {tmp / names['dead']}: its run (process {names['dead'].split('.')[1]}) "
        f"is gone and this version cannot resume it",
        f"removed stale build directory {tmp / names['superseded']}: things/{done.key} is complete",
    ]


def test_an_artifact_pruned_while_a_run_waits_for_its_read_lock_is_built_again(tmp_path, monkeypatch):
    """`distil cache prune` holds the exclusive lock while it deletes: a run that found the
    artifact intact just before waits for its read lock, then finds it gone, and builds it."""
    import shutil

    store = ArtifactStore(tmp_path)
    first = store.get_or_build("things", "x", {"seed": 1}, writer([]))
    release_read_locks()
    hold_shared = ArtifactStore._hold_shared

    pruned = []

    def pruned_meanwhile(self, key):
        if not pruned:  # what the prune did while we waited, once
            shutil.rmtree(tmp_path / "things" / key)
            pruned.append(key)
        hold_shared(self, key)

    monkeypatch.setattr(ArtifactStore, "_hold_shared", pruned_meanwhile)
    calls = []
    again = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    assert (again.key, again.reused, len(calls)) == (first.key, False, 1)
    assert ArtifactStore.verify(again.path) is None
    release_read_locks()
