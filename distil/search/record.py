"""A finished search in the tracked results, `results/search/<preset>/` (`distil search PRESET --record`):

  trials.csv, pareto.csv, pareto.png   the search directory's own (distil.search.report)
  search.json                          how it was measured: the command, machine, code version and date
                                       (distil.common.provenance), the wall time of this command and of
                                       every command the study ran, the trials complete / pruned before
                                       training / failed, the limits, the trial count, the space's
                                       families, the reference cell, the metric, the best trial, the
                                       frontier table it compares with, and each file's digest
  study.json                           the study's trials, so a search goes on where outputs/ is gone
                                       (distil.search.saved_study)

outputs/ is not in git: without this a search's hours leave nothing a fresh clone can show. The results
page (distil.search.page, `make results`) is written from this alone. The directory is replaced whole:
a reader sees the old record or the new one. The root is the ledger's (distil.tables.ledger).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from distil.common.atomic import write_json_atomic
from distil.common.provenance import provenance
from distil.search.saved_study import SAVED, write_saved
from distil.tables import ledger

if TYPE_CHECKING:  # the study imports torch; the results page reads RECORD and FILES without it
    from distil.search.study import Context

RECORD = "search.json"
FILES = ("trials.csv", "pareto.csv", "pareto.png")


def record_dir(preset: str, root: Path | None = None) -> Path:
    return (root or ledger.results_root()) / "search" / preset


def record_search(study, ctx: Context, best: dict | None, wall: dict, command: list[str],
                  root: Path | None = None) -> Path:
    """Copy the search directory's report into the record, with its provenance; the record's folder.
    `wall`: {"wall_s": this command's seconds, "wall_s_total": the study's over `invocations` commands}."""
    from distil.search.space import reference_cell
    from distil.search.study import counts, trial_seconds

    preset = ctx.preset
    trials = study.get_trials(deepcopy=False)
    by_state = counts(trials)
    metric = next((t.user_attrs["metric"] for t in trials if "metric" in t.user_attrs), None)
    folder = record_dir(preset.name, root)
    tmp = folder.with_name(folder.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(ctx.search_dir / name, tmp / name)
    write_saved(study, tmp / SAVED)
    write_json_atomic(tmp / RECORD, {
        **provenance(command), "preset": preset.name, "description": preset.description,
        "study": preset.study_name, "frontier": preset.frontier, "base": preset.base, "seed": preset.seed,
        "sampler": preset.sampler, "latency": preset.latency, "threads": preset.threads, "limits": preset.limits,
        "trials": preset.trials, "families": [family.name for family in preset.families],
        "reference": {"overrides": preset.reference, "cell": reference_cell(preset).key, "ms": ctx.reference_median},
        "metric": metric, "complete": by_state.get("complete", 0), "pruned": by_state.get("pruned", 0),
        "failed": by_state.get("fail", 0), "killed": by_state.get("killed", 0), **wall,
        "trial_s": trial_seconds(trials), "best": best,
        "sha256": {name: ledger.file_digest(tmp / name) for name in FILES}})
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    return folder
