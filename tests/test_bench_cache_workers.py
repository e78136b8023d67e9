"""distil bench cache-workers: its arithmetic, its table and its checks from given numbers, its workers
started together, and one real build by two workers on the tiny teacher, byte-identical to one process's
(nothing here is timed)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from distil.bench import cache_workers as bench
from distil.cli.bench import cache_workers as cache_workers_command
from distil.errors import DistilError
from distil.store.artifacts import release_read_locks
from distil.teacher import cache as cache_module

A, B = bench.variants(2)
SHARDS = {f"transfer-{i:05d}.safetensors": f"{i}" * 64 for i in range(4)}


def worker(shards: int, examples: int, teacher_s: float, tokens: int | None = None) -> dict:
    return {"shards": shards, "examples": examples, "teacher_s": teacher_s, "setup_s": 3.0,
            "tokens": examples * 100 if tokens is None else tokens}


def builds(b_digests: dict[str, str] | None = None) -> list[bench.Build]:
    """Two rounds, in turn (A B, B A): A's worker 0.01 s an example, B's workers 0.015 s."""
    return [bench.Build(1, A, 40.0, [worker(4, 1000, 10.0)], SHARDS),
            bench.Build(1, B, 30.0, [worker(2, 600, 9.0), worker(2, 400, 6.0)], b_digests or SHARDS),
            bench.Build(2, B, 26.0, [worker(3, 700, 10.5), worker(1, 300, 4.5)], SHARDS),
            bench.Build(2, A, 44.0, [worker(4, 1000, 10.0)], SHARDS)]


def test_the_variants_are_one_worker_on_every_thread_against_workers_on_one_thread_each():
    assert (A.workers, A.threads, B.workers, B.threads) == (1, 2, 2, 1)
    assert A.label == "A: 1 worker x 2 threads" and B.label == "B: 2 workers x 1 thread"
    assert bench.variants(4)[1].label == "B: 4 workers x 1 thread"


def test_the_estimate_is_sentences_times_a_workers_seconds_per_example_over_k():
    rows = bench.estimate({1: 0.015, 2: 0.01}, sentences=7_200_000, workers=(1, 2, 64))
    assert [r["K workers"] for r in rows] == [1, 2, 64]
    assert [r["estimated h (1 thread each)"] for r in rows] == [30.0, 15.0, round(30 / 64, 2)]
    assert [r["estimated h (2 threads each)"] for r in rows] == [20.0, 10.0, round(20 / 64, 2)]
    assert [r["cores (2 threads each)"] for r in rows] == [2, 4, 128]  # every worker on cores of its own
    assert bench.measured_seconds_per_example(builds()) == {2: pytest.approx(0.01), 1: pytest.approx(0.015)}


def test_a_row_gives_each_workers_shards_and_its_teachers_seconds_per_shard_and_example():
    first, b = builds()[:2]
    assert bench.row(b, first) == {
        "round": 1, "variant": "B: 2 workers x 1 thread", "workers": 2, "threads per worker": 1, "wall s": 30.0,
        "shards per worker": "2 + 2", "examples per worker": "600 + 400", "setup s per worker": "3.0 + 3.0",
        "teacher s per worker": "9.0 + 6.0", "s per shard": 3.75, "ms per example": 15.0, "each shard once": "yes",
        "identical to first build": "yes", "shards sha256": bench.combined_digest(SHARDS)}


def test_the_table_gives_a_row_per_build_the_ratio_the_verdict_and_the_estimate(tmp_path):
    frame = bench.write(builds(), tmp_path / "tables", sentences=7_200_000)
    csv = pd.read_csv(tmp_path / "tables" / "bench-cache-workers.csv")
    assert list(csv.columns) == list(bench.COLUMNS) and len(frame) == 4
    assert csv[["round", "workers", "wall s"]].values.tolist() == [[1, 1, 40.0], [1, 2, 30.0], [2, 2, 26.0],
                                                                   [2, 1, 44.0]]
    md = (tmp_path / "tables" / "bench-cache-workers.md").read_text()
    # medians: A 42 s, B 28 s
    assert "B: 2 workers x 1 thread against A: 1 worker x 2 threads, timed in turn in one run: 0.67x the median " \
           "wall time (1.50x as fast)." in md
    assert "Correctness: every build's shard files are byte-identical" in md
    assert "An estimate, not a measurement: 7,200,000 x" in md and "shards split evenly" in md
    assert "average 100 tokens" in md
    estimate = md.split("### Estimate")[1]
    assert "|           1 |                       1 |                         30.00 |" in estimate


def test_shards_that_differ_or_a_shard_computed_twice_are_not_correct(tmp_path):
    assert bench.correct(builds())
    other = {**SHARDS, "transfer-00003.safetensors": "f" * 64}
    assert not bench.correct(builds(other))
    assert bench.row(builds(other)[1], builds()[0])["identical to first build"] == "no"
    twice = builds()
    twice[2].workers[1]["shards"] = 2  # 5 shards computed for 4 files
    assert not twice[2].once and not bench.correct(twice)
    bench.write(builds(other), tmp_path)
    assert "NOT every build's shard files are byte-identical" in (tmp_path / "bench-cache-workers.md").read_text()


def test_the_variants_take_turns_each_build_from_scratch(monkeypatch):
    order = []
    monkeypatch.setattr(bench, "ensure_teacher_of", lambda overrides: ("tiny-0123", "/cache/teachers/tiny-0123"))

    def fake_build(variant, round_, overrides, shard_size, teacher):
        order.append((round_, variant.name, tuple(overrides), shard_size, teacher[0]))
        return bench.Build(round_, variant, 1.0, [worker(1, 1, 1.0)] * variant.workers, SHARDS)

    monkeypatch.setattr(bench, "build", fake_build)
    measured = bench.compare(["debug=smoke"], 16, 2, rounds=3)
    assert [(r, v) for r, v, *_ in order] == [(1, "A"), (1, "B"), (2, "B"), (2, "A"), (3, "A"), (3, "B")]
    assert {o[2:] for o in order} == {(("debug=smoke",), 16, "tiny-0123")}  # one teacher, ensured once
    assert [(b.round, b.variant.name) for b in measured] == [(r, v) for r, v, *_ in order]


def test_workers_start_together_and_one_that_fails_stops_the_others(tmp_path):
    ok = [sys.executable, "-c", "pass"]
    assert bench.run_together([ok, ok], {}, [tmp_path / "0.log", tmp_path / "1.log"]) >= 0
    failing = [sys.executable, "-c", "import sys; print('worker 1: bad things', file=sys.stderr); sys.exit(3)"]
    waiting = [sys.executable, "-c", "import time; time.sleep(60)"]
    with pytest.raises(DistilError, match=r"worker 1 failed \(exit 3\): worker 1: bad things"):
        bench.run_together([waiting, failing], {}, [tmp_path / "0.log", tmp_path / "1.log"])


def test_a_worker_waits_for_the_others_to_be_ready(tmp_path):
    (tmp_path / "1").touch()
    bench.wait_ready(tmp_path, 0, 2, timeout=1)  # the other one is ready: no wait
    with pytest.raises(DistilError, match="worker 0: the other workers were not ready within 0 s"):
        bench.wait_ready(tmp_path, 0, 3, timeout=0.05)


def test_quick_is_one_smoke_round_of_small_shards_and_bytes_that_differ_exit_1(tmp_path, monkeypatch, capsys):
    seen = []
    monkeypatch.setattr(bench, "compare", lambda overrides, shard_size, workers, rounds: seen.append(
        (overrides, shard_size, workers, rounds)) or builds())
    assert cache_workers_command(["--quick", "--out", str(tmp_path / "tables"), "seed=2"]) == 0
    assert seen == [(["debug=smoke", "seed=2"], bench.QUICK_SHARD_SIZE, 2, 1)]
    assert "1.50x as fast" in capsys.readouterr().out
    assert not (tmp_path / "results").exists()  # conftest's DISTIL_RESULTS: a quick run is no measurement

    monkeypatch.setattr(bench, "compare", lambda *args: builds({**SHARDS, "transfer-00000.safetensors": "0" * 63}))
    assert cache_workers_command(["--out", str(tmp_path / "tables")]) == 1
    assert "shard files differ" in capsys.readouterr().err
    assert not (tmp_path / "results").exists()  # a failed check is not recorded
    assert (tmp_path / "tables" / "bench-cache-workers.md").is_file()  # but its table is written


@pytest.mark.slow  # two processes (torchrun or workers) on a smoke run: ~20 s
def test_two_real_workers_split_the_tiny_teachers_shards_into_one_processs_bytes(tmp_path, monkeypatch):
    """Two worker processes (1 thread each) build the smoke job's targets into one fresh store: both compute
    shards, each shard once, and the files are byte for byte those one worker alone writes (run here)."""
    overrides = ["debug=smoke", f"paths.outputs={tmp_path / 'outputs'}"]
    teacher = bench.ensure_teacher_of(overrides)
    together = bench.build(B, 1, overrides, 4, teacher)
    assert all(w["shards"] >= 1 and w["threads"] == 1 for w in together.workers), together.workers
    assert together.once and len(together.digests) >= 10

    monkeypatch.setattr(cache_module, "compute_shard", cache_module.compute_shard)  # the worker wraps it: undone
    threads = torch.get_num_threads()
    (tmp_path / "ready").mkdir()
    try:
        alone = bench.work({"index": 0, "workers": 1, "threads": 1, "overrides": overrides, "shard_size": 4,
                            "store": str(tmp_path / "alone"), "ready": str(tmp_path / "ready"),
                            "teacher_key": teacher[0], "teacher_path": teacher[1]})
    finally:
        torch.set_num_threads(threads)
        release_read_locks()
    assert alone["shards"] == len(together.digests) == together.total("shards")
    assert bench.shard_digests(Path(alone["targets"])) == together.digests


@pytest.mark.slow
def test_quick_runs_the_real_workers_end_to_end(tmp_path, monkeypatch, capsys):
    """`--quick`: one smoke round, A then B, real worker processes; every build's bytes the same."""
    monkeypatch.chdir(tmp_path)
    assert cache_workers_command(["--quick", "--out", str(tmp_path / "tables"),
                                  f"paths.outputs={tmp_path / 'outputs'}"]) == 0
    rows = pd.read_csv(tmp_path / "tables" / "bench-cache-workers.csv").to_dict("records")
    assert [r["workers"] for r in rows] == [1, 2]
    assert all(r["identical to first build"] == "yes" and r["each shard once"] == "yes" for r in rows)
    assert "as fast" in capsys.readouterr().out
