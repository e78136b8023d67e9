"""Where and with what a measurement was made: the machine, the code version and the time.

A speed or memory figure means nothing without its machine, and a recorded one (results/bench/) is
read on other machines later: it carries this with it, and the tables print it under the numbers.
"""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """`<cpu model>, <n> cores, <os>`: enough to know whether two measurements are comparable."""
    return f"{cpu_model()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def package_digest(package: Path | None = None) -> str:
    """A digest of the code a run executes: every module and shipped config of the distil package
    (default: this one), by path and content. ~10 ms: cheap enough to take before every cell."""
    import hashlib

    root = package or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".yaml") and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


NOT_CODE = (":(top,exclude)results", ":(top,exclude)docs/results")


def code_version(where: Path | None = None) -> str:
    """The checkout's commit (`+changes` when its tracked files differ from it), or `unknown` outside git.
    The recorded results (results/, and docs/results/ rendered from them) are not the code: a measurement
    writes them, so the next one in the same checkout is still of the commit."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=where, capture_output=True, text=True, check=True).stdout.strip()

    try:
        commit = git("rev-parse", "--short=12", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", ":/", *NOT_CODE)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if dirty else "")


def measured_on(record: dict) -> str:
    """Where a recorded number comes from: "`distil bench demo` on <machine>, <date>, code <commit>"."""
    return f"`{record['command']}` on {record['machine']}, {record['date']}, code {record['code']}"


def provenance(command: list[str]) -> dict:
    """The record of one measurement: its command, machine, code version and UTC time."""
    return {"command": " ".join(command), "machine": machine(), "code": code_version(),
            "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}
