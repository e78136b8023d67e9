"""A study as JSON in its record (`results/search/<preset>/study.json`), so a recorded search goes on
where outputs/ is gone: a fresh clone, or a new machine for the next few hours of a long search.

outputs/ is not in git, and a search of hundreds of CPU minutes outlives a session. The record keeps
every ended trial (its choices, objectives and attributes, with its start and end) and the study's own
wall time; `distil search` loads them into an empty study of the same name before asking for a trial.
The sampler then reads them as it read them where they ran, and `--trials N` goes on from there. A
trial's cell is not in the record (weights are not committed): the report trains the Pareto set's
cells again where they are missing (distil.search.report), content-keyed, at the trial's seed.
"""

from __future__ import annotations

import json
from pathlib import Path

SAVED = "study.json"
FORMAT = 1


def saved_trials(study) -> dict:
    """Every trial that is not running (ended or queued), and the study's attributes, as JSON."""
    from optuna.distributions import distribution_to_json
    from optuna.trial import TrialState

    def when(moment) -> str | None:
        return None if moment is None else moment.isoformat()

    trials = [{"number": t.number, "state": t.state.name, "values": t.values, "params": t.params,
               "distributions": {name: distribution_to_json(d) for name, d in t.distributions.items()},
               "user_attrs": t.user_attrs, "system_attrs": t.system_attrs,
               "start": when(t.datetime_start), "complete": when(t.datetime_complete)}
              for t in study.get_trials(deepcopy=False) if t.state != TrialState.RUNNING]
    return {"format": FORMAT, "study": study.study_name, "user_attrs": study.user_attrs, "trials": trials}


def write_saved(study, path: Path) -> None:
    path.write_text(json.dumps(saved_trials(study), indent=1, sort_keys=True) + "\n")


def restore(study, path: Path) -> int:
    """Load a record's trials into `study` when it has none and the record is of the same study (same
    preset content); how many were loaded (0: nothing to load)."""
    import datetime

    from optuna.distributions import json_to_distribution
    from optuna.trial import TrialState, create_trial

    if study.get_trials(deepcopy=False) or not path.is_file():
        return 0
    saved = json.loads(path.read_text())
    if saved.get("format") != FORMAT or saved.get("study") != study.study_name:
        return 0
    for entry in sorted(saved["trials"], key=lambda e: e["number"]):
        state = TrialState[entry["state"]]
        trial = create_trial(state=state, values=entry["values"] if state == TrialState.COMPLETE else None,
                             params=entry["params"],
                             distributions={name: json_to_distribution(d)
                                            for name, d in entry["distributions"].items()},
                             user_attrs=entry["user_attrs"], system_attrs=entry["system_attrs"])
        # a trial's own time (trial_seconds) is its end minus its start, as where it ran
        trial.datetime_start = entry["start"] and datetime.datetime.fromisoformat(entry["start"])
        trial.datetime_complete = entry["complete"] and datetime.datetime.fromisoformat(entry["complete"])
        study.add_trial(trial)
    for key, value in saved["user_attrs"].items():
        study.set_user_attr(key, value)
    return len(saved["trials"])
