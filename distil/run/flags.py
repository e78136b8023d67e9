"""Warnings about a finished run that `status: ok` would otherwise hide.

A run can end without error and still be worthless: a student that predicts one class, scores no
better than always predicting the majority class, or is its own untrained initialisation (every
step of every stage kept epoch 0: on four held-out NER languages D0-S and D1 both did), a stage
stopped on a non-finite loss, or dev/test texts that also sit in the labeled set. Each is one
short string in metrics.json "warnings", printed under the run's table and a column of
distil-report's table; the status stays "ok".
"""

from __future__ import annotations

import torch

from distil.data.cut import readable_chars
from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
from distil.run.display import percent as _percent
from distil.tasks import Task
from distil.teacher.finetune import majority_dev_score

UNTRAINED = "student is its untrained initialisation (no step beat epoch 0 on dev)"


def predicted_classes(logits: torch.Tensor | list[torch.Tensor]) -> int:
    """How many distinct classes the argmax of these logits takes ([N, C], or per example [len_i, C])."""
    rows = torch.cat(list(logits)) if isinstance(logits, list) else logits
    return len(torch.unique(rows.argmax(dim=-1))) if len(rows) else 0


def run_warnings(task: Task, data: TaskData, dev: PreparedSplit, student: dict,
                 classes: dict[str | None, int | None]) -> list[str]:
    """Every warning of a run: the data's, then the student's (`classes`: per language, or under
    None, how many classes the final student predicts on dev)."""
    baseline = majority_dev_score(task, dev, data.label_names)
    per_student = classes.get(None) if list(classes) == [None] else classes
    return [*data_warnings(data.overlap),
            *student_warnings(student["stages"], student, task.metric, baseline, per_student)]


def cut_warnings(cut: dict[str, int], max_length: int) -> list[str]:
    """Sentences cut by words before tokenisation (data/cut.py), per split: `cut` holds the non-zero counts."""
    if not cut:
        return []
    counts = ", ".join(f"{name} {count}" for name, count in cut.items())
    return [f"sentences longer than the {readable_chars(max_length):,} characters a model reads at max_length "
            f"{max_length} were cut before tokenisation (the model reads none of their words past the cut, and "
            f"scores them as O): {counts}"]


def data_warnings(overlap: dict) -> list[str]:
    """Evaluation examples also in the labeled set (the transfer set's copies are dropped or counted)."""
    in_labeled = [f"{counts['labeled']} {name}" for name, counts in overlap.items()
                  if isinstance(counts, dict) and counts.get("labeled")]
    return [f"{', '.join(in_labeled)} examples also in the labeled set"] if in_labeled else []


def student_warnings(stages: list[dict] | dict[str, list[dict]], scores: dict, metric: str,
                     baseline: float | None, classes: int | dict[str, int] | None) -> list[str]:
    """The student's flags. `stages` and `classes` are per language for one student per language
    (XtremeDistil D0); `scores` holds the final dev scores."""
    found = []
    if isinstance(classes, dict):
        found += [f"language {lang}: student predicts one class on dev" for lang, n in classes.items() if n == 1]
    elif classes == 1:
        found.append("student predicts one class on dev")
    score = scores["dev"][metric]
    if baseline is not None and not score > baseline:
        found.append(f"student no better than the majority class on dev ({metric} {100 * score:.2f} vs "
                     f"{100 * baseline:.2f})")
    if isinstance(stages, dict):
        return found + [f"language {lang}: {w}" for lang, records in stages.items() for w in stage_warnings(records)]
    return found + stage_warnings(stages)


def stage_warnings(records: list[dict]) -> list[str]:
    """Stages stopped on a non-finite loss (train.fit records "nonfinite"), and an untrained selection."""
    found = [f"stage {r['name']}{'' if r['step'] == 'all' else ' step ' + str(r['step'])} stopped on a "
             f"non-finite loss" for r in records if "nonfinite" in r]
    if records and all(r["best_epoch"] == 0 for r in records):
        found.append(UNTRAINED)
    return found


# --- floors: trivial predictors a useful model must beat (Task.floors) ----------------------------

FLOOR_NAMES = {"majority_class": "the majority class", "mean_predictor": "the mean predictor",
               "all_O": "all-O tagging", "word_lookup": "a word-lookup tagger"}
UNDERFIT_BELOW = 0.8  # a fine-tuned teacher scores near 1 on its own labeled set; below this it is underfit
HALF = 0.5  # a student below half its teacher's test score has learned little of what the teacher knows


def usefulness_warnings(metric: str, floors: dict, teacher: dict, student: dict, student_hint: str) -> list[str]:
    """A teacher or a student below a floor (on dev or a reported split), and a student below half its
    teacher's test score, each with the setting to try. `teacher` and `student` are metrics.json's
    records; `student_hint` names what to change when the student falls short."""
    found = []
    for name, floor in floors.items():
        if below := floor_misses(metric, floor, teacher):
            found.append(f"teacher below {FLOOR_NAMES.get(name, name)} ({below}); {teacher_hint(metric, teacher)}")
    for name, floor in floors.items():
        # the student at or under the majority class on dev's selecting metric is student_warnings' own flag
        skip = {("dev", metric)} if name == "majority_class" else set()
        if below := floor_misses(metric, floor, student, skip):
            found.append(f"student below {FLOOR_NAMES.get(name, name)} ({below}); {student_hint}")
    if kept := kept_share(metric, teacher, student):
        found.append(f"student keeps only {kept} of the teacher's test {metric}; {student_hint}")
    return found


def floor_misses(metric: str, floor: dict, model: dict, skip: set = frozenset()) -> str:
    """Where the model scores under the floor: "test accuracy 64.10 vs 69.10, ..." ('' if nowhere).
    A floor whose score is undefined (the mean predictor's correlation) is beaten by any score above
    its `beat_above`; a model whose own score is undefined (NaN: a constant prediction) beats nothing."""
    misses = []
    for split, scores in floor.items():
        if not isinstance(scores, dict) or not isinstance(model.get(split), dict):
            continue
        for name in dict.fromkeys([metric, "accuracy"]):
            if name not in scores or name not in model[split] or (split, name) in skip:
                continue
            value, bar = model[split][name], scores[name]
            if bar is None:  # undefined floor: the model must score above beat_above
                if not value > floor.get("beat_above", 0.0):
                    misses.append(f"{split} {name} {_pct(value)}, not above {_pct(floor.get('beat_above', 0.0))}")
            elif not value >= bar:
                misses.append(f"{split} {name} {_pct(value)} vs {_pct(bar)}")
    return ", ".join(misses)


def teacher_hint(metric: str, teacher: dict) -> str:
    """Underfit (low on the very examples it was fine-tuned on) or not generalising; decided from the
    teacher's score on its labeled set, which every run computes anyway (metrics.json teacher.labeled)."""
    fitted = teacher.get("labeled", {}).get(metric)
    if fitted is None:
        return "try another teacher or more labeled data"
    if not fitted >= UNDERFIT_BELOW:
        return (f"it scores only {_pct(fitted)} on its own labeled set, so it is underfit: train it longer "
                f"(teacher.finetune.epochs, teacher.finetune.min_steps) or choose another teacher (teacher=...)")
    return (f"it fits its own labeled set ({_pct(fitted)}) but not held-out data: give it more labeled "
            f"examples (dataset.split.labeled_count) or choose another teacher (teacher=...)")


def kept_share(metric: str, teacher: dict, student: dict) -> str:
    """"14.0% (11.40 vs 81.10)" when the student keeps less than half the teacher's test score, else ''."""
    of_teacher, of_student = teacher.get("test", {}).get(metric), student.get("test", {}).get(metric)
    if of_teacher is None or of_student is None or not of_teacher > 0:  # no share of a score at or under 0
        return ""
    if of_student >= HALF * of_teacher:
        return ""
    return f"{100 * of_student / of_teacher:.1f}% ({_pct(of_student)} vs {_pct(of_teacher)})"


def student_hint(task: Task, reads_pairs_apart: bool, student_kind: str) -> str:
    """The settings to try when the student falls short of its teacher or a floor."""
    if task.inputs == "pair" and not reads_pairs_apart:
        return (f"the student '{student_kind}' reads the two texts joined: try student=siamese, which reads "
                f"them apart, or a larger transfer set (transfer_size=...)")
    return "try a larger transfer set (transfer_size=...), more epochs (trainer.epochs=...) or another student"


def _pct(value: float | None) -> str:
    return _percent(value, missing="undefined")  # a floor or score that does not exist reads "undefined"
