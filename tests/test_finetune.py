"""Teacher fine-tuning as the papers and BERT practice do it: a step budget
with warm-up and linear decay, early stopping that follows the dev loss while the dev metric is
flat, a warning for a teacher no better than the majority baseline, and Tang's learning-rate grid."""

import json
import logging

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

import distil.teacher.finetune as finetune
from distil.errors import DistilError
from distil.run.pipeline import prepare_data
from distil.store.artifacts import ArtifactStore
from distil.tasks import make_task
from distil.teacher import ensure_teacher
from tests.conftest import compose_config
from tests.test_cli import distil_in_process


def fine_tune(cfg):
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, ArtifactStore(cfg.paths.cache), cfg.seed, True)
    return teacher, prepared


@pytest.fixture
def optimiser_steps(monkeypatch):
    """The learning rate of every optimiser step the teacher takes, in order."""
    rates, step = [], torch.optim.AdamW.step

    def counting_step(self, *args, **kwargs):
        rates.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)
    monkeypatch.setattr(torch.optim.AdamW, "step", counting_step)
    return rates


TINY_SET = ("dataset=toy-ner", "dataset.split.labeled_per_language=4", "teacher.finetune.batch_size=4")
ALWAYS = "teacher.finetune.min_steps_while=always"  # the tables' recipe: min_steps holds whatever dev says


@pytest.mark.parametrize("majority, steps", [(0.0, 6), (1.0, 20)], ids=["beats the majority", "at the majority"])
def test_at_majority_a_teacher_that_learned_stops_on_dev_and_one_that_did_not_keeps_min_steps(
        smoke_cfg, optimiser_steps, monkeypatch, majority, steps):
    """The default job's rule: min_steps holds only while the teacher is no better than the majority
    class on dev. Above it (a majority score of 0), dev stops it, evaluated every pass: patience 1 after
    its best pass; at it (a majority score of 1, which nothing beats: a NER teacher at F1 0), it trains
    the whole 20-step budget as before."""
    monkeypatch.setattr(finetune, "majority_dev_score", lambda *args: majority)
    cfg = smoke_cfg(*TINY_SET, "teacher.finetune.epochs=1", "teacher.finetune.min_steps=20",
                    "teacher.finetune.eval_every_steps=5", "teacher.finetune.patience=1", "teacher.finetune.lr=1e-3",
                    "teacher.finetune.min_steps_while=at_majority")
    teacher, _ = fine_tune(cfg)
    history = teacher.info["history"]
    assert [h["step"] for h in history] == list(range(2, steps + 1, 2))  # every pass of 2 steps, not every 6
    assert len(optimiser_steps) == teacher.info["steps"] == steps
    if majority == 0.0:  # stopped one pass after its best, long before min_steps
        assert teacher.info["best_step"] == steps - 2


def test_min_steps_trains_a_tiny_labeled_set_for_the_whole_budget_with_warmup_and_linear_decay(
        smoke_cfg, optimiser_steps):
    # 8 labeled sentences in batches of 4: 2 steps a pass, so 1 epoch would be 2 steps; min_steps=20
    # makes it 10 passes, and the schedule spans those 20 steps: warm-up over 10% (2 steps) from 0
    # to the peak, then linear decay to 0 (Devlin et al. A.3; get_linear_schedule_with_warmup).
    cfg = smoke_cfg(*TINY_SET, "teacher.finetune.epochs=1", "teacher.finetune.min_steps=20",
                    "teacher.finetune.patience=1", "teacher.finetune.lr=1e-3", ALWAYS)
    teacher, prepared = fine_tune(cfg)
    assert len(prepared["labeled"]) == 8
    expected = [1e-3 * k / 2 for k in range(2)] + [1e-3 * (20 - k) / 18 for k in range(2, 20)]
    assert optimiser_steps == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert teacher.info["steps"] == 20 and teacher.info["epochs_run"] == 10


def test_at_majority_warms_up_over_the_planned_epochs_and_decays_over_the_whole_budget(
        smoke_cfg, optimiser_steps, monkeypatch):
    """2 planned epochs of 2 steps, stretched to 20 steps by min_steps (the teacher stays at the majority
    class, so it trains them all): the warm-up is half of the 4 planned steps, not half of the 20, and the
    decay still reaches 0 at step 20."""
    monkeypatch.setattr(finetune, "majority_dev_score", lambda *args: 1.0)
    cfg = smoke_cfg(*TINY_SET, "teacher.finetune.epochs=2", "teacher.finetune.min_steps=20",
                    "teacher.finetune.warmup_fraction=0.5", "teacher.finetune.lr=1e-3",
                    "teacher.finetune.min_steps_while=at_majority")
    fine_tune(cfg)
    expected = [1e-3 * k / 2 for k in range(2)] + [1e-3 * (20 - k) / 18 for k in range(2, 20)]
    assert optimiser_steps == pytest.approx(expected, rel=1e-9, abs=1e-12)


def test_max_steps_cuts_the_budget_mid_pass(smoke_cfg, optimiser_steps):
    cfg = smoke_cfg(*TINY_SET, "teacher.finetune.epochs=5", "teacher.finetune.max_steps=7",
                    "teacher.finetune.patience=5")
    teacher, _ = fine_tune(cfg)
    assert len(optimiser_steps) == 7 and teacher.info["steps"] == 7  # 3 passes of 2, then 1 step of the 4th
    assert teacher.info["epochs_run"] == 4


def test_eval_every_steps_evaluates_after_whole_passes(smoke_cfg, optimiser_steps):
    cfg = smoke_cfg(*TINY_SET, "teacher.finetune.epochs=1", "teacher.finetune.min_steps=20",
                    "teacher.finetune.eval_every_steps=5", "teacher.finetune.patience=1", ALWAYS)
    teacher, _ = fine_tune(cfg)
    # rounds of 3 passes (6 steps, the first pass end at >= 5 steps): 6 + 6 + 6 + 2 steps, 4 dev evaluations
    assert len(optimiser_steps) == 20 and [h["step"] for h in teacher.info["history"]] == [6, 12, 18, 20]


def test_early_stopping_follows_dev_loss_while_the_metric_is_flat(smoke_cfg):
    """The issue's failure: F1 stuck at 0 stopped the teacher after 2 epochs (patience 1) although
    it was still learning. A flat metric with a falling dev loss is an improvement."""
    cfg = smoke_cfg("dataset=toy-ner", "teacher.finetune.epochs=5", "teacher.finetune.patience=1",
                    "teacher.finetune.lr=3e-5")
    teacher, _ = fine_tune(cfg)
    history = teacher.info["history"]
    # at this rate the tiny teacher's F1 does not move from its random start on toy-ner ...
    assert [h["dev"] for h in history] == pytest.approx([0.2341] * 5, abs=1e-4)
    losses = [h["dev_loss"] for h in history]
    assert len(history) == 5 and losses == sorted(losses, reverse=True)  # the loss falls every epoch
    assert teacher.info["best_epoch"] == 5 and teacher.info["dev_loss"] == losses[-1]


def test_selection_prefers_the_metric_then_the_lower_dev_loss():
    chosen = finetune.DevSelection
    assert chosen(0.5, 2.0) > chosen(0.4, 0.1)  # the metric first
    assert chosen(0.0, 0.9) > chosen(0.0, 1.0)  # a flat metric: the lower dev loss
    assert not chosen(0.0, 1.0) > chosen(0.0, 1.0)
    assert chosen(0.0, 5.0) > float("-inf")


def constant_teacher(predict, names):
    """A stand-in for the fine-tuned teacher's dev logits: one-hot on predict(gold labels)."""
    def one_hot(labels):
        return torch.nn.functional.one_hot(torch.as_tensor(predict(labels), dtype=torch.long), len(names) + 1).float()

    def logits(model, task, split, pad_id, batch_size):
        if task.per_token:
            return [one_hot(np.asarray(split.labels[i]))[:, :task.num_outputs(names)] for i in range(len(split))]
        return one_hot(split.labels.numpy())[:, :task.num_outputs(names)]
    return logits


def always_first_class(labels):
    return np.zeros_like(labels)


def gold(labels):
    return np.where(labels >= 0, labels, 0)


@pytest.mark.parametrize("dataset", ["toy", "toy-ner"])
@pytest.mark.parametrize("predict, warns", [(always_first_class, True), (gold, False)])
def test_warning_for_a_teacher_no_better_than_the_majority_baseline(smoke_cfg, monkeypatch, caplog, dataset,
                                                                    predict, warns):
    # toy: class 0 ('negative') is the dev majority; toy-ner: tag 0 is 'O'
    cfg = smoke_cfg(f"dataset={dataset}", "teacher.finetune.epochs=1")
    names = list(cfg.dataset.labels) if cfg.dataset.labels else ["negative", "positive"]
    monkeypatch.setattr(finetune, "teacher_split_logits", constant_teacher(predict, names))
    with caplog.at_level(logging.WARNING):
        teacher, _ = fine_tune(cfg)
    warning = teacher.info.get("warning")
    if warns:
        assert warning and "no better than" in warning and "majority" in warning
        assert teacher.info["dev_score"] == teacher.info["baseline_dev_score"]
        assert warning in caplog.text
    else:
        assert warning is None and "no better than" not in caplog.text


def test_warning_reaches_metrics_json_and_the_log(tmp_path, monkeypatch, capsys):
    names = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
    monkeypatch.setattr(finetune, "teacher_split_logits", constant_teacher(always_first_class, names))
    code, _, err = distil_in_process(["debug=smoke", "dataset=toy-ner", "student=bilstm-tagger",
                                      "trainer.epochs=1", "teacher.finetune.epochs=1"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    warning = json.loads((run_dir / "metrics.json").read_text())["teacher"]["finetune"]["warning"]
    assert "f1 0.0000 vs 0.0000" in warning and "the student would learn nothing" in warning
    assert warning in (run_dir / "distil.log").read_text()


def test_lr_grid_keeps_the_best_learning_rate_on_dev(smoke_cfg):
    grid = smoke_cfg("teacher.finetune.epochs=2", "teacher.finetune.lr_grid=[1e-5,3e-3]")
    teacher, _ = fine_tune(grid)
    runs = teacher.info["lr_grid"]
    assert [r["lr"] for r in runs] == [1e-5, 3e-3]
    best = max(runs, key=lambda r: (r["dev"], -r["dev_loss"]))
    assert teacher.info["lr"] == best["lr"] and teacher.info["dev_score"] == best["dev"]
    # the saved teacher is the one a single run at the chosen rate gives
    single = smoke_cfg("teacher.finetune.epochs=2", f"teacher.finetune.lr={best['lr']}",
                       f"paths.cache={grid.paths.cache}-single")
    alone, _ = fine_tune(single)
    ours, theirs = (load_file(t.path / "model.safetensors") for t in (teacher, alone))
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)
    assert not list(teacher.path.glob("finetune-*"))  # no checkpoints left behind


def test_lr_grid_killed_after_its_first_rate_resumes_with_the_second(smoke_cfg, monkeypatch):
    cfg = smoke_cfg("teacher.finetune.epochs=1", "teacher.finetune.lr_grid=[1e-5,3e-3]")
    reference, _ = fine_tune(smoke_cfg("teacher.finetune.epochs=1", "teacher.finetune.lr_grid=[1e-5,3e-3]",
                                       f"paths.cache={cfg.paths.cache}-reference"))
    trained, train_once = [], finetune._train_once

    def die_on_second(*args, **kwargs):
        trained.append(kwargs["lr"])
        if len(trained) == 2:
            raise KeyboardInterrupt
        return train_once(*args, **kwargs)
    monkeypatch.setattr(finetune, "_train_once", die_on_second)
    with pytest.raises(KeyboardInterrupt):
        fine_tune(cfg)
    monkeypatch.setattr(finetune, "_train_once", lambda *a, **k: trained.append(k["lr"]) or train_once(*a, **k))
    resumed, _ = fine_tune(cfg)
    assert trained == [1e-5, 3e-3, 3e-3]  # the first rate is not trained again
    assert resumed.info["lr_grid"] == reference.info["lr_grid"]
    ours, theirs = (load_file(t.path / "model.safetensors") for t in (resumed, reference))
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


@pytest.mark.parametrize("override, named", [
    ("teacher.finetune.min_steps=-1", "teacher.finetune.min_steps"),
    ("teacher.finetune.max_steps=0", "teacher.finetune.max_steps"),
    ("teacher.finetune.lr_grid=[]", "teacher.finetune.lr_grid"),
    ("teacher.finetune.eval_every_steps=-5", "teacher.finetune.eval_every_steps"),
    ("teacher.finetune.epochs=0", "teacher.finetune.epochs"),
])
def test_bad_budget_is_one_clear_error_before_training(smoke_cfg, optimiser_steps, override, named):
    with pytest.raises(DistilError, match=named) as error:
        fine_tune(smoke_cfg(override))
    assert "\n" not in str(error.value) and not optimiser_steps


@pytest.mark.parametrize("teacher, preset, expected", [
    ("minilm", None, {"lr": 1e-4, "batch_size": 16, "min_steps": 300, "lr_grid": None}),
    ("minilm", "tang", {"lr_grid": [2e-5, 3e-5, 4e-5, 5e-5], "batch_size": 16}),
    ("mbert", None, {"lr": 3e-5, "batch_size": 32, "epochs": 3, "lr_grid": None}),
    ("bert-large", "tang", {"lr_grid": [2e-5, 3e-5, 4e-5, 5e-5]}),
])
def test_paper_presets(teacher, preset, expected):
    overrides = [f"teacher={teacher}"] + ([f"teacher/finetune={preset}"] if preset else [])
    chosen = compose_config(*overrides).teacher.finetune
    assert {k: (list(chosen[k]) if k == "lr_grid" and chosen[k] is not None else chosen[k])
            for k in expected} == expected
