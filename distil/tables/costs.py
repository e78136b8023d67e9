"""What a recorded run cost, with each artifact it read apart, so a set of runs counts every build once.

A run's `seconds` (its metrics.json) hold what it built, a fine-tuned teacher or a pre-trained student,
and nothing for what it read from the cache. So a sum of runs counts a build only where a run of the set
happened to build it: not at all where `distil pretrain`, or a run of another table, did. Here a run's
cost is its own seconds without its builds, and each artifact it read is a cost of its own, under the
artifact's key, at the seconds its build recorded (its manifest, copied into the run's metrics). Summed
over a dict keyed this way, each build counts once, whoever built it.

Runs recorded before they kept a pre-trained student's build seconds give that artifact None: its build
counts inside a run of the set that built it, and is otherwise unknown (the pages count such artifacts).
"""

from __future__ import annotations

TEACHER, PRETRAINED = "teacher", "pretrained"  # a run's phases (metrics.json `phases`) that build them
BUILT_STARTS = ("pretrained/", "agnostic/")  # a start this project builds (not a downloaded checkpoint)


def run_costs(metrics: dict) -> tuple[float | None, dict[str, float | None]]:
    """(the run's own seconds without the builds it did, None where it has no seconds; each artifact it
    read: key -> its build's seconds, None where not recorded)."""
    seconds = metrics.get("seconds")
    if not isinstance(seconds, int | float):
        return None, {}
    own, builds = float(seconds), {}
    phases = metrics.get("phases") or {}
    for key, built_here, build_seconds, phase in artifacts_read(metrics):
        builds[key] = build_seconds
        if built_here and build_seconds is not None:
            # what this run spent on it (a build resumed here took less than its whole), else the whole
            own -= phases.get(phase, build_seconds)
    return max(own, 0.0), builds


def artifacts_read(metrics: dict) -> list[tuple[str, bool, float | None, str]]:
    """(artifact key, whether this run built it, its build's recorded seconds, the phase that built it)."""
    read = []
    artifacts = metrics.get("artifacts") or {}
    if teacher := artifacts.get("teacher"):
        finetune = (metrics.get("teacher") or {}).get("finetune") or {}
        read.append((f"teacher/{teacher}", artifacts.get("teacher_reused") is False, finetune.get("seconds"),
                     TEACHER))
    student = metrics.get("student")
    start = student.get("pretrained") if isinstance(student, dict) else None
    if start and str(start.get("source")).startswith(BUILT_STARTS):  # Turc's masked LM, Wu's SRA
        read.append((start["source"], start.get("reused") is False, start.get("seconds"), PRETRAINED))
    return read
