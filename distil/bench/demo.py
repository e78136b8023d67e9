"""`distil bench demo`: the default job (`make demo`, plain `distil`) from a cold cache, timed.

A newcomer's first run fine-tunes the teacher, caches its outputs and trains the student with
nothing reused, so the run goes into an empty temporary outputs directory. The wall time is the
command's, interpreter start and exit included; the phases are the run's own (metrics.json
`phases`: data, teacher fine-tuning, the teacher's cached targets, the student with its evaluation
and speed measurement). Each measurement is one row of bench-demo.{md,csv}, labelled with the code
version it ran, beside the rows of earlier code versions the record holds (the before and after of
a speed-up), and with the teacher's and student's test scores, so a faster demo that got worse
shows it.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from pathlib import Path

import pandas as pd

from distil.bench.harness import markdown
from distil.common.atomic import write_atomic
from distil.common.console import console_script
from distil.errors import DistilError

PHASES = ("data", "teacher", "targets", "student")
COLUMNS = ("code", "date", "wall s", *(f"{phase} s" for phase in PHASES), "start and exit s", "teacher test",
           "student test")


def measure(overrides: list[str], code: str, date: str) -> dict:
    """One cold run of the default job with `overrides`: its row."""
    with tempfile.TemporaryDirectory(prefix="distil-demo-") as tmp:
        started = time.perf_counter()
        done = subprocess.run([console_script("distil"), f"paths.outputs={tmp}", *overrides],
                              capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise DistilError(f"the demo failed (exit {done.returncode}): {done.stderr.strip().splitlines()[-1:]}")
        [path] = Path(tmp, "runs").rglob("metrics.json")
        metrics = json.loads(path.read_text())
    metric = metrics["metric"]
    return {"code": code, "date": date, "wall s": round(wall, 1),
            **{f"{phase} s": metrics["phases"][phase] for phase in PHASES},
            "start and exit s": round(wall - metrics["seconds"], 1),
            "teacher test": round(100 * metrics["teacher"]["test"][metric], 2),
            "student test": round(100 * metrics["student"]["test"][metric], 2)}


def write(rows: list[dict], out: Path) -> pd.DataFrame:
    """bench-demo.{md,csv}: one row per code version measured, in the order measured."""
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "bench-demo.csv", frame.to_csv(index=False))
    write_atomic(out / "bench-demo.md", "### The default job from a cold cache (`make demo`)\n\n" + markdown(frame)
                 + "\n\nSeconds on the machine named below; phases from the run's metrics.json; test scores in %.\n")
    return frame
