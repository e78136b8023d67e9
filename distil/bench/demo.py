"""`distil bench demo`: the default job (`make demo`, plain `distil`) from a cold cache, timed.

A newcomer's first run fine-tunes the teacher, caches its outputs and trains the student with
nothing reused, so the run goes into an empty temporary outputs directory. The wall time is the
command's, interpreter start and exit included; the phases are the run's own (metrics.json
`phases`: data, teacher fine-tuning, the teacher's cached targets, the student with its evaluation
and speed measurement). Each measurement is one row of bench-demo.{md,csv}, labelled with the code
version it ran, beside the rows of earlier code versions the record holds (the before and after of
a speed-up), and with the teacher's and student's test scores, so a faster demo that got worse
shows it.

`--against REV` times another code version in the same run (a git worktree of REV on PYTHONPATH),
the two taking turns round by round (the order swapped every round), so a busy machine slows both
alike; the table then gives the ratio of their median wall times.
`--with KEY=VALUE` times this code with and without those overrides the same way (`--with
tracking=mlflow`: what experiment tracking costs the default job), a row per run and the ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pandas as pd

from distil.bench.harness import markdown
from distil.common.atomic import write_atomic
from distil.common.console import console_script
from distil.errors import DistilError

PHASES = ("data", "teacher", "targets", "student")
COLUMNS = ("code", "overrides", "date", "wall s", *(f"{phase} s" for phase in PHASES), "start and exit s",
           "teacher test", "student test")


def measure(overrides: list[str], code: str, date: str, source: Path | None = None) -> dict:
    """One cold run of the default job with `overrides`: its row. `source`: a checkout of another code
    version to run instead of this one (put first on PYTHONPATH, so its `distil` package is imported)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(source), os.environ.get("PYTHONPATH")]))}
    with tempfile.TemporaryDirectory(prefix="distil-demo-") as tmp:
        started = time.perf_counter()
        done = subprocess.run([console_script("distil"), f"paths.outputs={tmp}", *overrides],
                              capture_output=True, text=True, env=env if source else None)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise DistilError(f"the demo failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
        [path] = Path(tmp, "runs").rglob("metrics.json")
        metrics = json.loads(path.read_text())
    metric = metrics["metric"]
    return {"code": code, "overrides": " ".join(overrides), "date": date, "wall s": round(wall, 1),
            **{f"{phase} s": metrics["phases"][phase] for phase in PHASES},
            "start and exit s": round(wall - metrics["seconds"], 1),
            "teacher test": round(100 * metrics["teacher"]["test"][metric], 2),
            "student test": round(100 * metrics["student"]["test"][metric], 2)}


def compare(overrides: list[str], code: str, date: str, against: str, rounds: int) -> tuple[list[dict], float]:
    """`rounds` cold runs of this code (with `overrides`) and of code version `against` (as it is), taking
    turns (this code first in even rounds, `against` first in odd ones); their rows and the ratio of
    this code's median wall time to theirs."""
    with worktree(against) as (source, their_code):
        if their_code == code:
            raise DistilError(f"--against {against} is this code ({code}): name another revision")
        ours, theirs = in_turn(rounds, lambda: measure(overrides, code, date),
                               lambda: measure([], their_code, date, source))
    return [*ours, *theirs], median_wall(ours) / median_wall(theirs)


def compare_with(overrides: list[str], extra: list[str], code: str, date: str,
                 rounds: int) -> tuple[list[dict], float]:
    """`rounds` cold runs of this code with `overrides` and with `overrides` + `extra` (e.g. tracking=mlflow:
    what a setting costs the default job), taking turns as `compare` does; their rows (the overrides column
    tells them apart) and the ratio of the median wall time with `extra` to the one without."""
    plain, extended = in_turn(rounds, lambda: measure(overrides, code, date),
                              lambda: measure([*overrides, *extra], code, date))
    return [*plain, *extended], median_wall(extended) / median_wall(plain)


def in_turn(rounds: int, first: Callable[[], dict], second: Callable[[], dict]) -> tuple[list[dict], list[dict]]:
    """Each measurement `rounds` times, taking turns (`first` first in even rounds, `second` in odd ones), so
    a machine that slows down or speeds up during the bench slows both alike."""
    rows: tuple[list[dict], list[dict]] = ([], [])
    for round_ in range(rounds):
        for who in (0, 1) if round_ % 2 == 0 else (1, 0):
            rows[who].append((first, second)[who]())
    return rows


def median_wall(rows: list[dict]) -> float:
    return statistics.median(row["wall s"] for row in rows)


@contextmanager
def worktree(revision: str) -> Iterator[tuple[Path, str]]:
    """A detached git worktree of `revision` in a temporary directory, and its short commit; removed after."""
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise DistilError(f"--against {revision}: git {args[0]} failed: {done.stderr.strip().splitlines()[-1:]}")
        return done.stdout.strip()

    commit = git("rev-parse", "--short=12", f"{revision}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="distil-against-") as tmp:
        path = Path(tmp) / "checkout"
        git("worktree", "add", "--detach", str(path), commit)
        try:
            yield path, commit
        finally:
            git("worktree", "remove", "--force", str(path))


def write(rows: list[dict], out: Path, ratio: tuple[str, str, float] | None = None) -> pd.DataFrame:
    """bench-demo.{md,csv}: one row per run, in the order measured; with `ratio` (what was timed, what
    against, median wall ratio: "Code abc", "def"; "With `tracking=mlflow`", "without"), the sentence that
    compares the two timed in turn."""
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench-demo.csv", frame.to_csv(index=False))
    compared = ("" if ratio is None else f"\n\n{ratio[0]} against {ratio[1]}, timed in turn in one run: "
                                         f"{ratio[2]:.3f}x the median wall time.")
    write_atomic(out / "bench-demo.md", "### The default job from a cold cache (`make demo`)\n\n" + markdown(frame)
                 + "\n\nSeconds on the machine named below; phases from the run's metrics.json; test scores in %."
                 + compared + "\n")
    return frame
