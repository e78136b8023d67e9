"""`make bench-suite`: the default test suite (`make test`) timed as a user runs it, recorded.

The README and the development page give the suite's time; this is where that number comes from.
Each run is a row of results/bench/bench-suite.{md,csv} (the code version, the wall time of the whole
command, pytest's own count and time), beside the earlier rows, so a slower suite shows. Run it on a
quiet machine: another heavy job on 2 cores slows the suite 30-40%.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from distil.common.provenance import provenance
from distil.tables.ledger import record_rows

COLUMNS = ("code", "date", "wall s", "pytest s", "passed", "failed")
SUMMARY = re.compile(r"(?:(\d+) failed, )?(\d+) passed[^\n]* in ([\d.]+)s")


def measure(code: str, date: str) -> dict:
    """One `make test`: its row (exit status aside: a failing suite is still timed, and says so)."""
    started = time.perf_counter()
    done = subprocess.run(["make", "test"], capture_output=True, text=True)
    wall = time.perf_counter() - started
    found = SUMMARY.search(done.stdout)
    if found is None:
        sys.exit(f"time_suite: make test printed no pytest summary (exit {done.returncode}): "
                 f"{done.stdout.strip().splitlines()[-1:]} {done.stderr.strip().splitlines()[-1:]}")
    failed, passed, seconds = found.groups()
    return {"code": code, "date": date, "wall s": round(wall, 1), "pytest s": float(seconds),
            "passed": int(passed), "failed": int(failed or 0)}


def main() -> int:
    now = provenance(["make", "bench-suite"])
    row = measure(now["code"], now["date"])
    frame = record_rows("bench-suite", row, COLUMNS, "The default test suite (`make test`)",
                        "Seconds on each row's machine: the whole command, and pytest's own count.", now)
    print(frame.to_string(index=False))
    return 0 if row["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
