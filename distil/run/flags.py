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

from distil.data.prepared import PreparedSplit
from distil.data.split import TaskData
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
