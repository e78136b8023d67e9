"""`distil bench table-jobs`: a table's cells run by `distil table --jobs N` against `--jobs 1`, timed.

The table is PRESET, written as data: 8 smoke-sized cells (debug=smoke, the tiny teacher on the toy
data; 4 schedules x 2 seeds), each cell on `--threads` torch threads (default 1). A measurement is the
whole `distil table` command, interpreter start and the table's writing included, run into fresh
temporary outputs and results directories: from a cold cache (the first cell that needs the teacher
fine-tunes and caches it, a cell that needs it meanwhile waits under the build lock and reuses it),
and with no cell found done in the tracked record (results/cells). The two settings take turns round
by round (the order swapped every round), so a machine that slows down or speeds up slows both
alike; bench-table-jobs.{md,csv} holds a row per run and the ratio of the median wall times.

`--jobs N` gives each cell an equal share of the cores (distil.common.runtime.share_of_cores): on 2 cores
with N = 2, 1 thread each, as many as a `--jobs 1` cell has by default. The table says how many
threads each run's cells had and on how many cores.

With `--real` the cells are real ones (REAL_BASE: the BiLSTM under d1 and soft on SST-2 low resource,
one epoch each on the 20,000 transfer sentences), and a `--jobs 1` cell has every core, as a user's
`distil table` gives it: the question is then whether two cells on a core each beat one cell on both.
Each run still gets fresh cells and results, but reads the teacher and its targets from the outputs'
cache (linked in): fine-tuning a MiniLM in every run would time the teacher, not the cells. They must
be cached there first (the frontier's seed-1 cells build them); a run that would fine-tune one stops.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd
import yaml

from distil.bench.demo import in_turn, median_wall
from distil.bench.harness import markdown
from distil.common.atomic import write_atomic
from distil.errors import DistilError

NAME = "bench-table-jobs"  # the preset's name, and the stem of the files the bench writes
SCHEDULES = ("hard", "soft", "d0", "d1")  # x SEEDS: 8 cells
SEEDS = (1, 2)
SMOKE_BASE = ("debug=smoke",)
# --real: frontier-sst2's BiLSTM and teacher (seed 1), one epoch, two schedules: 2 cells of ~2 minutes each
REAL_NAME = "bench-table-jobs-real"
REAL_BASE = ("+experiment=sst2-low", "teacher=minilm", "student=bilstm", "trainer.epochs=1")
REAL_SCHEDULES, REAL_SEEDS = ("d1", "soft"), (1,)
COLUMNS = ("round", "jobs", "threads per cell", "cores", "cells", "wall s", "cells' own s")


def preset(threads: int, schedules: tuple[str, ...] = SCHEDULES, seeds: tuple[int, ...] = SEEDS,
           base: tuple[str, ...] = SMOKE_BASE) -> dict:
    """The timed table, as `distil table` reads a preset file: a row per schedule, a cell per seed."""
    kind = "smoke" if base == SMOKE_BASE else "real"
    return {"paper": "distil (this project)", "table": "bench",
            "title": f"{len(schedules) * len(seeds)} {kind} cells, timed by distil bench table-jobs",
            "scales": {"cpu": {"base": [*base, f"trainer.threads={threads}"], "seeds": list(seeds)}},
            "rows": [{"label": schedule, "overrides": [f"schedule={schedule}"]} for schedule in schedules]}


def real_preset(threads: int) -> dict:
    return preset(threads, REAL_SCHEDULES, REAL_SEEDS, REAL_BASE)


def write_preset(directory: Path, table: dict) -> Path:
    path = directory / f"{NAME}.yaml"
    path.write_text(yaml.safe_dump(table, sort_keys=False))
    return path


def threads_per_cell(jobs: int, threads: int) -> int:
    """What `distil table --jobs <jobs>` gives each cell of a preset whose cells ask for `threads`."""
    from distil.common.runtime import share_of_cores

    return threads if jobs <= 1 else share_of_cores(jobs)


def measure(preset_file: Path, jobs: int, threads: int, round_: int, cache: Path | None = None) -> dict:
    """One `distil table <preset> --jobs <jobs>` into fresh outputs and results directories: its row. Cold,
    or with `cache` (an outputs' cache/) linked in, so the teacher and its targets are read, not built."""
    from distil.common.console import console_script

    with tempfile.TemporaryDirectory(prefix="distil-table-jobs-") as tmp:
        env = {**os.environ, "DISTIL_OUTPUTS": str(Path(tmp, "outputs")), "DISTIL_RESULTS": str(Path(tmp, "results"))}
        if cache is not None:
            Path(tmp, "outputs").mkdir()
            Path(tmp, "outputs", "cache").symlink_to(cache.resolve(), target_is_directory=True)
        started = time.perf_counter()
        done = subprocess.run([console_script("distil"), "table", str(preset_file), "--jobs", str(jobs)],
                              cwd=tmp, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise DistilError(f"distil table --jobs {jobs} failed (exit {done.returncode}): "
                              f"{(done.stderr or done.stdout).strip().splitlines()[-1:]}")
        cells = [json.loads(path.read_text()) for path in Path(tmp, "outputs", "cells").glob("*/metrics.json")]
    if cache is not None and any(cell["artifacts"].get("teacher_reused") is False for cell in cells):
        raise DistilError(f"distil table --jobs {jobs} fine-tuned a teacher: cache one in {cache} first (run the "
                          f"cells once, e.g. distil table frontier-sst2 --seed 1), so the runs time the cells")
    return row(round_, jobs, threads_per_cell(jobs, threads), cells, wall)


def row(round_: int, jobs: int, threads: int, cells: list[dict], wall: float) -> dict:
    """A run's row: its wall time beside the seconds its cells' own metrics.json give (summed: with several
    jobs they overlap, so the sum exceeds the wall time)."""
    if any(cell.get("status") != "ok" for cell in cells):
        raise DistilError(f"distil table --jobs {jobs}: a cell did not finish (status "
                          f"{[cell.get('status') for cell in cells if cell.get('status') != 'ok'][0]!r})")
    return {"round": round_, "jobs": jobs, "threads per cell": threads, "cores": os.cpu_count(), "cells": len(cells),
            "wall s": round(wall, 1), "cells' own s": round(sum(float(cell.get("seconds", 0)) for cell in cells), 1)}


def compare(jobs: int, threads: int, rounds: int, table: dict | None = None,
            cache: Path | None = None) -> tuple[list[dict], float]:
    """`rounds` runs of `table` (default: PRESET) with `--jobs 1` and with `--jobs <jobs>`, taking turns
    (distil.bench.demo.in_turn); their rows, in the order measured, and the speed-up: the median wall time
    with --jobs 1 over the one with --jobs <jobs>. With `cache`, each run reads its teacher from there."""
    measured: list[dict] = []

    def run(preset_file: Path, jobs_: int) -> dict:
        measured.append(measure(preset_file, jobs_, threads, len(measured) // 2 + 1, cache))
        return measured[-1]

    with tempfile.TemporaryDirectory(prefix="distil-table-jobs-preset-") as tmp:
        preset_file = write_preset(Path(tmp), table or preset(threads))
        one, several = in_turn(rounds, lambda: run(preset_file, 1), lambda: run(preset_file, jobs))
    return measured, median_wall(one) / median_wall(several)


def write(rows: list[dict], out: Path, jobs: int, speedup: float, real: bool = False) -> pd.DataFrame:
    """bench-table-jobs.{md,csv} (--real: bench-table-jobs-real): a row per run, and the sentence that gives
    the ratio."""
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    out.mkdir(parents=True, exist_ok=True)
    name = REAL_NAME if real else NAME
    write_atomic(out / f"{name}.csv", frame.to_csv(index=False))
    cells = int(frame["cells"].iloc[0]) if len(frame) else 0
    what = ("real cells (the BiLSTM under d1 and soft on SST-2 low resource, 1,000 labels and 20,000 transfer "
            "sentences, one epoch), the MiniLM teacher and its targets read from the cache" if real else
            "from a cold cache (smoke-sized cells: the tiny teacher on the toy data)")
    write_atomic(out / f"{name}.md", f"### A table of {cells} {'real ' if real else ''}cells with `distil table "
                 f"--jobs {jobs}` against `--jobs 1`\n\n" + markdown(frame)
                 + f"\n\nSeconds on the machine named below: each run is the whole `distil table` command, {what}; "
                   "the cells' own seconds are the sum of their metrics.json `seconds`.\n\n"
                 + f"`--jobs {jobs}` against `--jobs 1`, timed in turn in one run: {speedup:.2f}x as fast (the median "
                   f"wall time with `--jobs 1` over the one with `--jobs {jobs}`).\n")
    return frame
