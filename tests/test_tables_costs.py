"""distil.tables.costs: a run's own seconds apart from the builds it read, each build counted once."""

from __future__ import annotations

import pytest

from distil.tables.costs import run_costs
from distil.tables.findings import Judgement, Reading
from distil.tables.preset import Finding


def metrics(seconds: float, teacher_built: bool, start: dict | None = None, phases: dict | None = None) -> dict:
    record = {"seconds": seconds, "artifacts": {"teacher": "minilm-t1", "teacher_reused": not teacher_built},
              "teacher": {"finetune": {"seconds": 300.0}}, "student": {"test": {"accuracy": 0.8}}}
    if start is not None:
        record["student"]["pretrained"] = start
    if phases is not None:
        record["phases"] = phases
    return record


def test_a_run_that_built_its_teacher_gives_the_build_to_the_teachers_key():
    # the phase this run spent on it, where recorded; else the build's own seconds
    assert run_costs(metrics(1000.0, True, phases={"teacher": 250.0})) == (750.0, {"teacher/minilm-t1": 300.0})
    assert run_costs(metrics(1000.0, True)) == (700.0, {"teacher/minilm-t1": 300.0})
    # read from the cache: the run keeps its seconds, the teacher still costs its build
    assert run_costs(metrics(1000.0, False)) == (1000.0, {"teacher/minilm-t1": 300.0})


def test_a_pre_trained_student_counts_its_build_and_a_resumed_build_only_its_share_here():
    built = {"source": "pretrained/bert-L2-H128-abc", "reused": False, "seconds": 5000.0}
    own, builds = run_costs(metrics(2000.0, False, built, phases={"pretrained": 1500.0}))
    assert (own, builds["pretrained/bert-L2-H128-abc"]) == (500.0, 5000.0)
    read = {"source": "agnostic/minilm-def", "reused": True, "seconds": 3800.0}
    assert run_costs(metrics(90.0, False, read))[1]["agnostic/minilm-def"] == 3800.0
    # recorded before runs kept a build's seconds: unknown, and the run's seconds stay whole
    old = {"source": "pretrained/bert-L2-H128-old", "steps": 2000}
    assert run_costs(metrics(600.0, False, old)) == (600.0, {"teacher/minilm-t1": 300.0,
                                                             "pretrained/bert-L2-H128-old": None})
    # a downloaded checkpoint is no build
    hub = {"source": "google/bert_uncased_L-2_H-128_A-2"}
    assert "google/bert_uncased_L-2_H-128_A-2" not in run_costs(metrics(60.0, False, hub))[1]


def test_a_finding_counts_a_build_once_whoever_built_it():
    """Two runs read one teacher: the one that built it (1,000 s, 300 of them the teacher) and one that
    read it (400 s): 700 + 400 + 300 s, not 1,000 + 400, and a pre-trained student `distil pretrain`
    built (3,000 s) counts though no run of the finding built it."""
    a = run_costs(metrics(1000.0, True))
    b = run_costs(metrics(400.0, False, {"source": "agnostic/minilm-x", "reused": True, "seconds": 3000.0}))
    reading = Reading(group=None, paper=(None, None), ours=(None, None), seeds=(1, 1), difference=None,
                      verdict="not judged", sides=({"a": a[0]}, {"b": b[0]}), builds={**a[1], **b[1]})
    judgement = Judgement(Finding(claim="x", better="b", worse="a"), "cpu", [reading])
    assert judgement.minutes == pytest.approx((700 + 400 + 300 + 3000) / 60)
    assert reading.paces == (700.0, 400.0)  # a new seed's pace leaves the builds out
