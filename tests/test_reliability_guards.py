"""Issue 13, point 3: guards against silent wrong results. A diverged teacher is never cached, a
teacher no better than the majority class stops the run unless allowed, a student that learned
nothing is flagged in metrics.json and the tables, and dev/test texts are kept out of the
transfer set."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from distil.errors import DistilError
from distil.run.flags import data_warnings, student_warnings
from distil.run.pipeline import prepare_data
from distil.store.artifacts import ArtifactStore
from distil.tables.report import collect
from distil.tasks import make_task
from distil.teacher import cache, ensure_targets, ensure_teacher, load_finetuned
from distil.teacher.finetune import check_finite_weights
from tests.conftest import task_data_of
from tests.test_cli import distil_in_process

TOY = Path(__file__).resolve().parent.parent / "distil" / "resources" / "toy"


def fine_tune(cfg, task=None):
    task = task or make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    return ensure_teacher(cfg.teacher, task, data, prepared, ArtifactStore(cfg.paths.cache), cfg.seed, True)


def cache_entries(cache: Path, kind: str) -> list[str]:
    return sorted(p.name for p in (cache / kind).glob("*")) if (cache / kind).exists() else []


# --- a diverged teacher is never cached ---------------------------------------------------------

def test_teacher_loss_going_nan_fails_naming_the_step_and_caches_nothing(smoke_cfg):
    cfg = smoke_cfg()
    task = make_task(cfg.dataset)
    training_calls, loss = [], task.teacher_loss

    def nan_from_the_third_step(logits, labels):
        value = loss(logits, labels)
        if logits.requires_grad:  # training steps only, not the dev loss
            training_calls.append(1)
            if len(training_calls) >= 3:
                return value * float("nan")
        return value
    task.teacher_loss = nan_from_the_third_step
    with pytest.raises(DistilError) as error:
        fine_tune(cfg, task)
    assert str(error.value) == ("teacher fine-tuning diverged at step 3 (loss nan); "
                                "lower teacher.finetune.lr (now 0.001)")
    cache = Path(cfg.paths.cache)
    assert cache_entries(cache, "teachers") == [] and cache_entries(cache, "tmp") == []


def test_non_finite_weights_are_refused():
    model = torch.nn.Linear(2, 2)
    check_finite_weights(model, 7, "teacher.finetune.lr (now 0.001)")  # finite: nothing happens
    with torch.no_grad():
        model.weight[0, 1] = float("inf")
    with pytest.raises(DistilError) as error:
        check_finite_weights(model, 7, "teacher.finetune.lr (now 0.001)")
    assert str(error.value) == ("teacher fine-tuning diverged: weight is not finite after step 7; "
                                "lower teacher.finetune.lr (now 0.001)")


def test_absurd_teacher_lr_fails_in_one_line_and_caches_nothing(tmp_path, monkeypatch, capsys):
    """The issue's case: teacher.finetune.lr=1e3 gave dev logits beyond float16, cached as inf and reused."""
    code, _, err = distil_in_process(["debug=smoke", "teacher.finetune.lr=1e3", "trainer.epochs=1"],
                                     tmp_path, monkeypatch, capsys)
    message = ("teacher fine-tuning diverged at step 2 (dev logits beyond float16's range); "
               "lower teacher.finetune.lr (now 1000)")
    assert code == 2 and err.strip().splitlines()[-1] == f"distil: error: {message}"
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["status"] == f"failed: {message}"
    cache = tmp_path / "outputs" / "cache"
    assert [cache_entries(cache, kind) for kind in ("teachers", "targets", "tmp")] == [[], [], []]


def test_the_target_cache_refuses_non_finite_shards(smoke_cfg, monkeypatch):
    """A teacher whose outputs overflow float16 anyway (a hidden layer): the targets are not cached."""
    cfg = smoke_cfg()
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    store = ArtifactStore(cfg.paths.cache)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, True)
    compute = cache.compute_shard

    def overflowing(*args, **kwargs):
        tensors = compute(*args, **kwargs)
        tensors["hidden"] = tensors["hidden"].clone()  # built under inference mode
        tensors["hidden"][0, 0] = float("inf")
        return tensors
    monkeypatch.setattr(cache, "compute_shard", overflowing)
    with pytest.raises(DistilError) as error:
        ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1,
                       lambda: load_finetuned(teacher.path, task))
    assert str(error.value) == ("the teacher's hidden on the labeled split (examples 0-23) are not finite (nan, or "
                                "beyond float16's range): the teacher diverged; lower teacher.finetune.lr (now 0.001)")
    assert cache_entries(Path(cfg.paths.cache), "targets") == [] and cache_entries(Path(cfg.paths.cache), "tmp") == []


# --- a weak teacher fails the run unless allowed ------------------------------------------------

WEAK = ("the fine-tuned teacher is no better than the majority class on dev (accuracy 0.3333 vs 0.3333): "
        "the student would learn nothing from it; give it more labels or steps (dataset.split.*, "
        "teacher.finetune.min_steps), a better teacher.finetune.lr (now 0.001), or set "
        "teacher.allow_weak=true to go on anyway")


def test_weak_teacher_fails_unless_allowed_also_when_reused_from_the_cache(smoke_cfg):
    allowed = fine_tune(smoke_cfg())  # debug=smoke allows the tiny random teacher, which stays at chance
    assert not allowed.reused and "no better than" in allowed.info["warning"]
    with pytest.raises(DistilError) as error:
        fine_tune(smoke_cfg("teacher.allow_weak=false"))
    assert str(error.value) == WEAK


def test_weak_teacher_stops_the_run_before_any_student(smoke_cfg, tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["debug=smoke", "teacher.allow_weak=false"], tmp_path, monkeypatch, capsys)
    assert code == 2 and err.strip().splitlines()[-1] == f"distil: error: {WEAK}"
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    assert not (run_dir / "student").exists()


# --- flags on a student that learned nothing ----------------------------------------------------

UNTRAINED = "student is its untrained initialisation (no step beat epoch 0 on dev)"


def test_untrained_student_is_flagged_in_metrics_the_table_and_the_report(tmp_path, monkeypatch, capsys):
    # 1e-12 moves no prediction: every epoch scores what epoch 0 did, and selection keeps epoch 0
    code, out, err = distil_in_process(["debug=smoke", "schedule=hard", "trainer.epochs=1", "trainer.lr=1e-12"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics_file = next((tmp_path / "outputs" / "runs").rglob("metrics.json"))
    metrics = json.loads(metrics_file.read_text())
    assert metrics["status"] == "ok"
    assert [s["best_epoch"] for s in metrics["student"]["stages"]] == [0]
    assert metrics["warnings"] == [
        "student predicts one class on dev",
        "student no better than the majority class on dev (accuracy 33.33 vs 33.33)",
        UNTRAINED,
    ]
    assert all(f"warning: {w}" in " ".join(out.split()) for w in metrics["warnings"])
    table = collect(metrics_file.parent.parent)
    assert list(table["warnings"]) == ["; ".join(metrics["warnings"])]


def test_a_learning_student_has_no_warnings(tmp_path, monkeypatch, capsys):
    code, out, err = distil_in_process(["debug=smoke", "schedule=d1"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["warnings"] == [] and "warning:" not in out


def record(name="S1", step="all", best_epoch=1, **extra):
    return {"name": name, "step": step, "best_epoch": best_epoch, **extra}


def test_student_warnings_read_every_stage_record():
    scores = {"dev": {"accuracy": 0.5}}
    assert student_warnings([record(), record("S2")], scores, "accuracy", 0.4, 2) == []
    assert student_warnings([record(best_epoch=0), record("S2", best_epoch=0)], scores, "accuracy", 0.4, 2) == [
        UNTRAINED]
    assert student_warnings([record(best_epoch=0), record("S2")], scores, "accuracy", 0.4, 2) == []
    stopped = [record(), record("S2", step="encoder", nonfinite={"epoch": 2, "step": 5})]
    assert student_warnings(stopped, scores, "accuracy", 0.4, 2) == [
        "stage S2 step encoder stopped on a non-finite loss"]
    # one student per language (XtremeDistil D0): each is checked, named by its language
    per_language = {"aa": [record(best_epoch=0)], "bb": [record()]}
    assert student_warnings(per_language, scores, "accuracy", 0.4, 2) == [f"language aa: {UNTRAINED}"]
    assert student_warnings([record()], scores, "accuracy", None, None) == []  # regression: no classes


def test_evaluation_texts_in_the_labeled_set_are_a_warning():
    overlap = {"dev": {"labeled": 3, "transfer": 7}, "test": {"labeled": 2, "transfer": 28},
               "test_mismatched": {"labeled": 0, "transfer": 1}, "transfer_dropped": 36, "match": "..."}
    assert data_warnings(overlap) == ["3 dev, 2 test examples also in the labeled set"]
    assert data_warnings({"dev": {"labeled": 0, "transfer": 4}, "transfer_dropped": 4}) == []


# --- dev/test texts are kept out of the transfer set -------------------------------------------

def planted_toy(root: Path) -> tuple[Path, list[str]]:
    """The toy dataset with three dev texts and one test text copied into train, spacing changed."""
    shutil.copytree(TOY, root)
    dev = [line.split("\t") for line in (root / "dev.tsv").read_text().splitlines()[1:]]
    test = [line.split("\t") for line in (root / "test.tsv").read_text().splitlines()[1:]]
    planted = [dev[0], dev[1], dev[2], test[0]]
    with (root / "train.tsv").open("a") as train:
        for text, label in planted:
            train.write(f"  {text.replace(' ', '   ')}\t{label}\n")
    return root, [text for text, _ in planted]


@pytest.mark.parametrize("drop", [True, False])
def test_dev_and_test_texts_are_counted_and_dropped_from_the_transfer_set(smoke_cfg, tmp_path, drop):
    root, planted = planted_toy(tmp_path / "toy")
    cfg = smoke_cfg(f"dataset.path={root}", f"dataset.split.drop_eval_overlap={str(drop).lower()}")
    data = task_data_of(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed)
    labeled = {" ".join(t.split()) for t in data.splits["labeled"]["text"]}
    in_labeled = [t in labeled for t in planted]
    transfer = {" ".join(t.split()) for t in data.splits["transfer"]["text"]}
    assert in_labeled.count(True) >= 1 and in_labeled.count(False) >= 1  # seed 1 puts them on both sides
    expected = {
        "dev": {"labeled": in_labeled[:3].count(True), "transfer": in_labeled[:3].count(False)},
        "test": {"labeled": in_labeled[3:].count(True), "transfer": in_labeled[3:].count(False)},
        "transfer_dropped": in_labeled.count(False) if drop else 0,
        "match": "exact text after collapsing whitespace, case kept",
    }
    assert data.overlap == expected
    assert len(data.splits["labeled"]) + len(data.splits["transfer"]) == 64 - expected["transfer_dropped"]
    assert any(t in transfer for t in planted) is not drop


def test_a_pair_overlaps_only_when_both_texts_match(smoke_cfg, tmp_path):
    root = tmp_path / "pair"
    shutil.copytree(TOY.parent / "toy-pair", root)
    first, second, label = (root / "dev.tsv").read_text().splitlines()[1].split("\t")
    with (root / "train.tsv").open("a") as train:
        train.write(f"{first}\t{second} again\t{label}\n")  # the same first text only: no overlap
    cfg = smoke_cfg("dataset=toy-pair", f"dataset.path={root}")
    data = task_data_of(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed)
    assert data.overlap["dev"] == {"labeled": 0, "transfer": 0} and data.overlap["transfer_dropped"] == 0
