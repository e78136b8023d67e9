"""`make bench-fresh-clone`: the README's first command, `make install demo`, timed from a fresh clone, recorded.

The README gives how long a newcomer waits; this is where those numbers come from. It clones this
checkout's commit into a temporary folder, makes a new virtual environment there, and runs the two
targets one after the other as a new user would, each timed: `make install` (pip, with whatever
wheels pip's cache already holds: the row says how many MB that cache held) and `make demo` (the
default job from an empty cache). Each run is a row of results/bench/bench-fresh-clone.{md,csv},
beside the earlier rows. Run it on a quiet machine: another heavy job on 2 cores slows the demo 3-5x.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from distil.common.provenance import provenance
from distil.tables.ledger import record_rows

COLUMNS = ("code", "date", "pip cache MB", "install s", "demo s", "install demo s", "precision",
           "teacher test", "student test")
ROOT = Path(__file__).resolve().parents[1]


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> float:
    """Seconds `command` took; its output goes to `log`, and a failure stops the bench with its last line."""
    started = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        last = log.read_text().strip().splitlines()[-1:] or ["(no output)"]
        sys.exit(f"time_fresh_clone: `{' '.join(command)}` failed (exit {done.returncode}): {last[0]}; "
                 f"whole log: {log}")
    return seconds


def pip_cache_mb(python: Path) -> float:
    """What pip's cache holds before the install: a warm cache makes `make install` faster than a new machine's."""
    found = subprocess.run([str(python), "-m", "pip", "cache", "dir"], capture_output=True, text=True)
    where = Path(found.stdout.strip())
    if found.returncode != 0 or not where.is_dir():
        return 0.0
    return round(sum(p.stat().st_size for p in where.rglob("*") if p.is_file()) / 2**20, 1)


def measure(code: str, date: str, folder: Path) -> dict:
    """Clone, new venv, `make install`, `make demo`: one row."""
    clone = folder / "distil"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "checkout", "-q", code], cwd=clone, check=True)  # main refuses "+changes"
    venv = folder / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "DISTIL_OUTPUTS", "DISTIL_RESULTS", "VIRTUAL_ENV")}
    env.update(PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(venv))
    python = venv / "bin" / "python"
    cache = pip_cache_mb(python)
    install = timed(["make", "install", f"PYTHON={python}"], clone, env, folder / "install.log")
    demo = timed(["make", "demo"], clone, env, folder / "demo.log")
    [metrics] = sorted((clone / "outputs" / "runs").glob("*/*/metrics.json"))
    run = json.loads(metrics.read_text())
    metric = run["metric"]
    return {"code": code, "date": date, "pip cache MB": cache, "install s": round(install, 1),
            "demo s": round(demo, 1), "install demo s": round(install + demo, 1),
            "precision": run["runtime"]["precision"],
            "teacher test": round(100 * run["teacher"]["test"][metric], 2),
            "student test": round(100 * run["student"]["test"][metric], 2)}


def main() -> int:
    now = provenance(["make", "bench-fresh-clone"])
    if now["code"].endswith("+changes"):
        sys.exit("time_fresh_clone: this checkout has uncommitted changes, and a fresh clone has none of them; "
                 "commit first (the bench clones the commit)")
    with tempfile.TemporaryDirectory(prefix="distil-fresh-") as tmp:
        row = measure(now["code"], now["date"], Path(tmp))
    frame = record_rows("bench-fresh-clone", row, COLUMNS, "`make install demo` from a fresh clone",
                        "Seconds on each row's machine: a new clone and virtual environment, then each target "
                        "as a new user runs it; test scores in % from the demo's metrics.json.", now)
    print(frame.to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
