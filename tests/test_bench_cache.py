"""distil-bench-cache on tiny inputs: each measurement's figures, identical sharded/in-memory losses,
the sweep's teacher count, and the table. No timing assertions: only presence, sign and structure."""

from __future__ import annotations

import gzip
import math

import pandas as pd
import pytest

from distil.bench import cache as bench_cache
from distil.cli import bench as bench_command
from distil.common.libraries import quiet_libraries
from distil.tasks import get_task

TEXTS = [
    "a gripping , funny and moving film",
    "dull",
    "the plot never quite comes together , and the jokes land with a thud",
    "one of the year 's best",
    "it 's a charming and often affecting journey",
    "too long by half",
    "an ambitious , unwieldy mess that still somehow manages to entertain its audience",
    "worth seeing",
]


def texts(count: int) -> list[str]:
    return [f"{TEXTS[i % len(TEXTS)]} {'really ' * (i % 5)}".strip() for i in range(count)]


@pytest.fixture(scope="module")
def teacher():
    quiet_libraries()
    task = get_task("classification")
    model, tokenizer, cfg = bench_cache.load_teacher("tiny", task, ["0", "1"])
    return task, model, tokenizer, cfg


def test_caching_throughput_times_three_variants_that_agree(teacher, tmp_path):
    task, model, tokenizer, cfg = teacher
    split = bench_cache.text_split(task, tokenizer, texts(40), cfg.max_length)
    result = bench_cache.caching_throughput(model, tokenizer, task, split, batch_size=8, max_length=cfg.max_length,
                                            layer=-1, shard_size=16, repeats=2, workdir=tmp_path)
    assert set(result["ex_per_s"]) == {"sorted", "fixed", "unsorted"}
    assert all(len(times) == 2 for times in result["seconds"].values())
    assert all(rate > 0 for rate in result["ex_per_s"].values())
    assert result["vs_fixed"] == pytest.approx(result["ex_per_s"]["sorted"] / result["ex_per_s"]["fixed"])
    assert result["examples"] == 40 and result["max_tokens"] <= cfg.max_length
    assert result["max_logit_difference"] < 1e-2  # the same teacher outputs, whatever the batching
    assert not list(tmp_path.iterdir())  # the variants' shards are cleaned up


def test_training_from_shards_and_from_memory_gives_identical_losses(teacher, tmp_path):
    task, model, tokenizer, cfg = teacher
    import torch

    labeled = bench_cache.text_split(task, tokenizer, texts(16), cfg.max_length, name="labeled")
    labeled.labels = torch.arange(16) % 2
    transfer = bench_cache.text_split(task, tokenizer, texts(40)[::-1], cfg.max_length)
    run_cfg = bench_cache.compose("debug=smoke", "schedule=d1")
    setup = bench_cache.TrainingSetup(run_cfg.student, run_cfg.trainer, run_cfg.schedule.stages[0], ["0", "1"])
    result = bench_cache.training_from_cache(model, tokenizer, task, {"labeled": labeled, "transfer": transfer},
                                             setup, layer=-1, eval_batch_size=8, shard_size=16, batches=4,
                                             repeats=2, workdir=tmp_path)
    assert result["identical_losses"]
    assert result["examples"] == 56 and result["batches"] == 4 and result["cached_hidden"]
    assert len(result["losses"]) == 4 and all(math.isfinite(v) and v > 0 for v in result["losses"])
    assert len(set(result["losses"])) > 1  # a real trajectory, not one value repeated
    assert all(len(times) == 2 for times in result["seconds"].values())
    assert result["ratio"] > 0


@pytest.mark.slow  # ~14 s of fresh processes: a benchmark command, run with make test-slow
def test_memory_phases_run_in_fresh_processes(tmp_path):
    corpus = tmp_path / "sentences.txt.gz"
    with gzip.open(corpus, "wt") as handle:
        handle.write("\n".join(f"{TEXTS[i % len(TEXTS)]} number {i}" for i in range(30)) + "\n\n")
    result = bench_cache.big_transfer_memory(tmp_path / "work", corpus=corpus, sentences=12, width=32, layers=1,
                                             teacher="tiny", threads=1)
    cache, train = result["cache"], result["train"]
    assert cache["examples"] == train["examples"] == 12
    assert cache["disk_bytes"] > cache["words"] * 32 * 2  # fp16 hidden at every word's first wordpiece, at least
    for phase in (cache, train):
        assert phase["peak_rss_bytes"] >= phase["rss_before_phase_bytes"] > 0
    assert train["batches"] == train["epoch_batches"] == 1 and math.isfinite(train["last_loss"])


@pytest.mark.slow  # ~10 s: a benchmark command, run with make test-slow
def test_sweep_counts_the_cells_that_ran_the_teacher(tmp_path):
    result = bench_cache.sweep_teacher_runs(tmp_path, schedules=("hard", "soft"))
    assert result["cells"] == 2
    assert result["ran_by_metrics"] == 1 and result["ran_by_log"] == 1


def fabricated(vs_fixed=4.0, identical=True, peak=1.0):
    return {
        "caching": {"examples": 64, "mean_tokens": 12.0, "batch_size": 64, "repeats": 3, "vs_fixed": vs_fixed,
                    "vs_unsorted": 1.5, "max_logit_difference": 1e-4,
                    "ex_per_s": {"sorted": 400.0, "fixed": 400.0 / vs_fixed, "unsorted": 400 / 1.5},
                    "seconds": {"sorted": [1.0], "fixed": [4.0], "unsorted": [1.5]}},
        "training": {"examples": 100, "batches": 10, "batch_size": 64, "repeats": 3, "ratio": 1.05,
                     "identical_losses": identical, "vocab": 50, "median_seconds": {"sharded": 1.05, "memory": 1.0},
                     "seconds": {"sharded": [1.05], "memory": [1.0]}},
        "memory": {"sentences": 100, "width": 768, "layers": 1,
                   "cache": {"disk_bytes": 3 * 2**30, "files": 3, "words": 2000, "seconds": 10,
                             "peak_rss_bytes": int(peak * 2**30), "rss_before_phase_bytes": 2**28},
                   "train": {"peak_rss_bytes": int(2.5 * 2**30), "rss_before_phase_bytes": 2**28, "batches": 4,
                             "epoch_batches": 4, "batch_size": 32, "seconds": 5}},
        "sweep": {"cells": 6, "ran_by_metrics": 1, "ran_by_log": 1, "reusing_cells_by_log": 5, "seconds": 30,
                  "command": "distil -m debug=smoke"},
    }


def test_checks_judge_every_target():
    checks = {c.check: c for c in bench_cache.build_checks(fabricated(vs_fixed=3.4))}
    assert len(checks) == 7
    verdicts = [c.met for c in checks.values()]
    assert verdicts.count("-") == 1  # the disk size is reported, not judged
    assert {name.split(":")[0] for name, c in checks.items() if c.met == "not met"} == {
        "teacher caching", "100k per-token transfer set"}
    assert next(c for n, c in checks.items() if "fixed" in n).shown() == "3.40x"


def test_main_writes_tables_and_exits_nonzero_only_on_an_error(tmp_path, monkeypatch):
    results = fabricated()
    monkeypatch.setattr(bench_cache, "sweep_teacher_runs", lambda workdir: results["sweep"])
    assert bench_command.cache(["--only", "sweep", "--out", str(tmp_path)]) == 0
    table = pd.read_csv(tmp_path / "bench-cache.csv")
    assert list(table.columns) == ["check", "target", "measured", "unit", "met", "detail"]
    assert list(table["met"]) == ["met"]
    assert "| check" in (tmp_path / "bench-cache.md").read_text()

    results["sweep"] = {**results["sweep"], "ran_by_metrics": 6, "ran_by_log": 6}  # a missed target: reported
    assert bench_command.cache(["--only", "sweep", "--out", str(tmp_path)]) == 0
    assert list(pd.read_csv(tmp_path / "bench-cache.csv")["met"]) == ["not met"]

    def broken(workdir):
        raise bench_cache.BenchError("the sweep failed")

    monkeypatch.setattr(bench_cache, "sweep_teacher_runs", broken)
    assert bench_command.cache(["--only", "sweep", "--out", str(tmp_path)]) == 1


def test_help_explains_each_measurement(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench_command.cache_args(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    for name in bench_cache.MEASUREMENTS:
        assert name in text
    assert "3.5x" in text and "1.10x" in text and "2 GiB" in text
