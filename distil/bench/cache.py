"""`distil bench cache`: the teacher cache's speed and memory targets, measured in one run.

Four measurements, each judged against its target and written to outputs/tables/bench-cache.{md,csv}:

1. caching  Teacher caching throughput on a fixed sample of real SST-2 train sentences: the runner's own
            path (`write_targets`: shards, length-sorted batches within a shard) against the same teacher
            over the same sentences with (b) every batch padded to max_length and (c) batches in data order
            padded to their longest sentence. Targets: (a)/(b) >= 3.5x, (a)/(c) >= 1.2x.
2. training Student training from the sharded cache against training from the same fp16 values held in
            memory: one d1 stage (ce + logit_mse) on SST-2 labeled + transfer for a fixed number of batches,
            the same seed for both, so the loss trajectories must be identical. Target: <= 1.10x the time.
3. memory   A 100k-sentence transfer set of English Wikipedia sentences for the tagging task, cached with
            one per-token 768-d hidden layer by a randomly initialised bert-base-width teacher, then one
            epoch of a bilstm-tagger student trained with repr_mse from the shards. Each phase runs in a
            fresh process that reports its own peak RSS. Targets: < 2 GiB each; the disk size is reported.
4. sweep    `distil -m debug=smoke schedule=<6 schedules>` in a temporary directory: how many cells ran
            the teacher, from metrics.json (`artifacts.teacher_ran`) and from the log lines ("reusing
            cached teacher targets"). Target: exactly 1.

Ratios come from measurements taken in the same run, with the same thread count; repetitions are
interleaved (a, b, c, a, b, c, ...) so a busy neighbour slows every variant alike, and medians are
reported. A missed target is reported in the table, not raised; an error (e.g. the sharded and the
in-memory training disagree) exits non-zero after the tables are written.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

GIB = 1 << 30
BERT_BASE_LAYERS = 12  # measurement 3 holds this many teacher layers in memory
SST2_TRAIN = Path("sst2") / "train.tsv"
WIKI = Path("wikipedia-sentences") / "wiki_en_sentences_all.txt.gz"
SWEEP_SCHEDULES = ("hard", "soft", "joint", "rl-llce", "rlll-ce", "bilstm-soft")
REUSE_LINE = "reusing cached teacher targets"
SAMPLE_SEED = 0  # which SST-2 sentences measurement 1 times: fixed, so runs compare
PROG = "distil-bench-cache"
MEASUREMENTS = ("caching", "training", "memory", "sweep")


class BenchError(Exception):
    """Something went wrong (not a missed target): reported, and the exit status is 1."""


# --------------------------------------------------------------------------------------- data


def sst2_sentences(data_dir: Path, count: int, seed: int = SAMPLE_SEED) -> list[str]:
    """`count` SST-2 train sentences drawn with a fixed seed, in file order (the runner's data order)."""
    import pandas as pd

    path = Path(data_dir) / SST2_TRAIN
    if not path.is_file():
        raise BenchError(f"{path} not found: set --data-dir to the directory holding sst2/ (see ../shared/data)")
    sentences = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, dtype=str, keep_default_na=False)["sentence"]
    if count > len(sentences):
        raise BenchError(f"--sentences {count} is more than the {len(sentences)} SST-2 train sentences")
    rows = np.sort(np.random.default_rng(seed).choice(len(sentences), size=count, replace=False))
    return [sentences.iloc[int(i)].strip() for i in rows]


def corpus_sentences(path: Path, count: int) -> list[list[str]]:
    """`count` whitespace-tokenised lines spread evenly over a text file (.gz or plain), read streaming."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        total = sum(1 for line in handle if line.strip())
    if count > total:
        raise BenchError(f"{path} has {total} sentences, fewer than the {count} asked for")
    stride, chosen = total // count, []
    with opener(path, "rt", encoding="utf-8") as handle:
        index = 0
        for line in handle:
            words = line.split()
            if not words:
                continue
            if index % stride == 0:
                chosen.append(words)
                if len(chosen) == count:
                    break
            index += 1
    return chosen


def text_split(task, tokenizer, texts: Sequence[str], max_length: int, name: str = "transfer"):
    """Unlabeled texts as the runner prepares a transfer set (classification)."""
    import datasets

    from distil.tasks import NO_LABEL

    ds = datasets.Dataset.from_dict({"text": list(texts), "label": [NO_LABEL] * len(texts),
                                     "language": [""] * len(texts)})
    return task.prepare(name, tokenizer, ds, max_length, ["0", "1"])


def token_split(task, tokenizer, sentences: Sequence[Sequence[str]], max_length: int, name: str = "transfer"):
    """Whitespace-split sentences as a tagging transfer set: every tag dropped (NO_LABEL)."""
    import datasets

    from distil.tasks import NO_LABEL

    ds = datasets.Dataset.from_dict({"tokens": [list(s) for s in sentences],
                                     "tags": [[NO_LABEL] * len(s) for s in sentences],
                                     "language": [""] * len(sentences)})
    return task.prepare(name, tokenizer, ds, max_length, ["O"])


def every_split(**given):
    """A prepared-split dict with every split write_targets expects; the ones not given are empty."""
    from distil.data.split import SPLITS

    first = next(iter(given.values()))
    return {name: given.get(name, replace(first.select([]), name=name)) for name in SPLITS}


# ------------------------------------------------------------------------ 1. caching throughput


def _cache_in_data_order(model, task, split, pad_id: int, batch_size: int, layer: int | None,
                         width: int | None, shard_size: int, out: Path) -> None:
    """The baselines: write_targets' work (same forward, same per-example outputs, same shards), but
    batches taken in data order, padded to `width` (fixed padding) or to their longest (None)."""
    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file

    from distil.teacher.cache import shard_name

    out.mkdir(parents=True, exist_ok=True)
    lengths = split.ids.lengths()
    with torch.inference_mode():
        for index, start in enumerate(range(0, len(split), shard_size)):
            rows = np.arange(start, min(start + shard_size, len(split)))
            logits, hidden = [], []
            for first in range(0, len(rows), batch_size):
                batch = rows[first:first + batch_size]
                ids, mask = split.ids.pad(batch, pad_id)
                if width is not None:
                    ids = F.pad(ids, (0, width - ids.shape[1]), value=pad_id)
                    mask = F.pad(mask, (0, width - mask.shape[1]), value=0)
                output = model(input_ids=ids, attention_mask=mask, output_hidden_states=layer is not None)
                states = output.hidden_states[layer] if layer is not None else None
                for k, row in enumerate(batch):  # per example, as run_teacher: fp16 rows
                    length = int(lengths[row])
                    logits.append((output.logits[k, :length] if task.per_token else output.logits[k]).half())
                    if states is not None:
                        positions = torch.from_numpy(task.hidden_positions(split, int(row)))
                        hidden.append(states[k, positions].half())
            save_file(_baseline_tensors(logits, hidden if layer is not None else None, task.per_token),
                      out / shard_name(split.name, index))


def _baseline_tensors(logits: list, hidden: list | None, per_token: bool) -> dict:
    """The runner's shard layout, from per-example rows (the baselines' simple way to get it)."""
    import torch

    def offsets(rows):
        return torch.tensor([0] + [len(r) for r in rows], dtype=torch.int64).cumsum(0)

    tensors = {"logits": torch.cat(logits) if per_token else torch.stack(logits)}
    if per_token:
        tensors["offsets"] = offsets(logits)
    if hidden is not None:
        tensors["hidden"] = torch.cat(hidden)
        if per_token:
            tensors["hidden_offsets"] = offsets(hidden)
    return {k: v.contiguous() for k, v in tensors.items()}


def _shard_logits(directory: Path, split: str) -> np.ndarray:
    from distil.teacher.cache import Shard

    shards = sorted(directory.glob(f"{split}-*.safetensors"))
    return np.concatenate([Shard(path).whole("logits").astype(np.float32) for path in shards])


def caching_throughput(model, tokenizer, task, split, *, batch_size: int, max_length: int, layer: int | None,
                       shard_size: int, repeats: int, workdir: Path) -> dict:
    """Examples/s of (a) the runner's write_targets, (b) fixed max_length padding, (c) unsorted dynamic
    padding, on the same prepared split and model; repetitions interleaved, medians reported."""
    from distil.teacher.cache import write_targets

    model.eval()
    pad_id = tokenizer.pad_token_id
    splits = every_split(**{split.name: split})
    variants: dict[str, Callable[[Path], None]] = {
        "sorted": lambda out: write_targets(out, task, splits, layer, shard_size, batch_size,
                                            lambda: (model, tokenizer)),
        "fixed": lambda out: _cache_in_data_order(model, task, split, pad_id, batch_size, layer, max_length,
                                                  shard_size, out),
        "unsorted": lambda out: _cache_in_data_order(model, task, split, pad_id, batch_size, layer, None,
                                                     shard_size, out),
    }
    # Warm-up, untimed: first-call allocations and lazy initialisation are not throughput.
    _cache_in_data_order(model, task, split.select(list(range(min(batch_size, len(split))))), pad_id, batch_size,
                         layer, None, shard_size, workdir / "warmup")
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(repeats):
        for name, run in variants.items():
            out = workdir / f"{name}-{repeat}"
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir(parents=True)
            start = time.perf_counter()
            run(out)
            seconds[name].append(time.perf_counter() - start)
    last = repeats - 1
    reference = _shard_logits(workdir / f"sorted-{last}", split.name)
    difference = max(float(np.abs(_shard_logits(workdir / f"{name}-{last}", split.name) - reference).max())
                     for name in ("fixed", "unsorted"))
    for path in workdir.iterdir():
        shutil.rmtree(path, ignore_errors=True)
    median = {name: statistics.median(values) for name, values in seconds.items()}
    rate = {name: len(split) / value for name, value in median.items()}
    lengths = split.ids.lengths()
    return {"examples": len(split), "mean_tokens": float(lengths.mean()), "max_tokens": int(lengths.max()),
            "batch_size": batch_size, "repeats": repeats, "seconds": seconds, "ex_per_s": rate,
            "vs_fixed": rate["sorted"] / rate["fixed"], "vs_unsorted": rate["sorted"] / rate["unsorted"],
            "max_logit_difference": difference}


# ------------------------------------------------------------------- 2. training from the cache


@dataclass
class TrainingSetup:
    """What measurement 2 trains: the runner's configs for the student, the trainer and one stage."""

    student: object  # StudentConfig
    trainer: object  # TrainerConfig (the run's batch size already resolved)
    stage: object  # StageConfig
    label_names: list[str]


def training_from_cache(model, tokenizer, task, prepared: dict, setup: TrainingSetup, *, layer: int | None,
                        eval_batch_size: int, shard_size: int, batches: int, repeats: int, workdir: Path,
                        seed: int = 1) -> dict:
    """Seconds to train `batches` batches of one stage from (sharded) targets written by write_targets,
    and from (memory) a TargetView.in_memory of the same fp16 values; the loss trajectories must match."""
    import torch

    from distil.common.libraries import quiet_libraries
    from distil.data.batching import shuffled_batches
    from distil.run.schedule import OPTIMIZERS, StageTrainer, StudentSplit
    from distil.students import build_student
    from distil.students.vocab import PAD, TrimmedVocab
    from distil.teacher.cache import SplitTargets, TargetView, write_targets
    from distil.training.loop import fit

    quiet_libraries()
    names = list(setup.stage.data)
    (workdir / "targets").mkdir(parents=True, exist_ok=True)
    layout = write_targets(workdir / "targets", task, every_split(**{n: prepared[n] for n in names}), layer,
                           shard_size, eval_batch_size, lambda: (model, tokenizer))
    vocab = TrimmedVocab.from_tokens([prepared[n].ids for n in names])
    splits = {}
    for name in names:
        labels = prepared[name].labels
        gold = task.has_gold(labels) if isinstance(labels, torch.Tensor) else None
        splits[name] = StudentSplit(vocab.map_tokens(prepared[name].ids), labels, gold,
                                    TargetView.of(SplitTargets(workdir / "targets", layout, name)),
                                    prepared[name].word_starts)
    num_outputs = task.num_outputs(setup.label_names)
    hidden_size = model.config.hidden_size

    def train(source: str, count: int) -> tuple[float, list[float]]:
        torch.manual_seed(seed)
        student = build_student(setup.student, len(vocab), num_outputs, task, hidden_size,
                                representation_head=False)
        stage = StageTrainer("bench", setup.stage, setup.trainer, student, splits, lambda m, n: {}, task,
                             np.random.default_rng(seed), PAD)
        if source == "memory":
            stage.pool = replace(stage.pool, targets=memory_view)
        optimizer = OPTIMIZERS[setup.trainer.optimizer](list(student.parameters()), setup.trainer)
        scheduler = None
        if setup.trainer.lr_schedule == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=count,
                                                                   eta_min=setup.trainer.lr_min)
        rng, losses = np.random.default_rng(seed), []

        def loss(rows):
            value = stage.loss(stage.pool, rows)
            losses.append(value.item())
            return value

        start = time.perf_counter()
        fit(student, optimizer,
            lambda epoch: shuffled_batches(len(stage.pool), setup.trainer.batch_size, rng)[:count],
            loss, lambda: 0.0, epochs=1, patience=1, grad_clip=setup.trainer.grad_clip, scheduler=scheduler,
            description=f"training from {source} targets")
        return time.perf_counter() - start, losses

    pool = StudentSplit.concat([splits[n] for n in names])
    every_row = np.arange(len(pool))
    hidden = pool.targets.hidden(every_row)
    memory_view = TargetView.in_memory(pool.targets.logits(every_row).half(),
                                       None if hidden is None else hidden.half())
    batch_count = min(batches, -(-len(pool) // setup.trainer.batch_size))
    for source in ("sharded", "memory"):  # warm-up, untimed
        train(source, min(3, batch_count))
    seconds: dict[str, list[float]] = {"sharded": [], "memory": []}
    trajectories: dict[str, list[list[float]]] = {"sharded": [], "memory": []}
    for _ in range(repeats):
        for source in seconds:
            elapsed, losses = train(source, batch_count)
            seconds[source].append(elapsed)
            trajectories[source].append(losses)
    reference = trajectories["sharded"][0]
    identical = all(t == reference for runs in trajectories.values() for t in runs)
    median = {source: statistics.median(values) for source, values in seconds.items()}
    return {"examples": len(pool), "batches": batch_count, "batch_size": setup.trainer.batch_size,
            "repeats": repeats, "seconds": seconds, "median_seconds": median,
            "ratio": median["sharded"] / median["memory"], "identical_losses": identical,
            "losses": reference, "cached_hidden": hidden is not None, "vocab": len(vocab)}


# --------------------------------------------------------------- 3. a big per-token transfer set


def peak_rss_bytes() -> int:
    """This process's peak resident set size. VmHWM, not getrusage's ru_maxrss: Linux carries ru_maxrss
    over a fork and exec, so a child would report at least its parent's size at the fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _big_teacher(width: int, layers: int, vocab_size: int, task):
    """A random bert-base-shaped teacher (BERT_BASE_LAYERS layers of `width`) whose forward runs only
    the first `layers`: every weight is in memory, as with a real bert-base, at a fraction of the time."""
    import torch
    from transformers import BertConfig

    torch.manual_seed(0)
    config = BertConfig(vocab_size=vocab_size, hidden_size=width, num_hidden_layers=BERT_BASE_LAYERS,
                        num_attention_heads=max(1, width // 64), intermediate_size=4 * width,
                        **task.teacher_head(["O"]))
    model = task.teacher_class.from_config(config).eval()
    encoder = model.base_model.encoder
    model.held_layers = list(encoder.layer[layers:])  # kept alive, never run
    encoder.layer = encoder.layer[:layers]
    model.config.num_hidden_layers = layers
    return model


def memory_phase(phase: str, workdir: Path, *, corpus: Path, sentences: int, width: int, layers: int,
                 teacher: str, threads: int, train_batches: int) -> dict:
    """One phase of measurement 3, run in a process of its own: 'cache' writes the targets artifact
    through the store, 'train' trains a bilstm-tagger with repr_mse reading it. Returns the phase's
    figures, its peak RSS included."""
    import torch
    from omegaconf import OmegaConf

    from distil.common.libraries import quiet_libraries
    from distil.config.schema import StageConfig
    from distil.tasks import get_task
    from distil.teacher.load import load_tokenizer

    torch.set_num_threads(threads)
    quiet_libraries()
    started, rss_at_start = time.perf_counter(), peak_rss_bytes()
    # batch 32, as measured for the README (d4.1's own paper batch is 512)
    cfg = compose(f"teacher={teacher}", "student=bilstm-tagger", "schedule=d4.1", "trainer.batch_size=32")
    task = get_task("tagging")
    tokenizer = load_tokenizer(cfg.teacher, hub_offline=True)
    split = token_split(task, tokenizer, corpus_sentences(corpus, sentences), cfg.teacher.max_length)
    layer = -1
    info_path = workdir / "layout.json"
    if phase == "cache":
        from distil.store.artifacts import ArtifactStore
        from distil.teacher.cache import write_targets

        model = _big_teacher(width, layers, len(tokenizer), task)
        spec = {"bench": "memory", "sentences": sentences, "width": width, "layers": layers, "teacher": teacher}
        store = ArtifactStore(workdir / "cache")
        artifact = store.get_or_build(
            "targets", "bench", spec,
            lambda out: write_targets(out, task, every_split(transfer=split), layer, cfg.teacher.shard_size,
                                      cfg.teacher.eval_batch_size, lambda: (model, tokenizer)))
        info_path.write_text(json.dumps({"path": str(artifact.path), "layout": artifact.info}))
        files = [p for p in artifact.path.rglob("*") if p.is_file()]
        result = {"disk_bytes": sum(p.stat().st_size for p in files), "files": len(files),
                  "words": int(split.word_starts.lengths().sum()), "wordpieces": int(split.ids.lengths().sum())}
    elif phase == "train":
        from distil.data.batching import shuffled_batches
        from distil.run.schedule import OPTIMIZERS, StageTrainer, StudentSplit
        from distil.students import build_student
        from distil.students.vocab import PAD, TrimmedVocab
        from distil.teacher.cache import SplitTargets, TargetView
        from distil.training.loop import fit

        saved = json.loads(info_path.read_text())
        vocab = TrimmedVocab.from_tokens([split.ids])
        targets = TargetView.of(SplitTargets(Path(saved["path"]), saved["layout"], "transfer"))
        splits = {"transfer": StudentSplit(vocab.map_tokens(split.ids), split.labels, None, targets,
                                           split.word_starts)}
        torch.manual_seed(1)
        student = build_student(cfg.student, len(vocab), task.num_outputs(["O"]), task, width,
                                representation_head=True)
        stage_cfg = OmegaConf.structured(StageConfig(name="S1", losses={"repr_mse": 1.0}, data=["transfer"]))
        trainer = resolved_trainer(cfg)
        stage = StageTrainer("bench", stage_cfg, trainer, student, splits, lambda m, n: {}, task,
                             np.random.default_rng(1), PAD)
        optimizer = OPTIMIZERS[trainer.optimizer](list(student.parameters()), trainer)
        rng = np.random.default_rng(1)
        epoch = shuffled_batches(len(split), trainer.batch_size, rng)
        epoch_batches = len(epoch)
        if train_batches:
            epoch = epoch[:train_batches]
        scheduler = None
        if trainer.lr_schedule == "cosine":
            scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=len(epoch), eta_min=trainer.lr_min)
        losses = []

        def loss(rows):
            value = stage.loss(stage.pool, rows)
            losses.append(value.item())
            return value

        fit(student, optimizer, lambda e: epoch, loss, lambda: 0.0, epochs=1, patience=1,
            grad_clip=trainer.grad_clip, scheduler=scheduler, description="bilstm-tagger, repr_mse from shards")
        result = {"batches": len(epoch), "epoch_batches": epoch_batches, "batch_size": trainer.batch_size,
                  "first_loss": losses[0], "last_loss": losses[-1],
                  "student_params": sum(p.numel() for p in student.parameters())}
    else:
        raise BenchError(f"unknown phase {phase!r}")
    return {**result, "phase": phase, "seconds": time.perf_counter() - started, "examples": len(split),
            "peak_rss_bytes": peak_rss_bytes(), "rss_before_phase_bytes": rss_at_start}


def big_transfer_memory(workdir: Path, *, corpus: Path, sentences: int, width: int, layers: int,
                        teacher: str = "minilm", threads: int = 2, train_batches: int = 0) -> dict:
    """Measurement 3: the cache phase, then the train phase, each in a fresh Python process."""
    workdir.mkdir(parents=True, exist_ok=True)
    results = {}
    for phase in ("cache", "train"):
        out = workdir / f"{phase}.json"
        command = [sys.executable, "-m", "distil.cli.main", "bench", "cache", "--phase", phase,
                   "--workdir", str(workdir), "--corpus", str(corpus), "--big-sentences", str(sentences),
                   "--big-width", str(width), "--big-layers", str(layers), "--teacher", teacher,
                   "--threads", str(threads), "--big-train-batches", str(train_batches)]
        done = subprocess.run(command, env=offline_env(), capture_output=True, text=True)
        if done.returncode != 0 or not out.is_file():
            raise BenchError(f"measurement 3, {phase} phase failed (exit {done.returncode}): "
                             f"{done.stderr.strip()[-2000:]}")
        results[phase] = json.loads(out.read_text())
    return {**results, "sentences": sentences, "width": width, "layers": layers}


# --------------------------------------------------------------------- 4. a sweep runs the teacher once


def distil_command() -> list[str]:
    script = Path(sys.executable).with_name("distil")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "distil.cli.main"]


def sweep_teacher_runs(workdir: Path, schedules: Sequence[str] = SWEEP_SCHEDULES,
                       overrides: Sequence[str] = ("debug=smoke",)) -> dict:
    """Run a sweep over `schedules` from scratch in `workdir`; count the cells that ran the teacher."""
    workdir.mkdir(parents=True, exist_ok=True)
    sweep = workdir / "sweep"
    command = [*distil_command(), "-m", *overrides, f"schedule={','.join(schedules)}",
               f"paths.outputs={workdir / 'outputs'}", f"hydra.sweep.dir={sweep}"]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=workdir, env=offline_env(), capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise BenchError(f"the sweep failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    cells = sorted((p for p in sweep.iterdir() if (p / "metrics.json").is_file()), key=lambda p: int(p.name))
    if len(cells) != len(schedules):
        raise BenchError(f"the sweep wrote {len(cells)} metrics.json files for {len(schedules)} cells in {sweep}")
    ran_by_metrics, reusing = 0, 0
    for cell in cells:
        metrics = json.loads((cell / "metrics.json").read_text())
        if metrics.get("status") != "ok":
            raise BenchError(f"sweep cell {cell}: {metrics.get('status')}")
        ran_by_metrics += bool(metrics["artifacts"]["teacher_ran"])
        log_text = "".join(p.read_text(errors="replace") for p in cell.glob("*.log"))
        reusing += REUSE_LINE in log_text
    console_lines = sum(REUSE_LINE in line for line in (done.stdout + done.stderr).splitlines())
    return {"cells": len(cells), "ran_by_metrics": ran_by_metrics, "reusing_cells_by_log": reusing,
            "ran_by_log": len(cells) - reusing, "reuse_lines_in_console": console_lines, "seconds": seconds,
            "command": " ".join(["distil", *command[len(distil_command()):]]).replace(str(workdir), "<tmp>")}


# ------------------------------------------------------------------------------ checks and output


@dataclass(frozen=True)
class Check:
    check: str
    target: str  # as printed, e.g. ">= 3.5x"
    measured: float
    unit: str  # "x", "GiB", "cells"
    met: str  # "met", "not met", or "-" (reported only)
    detail: str

    def shown(self) -> str:
        if self.unit == "x":
            return f"{self.measured:.2f}x"
        if self.unit == "GiB":
            return f"{self.measured:.2f} GiB"
        return f"{self.measured:g} {self.unit}".strip()


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def build_checks(results: dict) -> list[Check]:
    """The table's rows from whatever measurements ran."""
    checks = []
    if "caching" in results:
        r = results["caching"]
        rate = r["ex_per_s"]
        where = (f"{r['examples']} SST-2 train sentences (mean {r['mean_tokens']:.1f} wordpieces), batch "
                 f"{r['batch_size']}, median of {r['repeats']}")
        checks.append(Check("teacher caching: runner (length-sorted shards) vs fixed max-length padding",
                            ">= 3.5x", r["vs_fixed"], "x", verdict(r["vs_fixed"] >= 3.5),
                            f"{rate['sorted']:.0f} vs {rate['fixed']:.0f} ex/s; {where}"))
        checks.append(Check("teacher caching: runner vs unsorted dynamic padding", ">= 1.2x", r["vs_unsorted"], "x",
                            verdict(r["vs_unsorted"] >= 1.2),
                            f"{rate['sorted']:.0f} vs {rate['unsorted']:.0f} ex/s; outputs agree to "
                            f"{r['max_logit_difference']:.1e}"))
    if "training" in results:
        r = results["training"]
        median = r["median_seconds"]
        checks.append(Check("student training: sharded cache vs in-memory targets (time)", "<= 1.10x", r["ratio"],
                            "x", verdict(r["ratio"] <= 1.10),
                            f"{median['sharded']:.2f} vs {median['memory']:.2f} s for {r['batches']} batches of "
                            f"{r['batch_size']} from {r['examples']} examples, median of {r['repeats']}; loss "
                            f"trajectories {'identical' if r['identical_losses'] else 'DIFFERENT'}"))
    if "memory" in results:
        r = results["memory"]
        cache, train = r["cache"], r["train"]
        where = f"{r['sentences']:,} sentences, {cache['words']:,} words, {r['width']}-d"
        checks.append(Check("100k per-token transfer set: targets artifact on disk", "reported",
                            cache["disk_bytes"] / GIB, "GiB", "-",
                            f"{where} hidden at each word's first wordpiece + logits per wordpiece, fp16, "
                            f"{cache['files']} files"))
        checks.append(Check("100k per-token transfer set: peak RSS while caching", "< 2 GiB",
                            cache["peak_rss_bytes"] / GIB, "GiB", verdict(cache["peak_rss_bytes"] < 2 * GIB),
                            f"random {r['width']}-d teacher, {BERT_BASE_LAYERS} layers held, {r['layers']} run; "
                            f"{cache['seconds']:.0f} s; "
                            f"{cache['rss_before_phase_bytes'] / GIB:.2f} GiB after imports"))
        checks.append(Check("100k per-token transfer set: peak RSS while training", "< 2 GiB",
                            train["peak_rss_bytes"] / GIB, "GiB", verdict(train["peak_rss_bytes"] < 2 * GIB),
                            f"bilstm-tagger, repr_mse, {train['batches']} batches of {train['batch_size']} "
                            f"({'one epoch' if train['batches'] == train.get('epoch_batches') else 'part of an epoch'}"
                            f"); {train['seconds']:.0f} s; "
                            f"{train['rss_before_phase_bytes'] / GIB:.2f} GiB after imports"))
    if "sweep" in results:
        r = results["sweep"]
        ran = r["ran_by_metrics"]
        checks.append(Check(f"{r['cells']}-cell sweep over schedules: cells that ran the teacher", "= 1", ran, "",
                            verdict(ran == 1 and r["ran_by_log"] == 1),
                            f"metrics.json teacher_ran: {ran}; log: {r['reusing_cells_by_log']} of {r['cells']} "
                            f"cells say '{REUSE_LINE}' (so {r['ran_by_log']} ran it); {r['seconds']:.0f} s"))
    return checks


def notes(args: argparse.Namespace, results: dict) -> list[str]:
    lines = [f"{args.threads} torch threads; repetitions interleaved, medians reported; ratios from one run."]
    if "caching" in results:
        r = results["caching"]
        lines.append(
            f"1. teacher '{args.teacher}' (random classification head: speed does not depend on weights), "
            f"max_length {args.max_length}, layer -1 [CLS] cached beside the logits as the runner does for a "
            f"sequence task; (a) write_targets (shards of {args.shard_size}, length-sorted batches within a "
            f"shard), (b) batches in data order padded to {args.max_length}, (c) batches in data order padded "
            f"to their longest. Seconds per repetition: "
            + "; ".join(f"{k} {', '.join(f'{v:.1f}' for v in vs)}" for k, vs in r["seconds"].items()) + ".")
    if "training" in results:
        r = results["training"]
        lines.append(
            f"2. SST-2 labeled {args.labeled:,} + transfer {args.transfer:,}; default bilstm student (random "
            f"embeddings: speed does not depend on their init), d1 stage (ce + logit_mse, Adam with cosine "
            f"decay), vocabulary trimmed to {r['vocab']:,} wordpieces; the cache holds logits and the [CLS] "
            f"layer, read every batch in both cases. Seconds per repetition: sharded "
            f"{', '.join(f'{v:.2f}' for v in r['seconds']['sharded'])}; memory "
            f"{', '.join(f'{v:.2f}' for v in r['seconds']['memory'])}.")
    if "memory" in results:
        r = results["memory"]
        lines.append(
            f"3. teacher: randomly initialised BERT of width {r['width']} holding all {BERT_BASE_LAYERS} "
            f"layers' weights in memory (as bert-base), its forward running {r['layers']} of them to keep the "
            f"run short: the cache's size and the training memory do not depend on the depth, but a full-depth "
            f"forward with output_hidden_states (as run_teacher asks) also holds every layer's output of a batch, "
            f"+{(BERT_BASE_LAYERS - r['layers']) * 64 * 128 * r['width'] * 4 / GIB:.2f} GiB at 64 x 128 tokens; "
            f"{args.teacher}'s 30k-wordpiece vocabulary; tagging task, real English Wikipedia sentences split "
            f"on whitespace, tags dropped as in a transfer set; layer -1 cached. The cache stores per-token "
            f"hidden states only at each word's first wordpiece (what the representation losses compare). "
            f"Peak RSS is each phase's own: VmHWM of a fresh process, imports and tokenisation included.")
    if "sweep" in results:
        lines.append(f"4. `{results['sweep']['command']}`, run in a temporary directory <tmp>, starting from an "
                     f"empty cache.")
    return lines


def header(args: argparse.Namespace) -> str:
    ran = ", ".join(args.only)
    return f"measurements: {ran}; {'quick sizes (ratios are not meaningful)' if args.quick else 'full sizes'}"


def checks_frame(checks: list[Check]):
    import pandas as pd

    rows = [{"check": c.check, "target": c.target, "measured": c.shown(), "met": c.met, "detail": c.detail}
            for c in checks]
    return pd.DataFrame(rows, columns=["check", "target", "measured", "met", "detail"])


def write_outputs(checks: list[Check], lines: list[str], args: argparse.Namespace) -> tuple[Path, Path]:
    import pandas as pd

    from distil.bench.harness import markdown
    from distil.common.atomic import write_atomic

    frame = checks_frame(checks)
    raw = pd.DataFrame([{"check": c.check, "target": c.target, "measured": c.measured, "unit": c.unit,
                         "met": c.met, "detail": c.detail} for c in checks])
    md, csv_path = args.out / "bench-cache.md", args.out / "bench-cache.csv"
    write_atomic(csv_path, raw.to_csv(index=False, float_format="%.4f"))
    text = "\n\n".join(["# Teacher cache benchmark", header(args), markdown(frame),
                        "\n".join(f"- {line}" for line in lines)])
    write_atomic(md, text + "\n")
    return md, csv_path


# ------------------------------------------------------------------------------------ running


def offline_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def compose(*overrides: str):
    from distil.config.compose import compose_run_config

    return compose_run_config(list(overrides))


def load_teacher(name: str, task, label_names: list[str]):
    """(model, tokenizer, teacher config): the configured teacher with a fresh, random head."""
    from distil.teacher.load import load_pretrained

    cfg = compose(f"teacher={name}").teacher
    model, tokenizer = load_pretrained(cfg, task, label_names, seed=0, hub_offline=True)
    return model.eval(), tokenizer, cfg


def run_caching(args: argparse.Namespace, workdir: Path) -> dict:
    from distil.tasks import get_task

    task = get_task("classification")
    model, tokenizer, cfg = load_teacher(args.teacher, task, ["0", "1"])
    split = text_split(task, tokenizer, sst2_sentences(args.data_dir, args.sentences), args.max_length)
    return caching_throughput(model, tokenizer, task, split, batch_size=cfg.eval_batch_size,
                              max_length=args.max_length, layer=cfg.layer, shard_size=args.shard_size,
                              repeats=args.repeats, workdir=workdir)


def run_training(args: argparse.Namespace, workdir: Path) -> dict:
    from distil.data.split import build_task_data
    from distil.tasks import make_task

    if args.labeled % 2:
        raise BenchError("--labeled must be even (SST-2 draws as many per class)")
    # batch 64 (the bilstm student's), as measured for the README (d1's own paper batch is 512)
    cfg = compose("dataset=sst2", "schedule=d1", f"paths.data_dir={args.data_dir}", f"teacher={args.teacher}",
                  f"transfer_size.count={args.transfer}", f"dataset.split.labeled_per_class={args.labeled // 2}",
                  "trainer.batch_size=64")
    task = make_task(cfg.dataset)
    data = build_task_data(cfg.dataset, task, cfg.transfer_size, cfg.paths.data_dir, cfg.seed)
    model, tokenizer, teacher_cfg = load_teacher(args.teacher, task, data.label_names)
    prepared = {name: task.prepare(name, tokenizer, data.splits[name], teacher_cfg.max_length, data.label_names)
                for name in ("labeled", "transfer")}
    setup = TrainingSetup(cfg.student, resolved_trainer(cfg), cfg.schedule.stages[0], data.label_names)
    return training_from_cache(model, tokenizer, task, prepared, setup, layer=teacher_cfg.layer,
                               eval_batch_size=teacher_cfg.eval_batch_size, shard_size=args.shard_size,
                               batches=args.train_batches, repeats=args.repeats, workdir=workdir, seed=cfg.seed)


def resolved_trainer(cfg):
    """cfg.trainer with the batch size a run would train with (plan.training_batch_size)."""
    from omegaconf import OmegaConf

    from distil.run.plan import training_batch_size

    return OmegaConf.merge(cfg.trainer, {"batch_size": training_batch_size(cfg)[0]})


def run(args: argparse.Namespace) -> tuple[dict, list[str]]:
    """Every chosen measurement; returns (results, errors). An error in one does not stop the others."""
    import torch

    from distil.common.libraries import quiet_libraries
    from distil.serve.speed import torch_threads

    quiet_libraries()
    results, errors = {}, []
    steps = {
        "caching": lambda w: run_caching(args, w),
        "training": lambda w: run_training(args, w),
        "memory": lambda w: big_transfer_memory(w, corpus=args.corpus, sentences=args.big_sentences,
                                                width=args.big_width, layers=args.big_layers, teacher=args.teacher,
                                                threads=args.threads, train_batches=args.big_train_batches),
        "sweep": lambda w: sweep_teacher_runs(w),
    }
    with torch_threads(args.threads), tempfile.TemporaryDirectory(prefix="distil-bench-cache-") as tmp:
        for name in args.only:
            print(f"[{PROG}] {name} ...", file=sys.stderr, flush=True)
            workdir = Path(tmp) / name
            workdir.mkdir()
            started = time.perf_counter()
            try:
                results[name] = steps[name](workdir)
            except Exception as error:  # noqa: BLE001 - reported, the other measurements still run
                errors.append(f"{name}: {type(error).__name__}: {error}")
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
            print(f"[{PROG}] {name} done in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
            torch.set_num_threads(args.threads)  # a step may have changed it
    if "training" in results and not results["training"]["identical_losses"]:
        errors.append("training: the sharded and the in-memory runs gave different loss trajectories "
                      "from the same seed and the same fp16 values")
    return results, errors


QUICK = {"sentences": 256, "repeats": 1, "labeled": 200, "transfer": 1000, "train_batches": 10,
         "big_sentences": 2000, "big_layers": 1}
FULL = {"sentences": 4096, "repeats": 3, "labeled": 1000, "transfer": 20000, "train_batches": 200,
        "big_sentences": 100000, "big_layers": 1}


def phase(args: argparse.Namespace) -> int:
    """Measurement 3's child process (`distil bench cache --phase cache|train`): one phase, its figures
    in <workdir>/<phase>.json."""
    result = memory_phase(args.phase, args.workdir, corpus=args.corpus, sentences=args.big_sentences,
                          width=args.big_width, layers=args.big_layers, teacher=args.teacher,
                          threads=args.threads, train_batches=args.big_train_batches)
    (args.workdir / f"{args.phase}.json").write_text(json.dumps(result))
    return 0


def bench(args: argparse.Namespace, prog: str = PROG) -> int:
    """`distil bench cache` (distil/cli/bench.py parses the arguments): every chosen measurement, the
    checks printed and written; 1 if a measurement failed."""
    from rich.console import Console

    from distil.bench.harness import rich_table

    results, errors = run(args)
    checks = build_checks(results)
    lines = notes(args, results)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 160)
    console.print(rich_table(checks_frame(checks), f"Teacher cache benchmark\n{header(args)}"))
    for line in lines:
        console.print(f"- {line}", highlight=False)
    md, csv_path = write_outputs(checks, lines, args)
    console.print(f"wrote {md} and {csv_path}")
    for error in errors:
        print(f"{prog}: error: {error}", file=sys.stderr)
    return 1 if errors else 0
