"""Independent processes building one cache of teacher targets together (the same outputs/ on one host or a
shared file system): each shard is computed once, by whichever process claims it, and the cache ends with
the bytes one process alone would write."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import distil.teacher.cache as cache_module
from distil.store.artifacts import release_read_locks
from distil.teacher import ensure_targets, ensure_teacher, load_finetuned
from tests.test_teacher import setup, shard_bytes

# holds an exclusive flock on argv[1] until it exits (after argv[2] seconds): another process's build or claim
HOLDER = """
import fcntl, pathlib, sys, time
path = pathlib.Path(sys.argv[1]); path.parent.mkdir(parents=True, exist_ok=True)
handle = path.open("a"); fcntl.flock(handle, fcntl.LOCK_EX); print("held", flush=True); time.sleep(float(sys.argv[2]))
"""


@pytest.fixture
def rebuild(smoke_cfg, monkeypatch):
    """(store, the reference targets' key and bytes, a function that builds them again counting each shard
    the teacher computes)."""
    cfg = smoke_cfg("teacher.shard_size=10")
    task, data, prepared, store = setup(cfg)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, hub_offline=True)

    def build():
        return ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1,
                              lambda: load_finetuned(teacher.path, task))

    reference = build()
    expected = shard_bytes(reference)
    shutil.rmtree(reference.path)
    release_read_locks()  # this process's read lock on the key would keep the holder below from building
    computed = []
    original = cache_module.compute_shard

    def counting(model, task_, split, rows, *args, **kwargs):
        computed.append((split.name, int(rows[0])))
        return original(model, task_, split, rows, *args, **kwargs)

    monkeypatch.setattr(cache_module, "compute_shard", counting)
    return store, reference.key, expected, build, computed


def hold(path, seconds: float) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), str(seconds)], stdout=subprocess.PIPE,
                              text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


@pytest.mark.heavy
def test_a_run_that_waits_for_the_build_computes_shards_for_it(rebuild, caplog):
    """Another process holds the build lock: this one helps (computes the free shards), then waits for the
    lock; the build then finds every shard there and runs the teacher on none again."""
    store, key, expected, build, computed = rebuild
    holder = hold(store.root / "locks" / f"{key}.lock", 5)
    try:
        with caplog.at_level("INFO"):
            rebuilt = build()
    finally:
        holder.wait()
    assert any("helping with it" in r.getMessage() for r in caplog.records)
    assert len(computed) == len(set(computed)) == len(expected)  # every shard once
    assert shard_bytes(rebuilt) == expected


def test_the_builder_waits_for_a_shard_another_process_holds_and_computes_it_if_that_one_dies(rebuild):
    """A claim on one shard held by a process that exits without writing it (killed): the builder computes
    the others, waits for that claim, then computes the shard itself. No claim is left behind."""
    store, key, expected, build, computed = rebuild
    held = cache_module.shard_name("transfer", 1)
    claims = store.build_dir(key).with_name(f"{key}.claims")
    holder = hold(claims / f"{held}.lock", 2)
    try:
        rebuilt = build()
    finally:
        holder.wait()
    assert computed[-1] == ("transfer", 10)  # the held shard, after every free one
    assert len(computed) == len(set(computed)) == len(expected)
    assert shard_bytes(rebuilt) == expected
    assert not claims.exists()
