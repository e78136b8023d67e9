"""`distil bench cache-workers`: worker processes building one teacher cache together, against one worker.

The job is the default one (plain `distil`: the minilm teacher on BBC News; overrides change it), its
fine-tuned teacher taken from the normal cache (fine-tuned there once if missing). Each build caches
the teacher's targets for every split from scratch into a fresh temporary store (removed after), the
teacher read from the normal cache:

  A  one worker process with `--workers` torch threads;
  B  `--workers` worker processes with 1 thread each, started together on that one store: the shard
     claims (distil.store.claims) make them split the shards, one builder and the others assisting.

Workers are processes of their own (`python -m distil.bench.cache_workers`), so each sets its threads
before torch does any work. The two variants take turns round by round (the order swapped every
round), so a machine that slows down slows both alike. A build's wall time runs from the launch of
its workers to the exit of the last; each worker counts the shards and examples its teacher computed
and the seconds that took, which give seconds per shard and per example.

Correctness in the same run: every build's shard files must be byte-identical (SHA-256) to the first
build's, and every shard computed by one worker only; the table says so, and the command exits 1 if
not. From the measured seconds per example of one worker, bench-cache-workers.md then estimates the
wall time of caching 7,200,000 sentences on K such workers.
"""

from __future__ import annotations

import json
import logging
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

NAME = "bench-cache-workers"  # the stem of the files the bench writes
HELP = ("Measure worker processes building one teacher cache together: N workers with 1 torch thread each (B) "
        "against 1 worker with N threads (A), each build caching the job's teacher targets from scratch into a "
        "fresh temporary store, the two taking turns. Reports each build's wall time (launch to last exit), the "
        "shards and examples each worker's teacher computed and its seconds per shard and per example, the ratio "
        "of the median wall times, and whether every build's shard files are byte-identical to the first's (exit "
        "1 if not); then estimates from the measured seconds per example the wall time of caching 7,200,000 "
        "sentences on K workers. The job is the default one (overrides change it); its fine-tuned teacher comes "
        "from the normal cache (fine-tuned there once if missing).")
SHARD_SIZE, QUICK_SHARD_SIZE = 256, 4  # small enough that every split has shards for each worker to claim
SENTENCES = 7_200_000  # the transfer set the estimate is for
ESTIMATE_WORKERS = (1, 2, 4, 8, 16, 64)
READY_TIMEOUT_S = 600.0
COLUMNS = ("round", "variant", "workers", "threads per worker", "wall s", "shards per worker",
           "examples per worker", "setup s per worker", "teacher s per worker", "s per shard", "ms per example",
           "each shard once", "identical to first build", "shards sha256")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Variant:
    name: str
    workers: int
    threads: int

    @property
    def label(self) -> str:
        return (f"{self.name}: {self.workers} worker{'s' * (self.workers > 1)} x {self.threads} "
                f"thread{'s' * (self.threads > 1)}")


def variants(workers: int) -> tuple[Variant, Variant]:
    """A: one worker on every thread; B: `workers` workers on one thread each (the same cores)."""
    return Variant("A", 1, workers), Variant("B", workers, 1)


@dataclass
class Build:
    """One build of the targets: its variant, wall time, each worker's report, and the SHA-256 of each shard file."""

    round: int
    variant: Variant
    wall: float
    workers: list[dict]
    digests: dict[str, str] = field(default_factory=dict)

    def total(self, key: str) -> float:
        return sum(worker[key] for worker in self.workers)

    @property
    def seconds_per_example(self) -> float:
        """A worker's teacher seconds per example it computed (each worker's seconds count for its own examples)."""
        return self.total("teacher_s") / self.total("examples")

    @property
    def once(self) -> bool:
        return self.total("shards") == len(self.digests)


# --------------------------------------------------------------------------------------- the job


def job(overrides: Sequence[str]):
    """(config, run plan) of `distil <overrides>`, checked as a run checks it."""
    from distil.config.compose import compose_run_config
    from distil.run.plan import plan_run

    cfg = compose_run_config(list(overrides))
    return cfg, plan_run(cfg)


def ensure_teacher_of(overrides: Sequence[str]) -> tuple[str, str]:
    """(key, path) of the job's fine-tuned teacher in the normal cache, fine-tuned there if missing, as
    `distil` would (its runtime and threads). This process keeps its read lock on it while the workers read it."""
    from distil.common.runtime import use
    from distil.run.pipeline import prepare_data, setup_runtime
    from distil.store.artifacts import ArtifactStore
    from distil.teacher import ensure_teacher

    cfg, plan = job(overrides)
    setup_runtime(cfg.trainer.threads, cfg.seed, plan.runtime)
    with use(plan.runtime):
        store = ArtifactStore(cfg.paths.cache)
        data, prepared = prepare_data(cfg, plan.task, store)  # what the workers prepare is then cached (augment)
        teacher = ensure_teacher(cfg.teacher, plan.task, data, prepared, store, cfg.seed, cfg.hub_offline)
    return teacher.key, str(teacher.path.resolve())


# --------------------------------------------------------------------------------------- a worker


def count_shards(counts: dict) -> None:
    """Count in `counts` the shards, examples, tokens and seconds of this worker's teacher. Which shards a
    worker computes is decided by the claims while it runs, so it is counted where the teacher runs:
    compute_shard, wrapped in this worker process only (write_targets looks it up at each call)."""
    from distil.teacher import cache

    compute = cache.compute_shard

    def counted(model, task, split, rows, *args, **kwargs):
        started = time.perf_counter()
        tensors = compute(model, task, split, rows, *args, **kwargs)
        counts["teacher_s"] += time.perf_counter() - started
        counts["shards"] += 1
        counts["examples"] += len(rows)
        counts["tokens"] += int(split.ids.lengths()[rows].sum())
        return tensors

    cache.compute_shard = counted


def wait_ready(ready: Path, index: int, workers: int, timeout: float = READY_TIMEOUT_S) -> None:
    """Start the build with the other workers: each says it is ready (its data prepared) and waits for the
    rest, so how the shards split does not depend on which process the system started first."""
    (ready / str(index)).touch()
    deadline = time.monotonic() + timeout
    while len(list(ready.iterdir())) < workers:
        if time.monotonic() > deadline:
            from distil.errors import DistilError

            raise DistilError(f"worker {index}: the other workers were not ready within {timeout:.0f} s")
        time.sleep(0.01)


def work(spec: dict) -> dict:
    """One worker: the job's data, then the targets built into spec["store"] (with whatever other workers
    share it); what its teacher computed, and where the targets are."""
    started = time.perf_counter()
    import torch

    from distil.run.pipeline import prepare_data
    from distil.store.artifacts import Artifact, ArtifactStore
    from distil.teacher import ensure_targets, load_finetuned

    torch.set_num_threads(spec["threads"])
    cfg, plan = job(spec["overrides"])
    cfg.teacher.shard_size = spec["shard_size"]  # not in the teacher's key: the normal cache's teacher serves
    data, prepared = prepare_data(cfg, plan.task, ArtifactStore(cfg.paths.cache))
    counts = {"shards": 0, "examples": 0, "tokens": 0, "teacher_s": 0.0}
    count_shards(counts)
    setup = time.perf_counter() - started  # the wait below is for the others' setup, not this worker's
    wait_ready(Path(spec["ready"]), spec["index"], spec["workers"])
    teacher = Artifact(spec["teacher_key"], Path(spec["teacher_path"]), True, {})
    targets = ensure_targets(cfg.teacher, teacher, plan.task, data, prepared, ArtifactStore(spec["store"]),
                             plan.cached_layer, lambda: load_finetuned(teacher.path, plan.task),
                             apart=plan.pairs_apart)
    return {**counts, "setup_s": setup, "threads": torch.get_num_threads(), "targets": str(targets.path)}


def main(argv: list[str]) -> int:
    """`python -m distil.bench.cache_workers SPEC.json`: one worker; its report goes to spec["result"]."""
    from distil.common.console import console_command

    spec = json.loads(Path(argv[0]).read_text())
    logging.basicConfig(level=logging.INFO, format=f"[%(asctime)s worker {spec['index']}] %(message)s",
                        datefmt="%H:%M:%S")
    with console_command(f"cache-workers worker {spec['index']}"):
        Path(spec["result"]).write_text(json.dumps(work(spec)))
    return 0


# --------------------------------------------------------------------------------------- a build


def worker_env(threads: int) -> dict[str, str]:
    """The environment of a worker: its threads set before torch starts, and this checkout's distil first."""
    import distil

    source = str(Path(distil.__file__).resolve().parent.parent)
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "PYTHONPATH": os.pathsep.join(filter(None, [source, os.environ.get("PYTHONPATH")]))}


def run_together(commands: list[list[str]], env: dict[str, str], logs: list[Path]) -> float:
    """Start every command at once (output to its log) and wait for all: the seconds from launch to the last
    exit. A command that fails stops the others (they might wait for it) and raises, with its last log line."""
    from distil.errors import DistilError

    started = time.perf_counter()
    handles = [log_path.open("w") for log_path in logs]
    processes = [subprocess.Popen(command, env=env, stdout=handle, stderr=subprocess.STDOUT)
                 for command, handle in zip(commands, handles, strict=True)]
    try:
        while (codes := [process.poll() for process in processes]).count(None):  # every one polled, each time
            if any(code not in (None, 0) for code in codes):
                break
            time.sleep(0.02)
        wall = time.perf_counter() - started
        failed = next((i for i, p in enumerate(processes) if p.returncode not in (None, 0)), None)
        if failed is not None:
            lines = logs[failed].read_text().strip().splitlines()
            raise DistilError(f"worker {failed} failed (exit {processes[failed].returncode}): "
                              f"{lines[-1] if lines else 'no output'}")
        return wall
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        for handle in handles:
            handle.close()


def shard_digests(directory: Path) -> dict[str, str]:
    from distil.store.artifacts import file_sha256

    return {path.name: file_sha256(path) for path in sorted(directory.glob("*.safetensors"))}


def build(variant: Variant, round_: int, overrides: Sequence[str], shard_size: int, teacher: tuple[str, str]) -> Build:
    """The targets built from scratch by `variant`'s workers into a fresh temporary store, timed."""
    with tempfile.TemporaryDirectory(prefix="distil-cache-workers-") as tmp:
        root = Path(tmp)
        (root / "ready").mkdir()
        specs = [{"index": i, "workers": variant.workers, "threads": variant.threads, "overrides": list(overrides),
                  "shard_size": shard_size, "store": str(root / "store"), "ready": str(root / "ready"),
                  "teacher_key": teacher[0], "teacher_path": teacher[1], "result": str(root / f"result-{i}.json")}
                 for i in range(variant.workers)]
        commands = []
        for spec in specs:
            path = root / f"spec-{spec['index']}.json"
            path.write_text(json.dumps(spec))
            commands.append([sys.executable, "-m", "distil.bench.cache_workers", str(path)])
        wall = run_together(commands, worker_env(variant.threads), [root / f"worker-{i}.log" for i in
                                                                    range(variant.workers)])
        reports = [json.loads(Path(spec["result"]).read_text()) for spec in specs]
        done = Build(round_, variant, wall, reports, shard_digests(Path(reports[0]["targets"])))
    log.info("round %d, %s: %.1f s, shards per worker %s", round_, variant.label, wall,
             " + ".join(str(w["shards"]) for w in reports))
    return done


def compare(overrides: Sequence[str], shard_size: int, workers: int, rounds: int) -> list[Build]:
    """`rounds` builds of each variant, taking turns (distil.bench.demo.in_turn), in the order measured."""
    from distil.bench.demo import in_turn

    teacher = ensure_teacher_of(overrides)
    one, several = variants(workers)
    measured: list[Build] = []

    def timed(variant: Variant) -> dict:
        measured.append(build(variant, len(measured) // 2 + 1, overrides, shard_size, teacher))
        return {}

    in_turn(rounds, lambda: timed(one), lambda: timed(several))
    return measured


# --------------------------------------------------------------------------------------- the table


def joined(values: Sequence[float], digits: int | None = None) -> str:
    return " + ".join(f"{v:,}" if digits is None else f"{v:.{digits}f}" for v in values)


def row(build: Build, first: Build) -> dict:
    """A build's row: what each worker did, its teacher's seconds per shard and per example (each worker's own
    seconds over its own shards), and whether its shards are the first build's bytes."""
    return {"round": build.round, "variant": build.variant.label, "workers": build.variant.workers,
            "threads per worker": build.variant.threads, "wall s": round(build.wall, 1),
            "shards per worker": joined([w["shards"] for w in build.workers]),
            "examples per worker": joined([w["examples"] for w in build.workers]),
            "setup s per worker": joined([w["setup_s"] for w in build.workers], 1),
            "teacher s per worker": joined([w["teacher_s"] for w in build.workers], 1),
            "s per shard": round(build.total("teacher_s") / build.total("shards"), 3),
            "ms per example": round(1000 * build.seconds_per_example, 2),
            "each shard once": "yes" if build.once else "no",
            "identical to first build": "yes" if build.digests == first.digests else "no",
            "shards sha256": combined_digest(build.digests)}


def combined_digest(digests: dict[str, str]) -> str:
    """12 hex digits standing for every shard's SHA-256: builds with the same bytes show the same."""
    import hashlib

    return hashlib.sha256(json.dumps(digests, sort_keys=True).encode()).hexdigest()[:12]


def correct(builds: Sequence[Build]) -> bool:
    return all(b.once and b.digests == builds[0].digests and b.digests for b in builds)


def median_wall(builds: Sequence[Build], variant: Variant) -> float:
    return statistics.median(b.wall for b in builds if b.variant == variant)


def estimate(seconds_per_example: dict[int, float], sentences: int = SENTENCES,
             workers: Sequence[int] = ESTIMATE_WORKERS) -> list[dict]:
    """Estimated hours to cache `sentences` on K workers, for each measured worker (threads -> its teacher
    seconds per example): sentences x seconds per example / K, every worker as fast as the measured one
    (on cores of its own) and the shards split evenly among them."""
    rows = []
    for k in workers:
        entry = {"K workers": k}
        for threads, seconds in sorted(seconds_per_example.items()):
            entry[f"cores ({threads} thread{'s' * (threads > 1)} each)"] = k * threads
            entry[f"estimated h ({threads} thread{'s' * (threads > 1)} each)"] = round(sentences * seconds / k / 3600,
                                                                                      2)
        rows.append(entry)
    return rows


def measured_seconds_per_example(builds: Sequence[Build]) -> dict[int, float]:
    """Threads per worker -> the median over that variant's builds of a worker's teacher seconds per example."""
    by_threads: dict[int, list[float]] = {}
    for b in builds:
        by_threads.setdefault(b.variant.threads, []).append(b.seconds_per_example)
    return {threads: statistics.median(values) for threads, values in by_threads.items()}


def ratio_text(builds: Sequence[Build]) -> str:
    one = next(b.variant for b in builds if b.variant.workers == 1)
    several = next(b.variant for b in builds if b.variant.workers > 1)
    a, b = median_wall(builds, one), median_wall(builds, several)
    return (f"{several.label} against {one.label}, timed in turn in one run: {b / a:.2f}x the median wall time "
            f"({a / b:.2f}x as fast).")


def estimate_text(builds: Sequence[Build], sentences: int = SENTENCES) -> str:
    tokens = sum(b.total("tokens") for b in builds) / sum(b.total("examples") for b in builds)
    return (f"### Estimate: caching {sentences:,} sentences on K workers\n\n"
            f"An estimate, not a measurement: {sentences:,} x one worker's measured teacher seconds per example "
            "(the median over its variant's builds) / K. It assumes every worker is as fast as the measured one, "
            "on cores of its own (K x its threads), and that the shards split evenly among them. It counts the "
            "teacher's time only: each worker's start-up and data preparation (every worker tokenises every "
            "split, not only its shards) and the builder's hashing of the finished shards come on top and do "
            f"not shrink with K. The measured examples average {tokens:.0f} tokens; shorter sentences cost less "
            "each.")


def write(builds: Sequence[Build], out: Path, sentences: int = SENTENCES):
    """bench-cache-workers.{md,csv}: a row per build, the ratio of the median wall times, whether every
    build's shards are the first's bytes, and the estimate for `sentences`; the rows' frame."""
    import pandas as pd

    from distil.bench.harness import markdown
    from distil.common.atomic import write_atomic

    frame = pd.DataFrame([row(b, builds[0]) for b in builds], columns=list(COLUMNS))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / f"{NAME}.csv", frame.to_csv(index=False))
    verdict = ("every build's shard files are byte-identical (SHA-256) to the first build's, and each shard was "
               "computed by one worker" if correct(builds) else
               "NOT every build's shard files are byte-identical to the first build's, or a shard was computed "
               "twice: see the columns")
    shards = len(builds[0].digests)
    text = (f"### Workers building one teacher cache together, against one worker\n\n{markdown(frame)}\n\n"
            f"Seconds on the machine named below. Each build caches the job's teacher targets ({shards} "
            "shards) from scratch into a fresh store; the wall time runs from the workers' launch to the last "
            "one's exit (start-up and data preparation included), the teacher seconds are those of each worker's "
            f"teacher over its own shards.\n\n{ratio_text(builds)}\n\nCorrectness: {verdict}.\n\n"
            f"{estimate_text(builds, sentences)}\n\n"
            + markdown(pd.DataFrame(estimate(measured_seconds_per_example(builds), sentences))) + "\n")
    write_atomic(out / f"{NAME}.md", text)
    return frame


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
