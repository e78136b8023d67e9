"""The real console scripts, in subprocesses: one run, a 2-cell sweep + report, bad input."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

DISTIL = shutil.which("distil") or pytest.skip("distil console script not installed", allow_module_level=True)


def run(args, cwd, check=True, timeout=600):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COLUMNS": "200"}
    result = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


def cache_files(outputs: Path) -> list[Path]:
    return [p for p in (outputs / "cache").rglob("*") if p.is_file()] if outputs.exists() else []


# `distil debug=smoke schedule=d1` (tiny random teacher, toy data, seed 1). The tiny teacher and
# student stay near chance on the toy set in 3 epochs, so losses pin it, not accuracies.
PINNED_SMOKE = {"teacher_dev_loss": 1.09869, "student_dev_loss": 1.10316,
                "train_losses": [1.11539, 1.10250, 1.11883], "dev_accuracy": [1 / 3, 0.375, 1 / 3, 0.375]}


def test_distil_end_to_end(tmp_path):
    """Run from an unrelated directory: conf/ is found through the package, outputs go to cwd."""
    result = run([DISTIL, "debug=smoke", "schedule=d1"], cwd=tmp_path)
    metrics_files = list((tmp_path / "outputs" / "runs").rglob("metrics.json"))
    assert len(metrics_files) == 1
    metrics = json.loads(metrics_files[0].read_text())
    assert metrics["status"] == "ok"
    assert metrics["choices"] == {"teacher": "tiny", "student": "bilstm", "schedule": "d1",
                                  "dataset": "toy", "transfer_size": "all", "augment": "none", "seed": 1}
    assert metrics["data"]["sizes"] == {"labeled": 24, "transfer": 36, "dev": 24, "test": 24}
    # deterministic on CPU: pinned, so any change to data, init, batching, losses or selection shows
    stage = metrics["student"]["stages"][0]
    assert metrics["teacher"]["finetune"]["dev_loss"] == pytest.approx(PINNED_SMOKE["teacher_dev_loss"], abs=1e-4)
    assert stage["dev_loss"] == pytest.approx(PINNED_SMOKE["student_dev_loss"], abs=1e-4)
    assert [h["train_loss"] for h in stage["history"][1:]] == pytest.approx(PINNED_SMOKE["train_losses"], abs=1e-4)
    assert [h["dev"] for h in stage["history"]] == pytest.approx(PINNED_SMOKE["dev_accuracy"], abs=1e-6)
    assert metrics["speed"]["teacher_ex_per_s"] > 0 and metrics["speed"]["student_ex_per_s"] > 0
    # where the seconds went, phase by phase, adding up to the run's (rounding aside)
    assert list(metrics["phases"]) == ["data", "teacher", "targets", "student"]
    assert sum(metrics["phases"].values()) == pytest.approx(metrics["seconds"], abs=0.3)
    # the teacher's score on every labeled split and its prediction variance on all four, from the cache
    assert set(metrics["teacher"]) >= {"labeled", "dev", "test", "diagnostics"}
    assert set(metrics["teacher"]["diagnostics"]) == {"labeled", "transfer", "dev", "test"}
    assert metrics["teacher"]["diagnostics"]["transfer"]["max_prediction_variance"] == pytest.approx(2 / 9)
    assert [s["name"] for s in metrics["student"]["stages"]] == ["S1"]
    stage = metrics["student"]["stages"][0]
    assert (stage["batch_size"], stage["batch_size_from"]) == (12, "command line / preset")  # debug=smoke's
    assert (metrics_files[0].parent / "student" / "model.safetensors").is_file()
    assert "student bilstm" in result.stdout


def test_a_second_schedule_reuses_the_teacher_and_its_cache(tmp_path, monkeypatch, capsys):
    """Same teacher and data, another schedule: nothing is fine-tuned or cached again."""
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    assert distil_in_process(["debug=smoke", "schedule=d1"], tmp_path, monkeypatch, capsys)[0] == 0
    code, out, err = distil_in_process(["debug=smoke", "schedule=hard"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert "reusing fine-tuned teacher" in err + out
    assert "reusing cached teacher targets" in err + out


@pytest.mark.heavy
def test_multirun_and_report(tmp_path, capsys):
    """A sweep over schedules with and without representation losses runs the teacher once."""
    sweep = run([DISTIL, "-m", "debug=smoke", "schedule=hard,d0,d4.1"], cwd=tmp_path)
    sweeps = list((tmp_path / "outputs" / "multirun").glob("*/*"))
    assert len(sweeps) == 1
    cells = sorted(p.parent.name for p in sweeps[0].rglob("metrics.json"))
    assert cells == ["0", "1", "2"]
    ran = [json.loads((sweeps[0] / cell / "metrics.json").read_text())["artifacts"]["teacher_ran"] for cell in cells]
    assert ran == [True, False, False]
    log = sweep.stdout + sweep.stderr
    assert log.count("reusing cached teacher targets") == 2 and log.count("cached teacher targets in") == 1

    from distil.cli.report import main as report  # the command's main, in this process

    report([str(sweeps[0])])
    table = pd.read_csv(sweeps[0] / "table.csv")
    assert sorted(table["schedule"]) == ["d0", "d4.1", "hard"]
    assert table["student_test"].between(0, 100).all() and set(table["metric"]) == {"accuracy"}
    markdown = (sweeps[0] / "table.md").read_text()
    assert markdown.splitlines()[0].split("|")[1].strip() == "run" and "hard" in markdown
    assert "wrote" in capsys.readouterr().out


def distil_in_process(args, cwd, monkeypatch, capsys) -> tuple[int, str, str]:
    """`distil.cli.main.main` with these arguments, as the console script would run it."""
    from distil.cli import main as cli

    monkeypatch.chdir(cwd)
    monkeypatch.setattr(sys, "argv", ["distil", *args])
    code = 0
    try:
        cli.main()
    except SystemExit as exit_:
        code = exit_.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    "args,message",
    [
        (["schedule=d9"], "unknown schedule 'd9'; choose one of: basic, bilstm-soft, d0, d0-s, d1"),
        (["teacher.lrr=1"], "unknown key 'teacher.lrr'"),
        # `+` adds to free-form maps (schedule.weights, dataset.files); a key the schema lacks is a typo
        (["+trainer.lrr=1"], "unknown key 'trainer.lrr': trainer has no 'lrr' (did you mean 'lr'?); "
                             "valid keys: optimizer, lr,"),
        (["dataset.files.dev=missing.tsv"], "not found; check paths.data_dir and dataset.files"),
        (["dataset.label_column=sentiment"], "no column 'sentiment'; set dataset.label_column"),
        (["teacher=bert-base"], "not available offline: set teacher.name_or_path="),
        (["student.vocabulary=all"], "unknown student.vocabulary 'all'; choose one of: trimmed, full"),
        (["student=rnn", "student.vocabulary=full"], "student.vocabulary=full keeps every teacher wordpiece but "
                                                     "this student reads words; set student.vocabulary=trimmed "
                                                     "or student.tokens=wordpieces"),
    ],
)
def test_bad_input_is_one_line_and_leaves_no_artifact(tmp_path, monkeypatch, capsys, args, message):
    code, _, err = distil_in_process(["debug=smoke", *args], tmp_path, monkeypatch, capsys)
    assert code == 2
    last_line = err.strip().splitlines()[-1]
    assert last_line.startswith("distil: error:") and message in last_line
    assert "Traceback" not in err
    assert cache_files(tmp_path / "outputs") == []


def test_empty_dataset_is_reported(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text("text\tlabel\n")
    code, _, err = distil_in_process(["debug=smoke", f"dataset.path={data}"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "train.tsv has no examples" in err.strip().splitlines()[-1]
    assert cache_files(tmp_path / "outputs") == []


def test_report_without_metrics_fails_clearly(tmp_path, capsys):
    from distil.cli.report import main

    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path)])
    assert exit_.value.code == 2 and "no metrics.json" in capsys.readouterr().err


def test_help_lists_groups(tmp_path, monkeypatch, capsys):
    code, out, _ = distil_in_process(["--help"], tmp_path, monkeypatch, capsys)
    assert code == 0
    assert "schedule: basic, bilstm-soft, d0, d0-s, d1" in out and "distil report" in out
    assert "experiment: mukherjee-dbpedia-cpu, mukherjee-table6-gpu, smoke-pair, sst2-low" in out
    assert "distil cache list | verify | prune" in out
    assert "pretrain: cpu, cpu-long, paper" in out


@pytest.mark.heavy
def test_a_failing_sweep_cell_does_not_stop_the_sweep(tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["-m", "debug=smoke", "dataset.label_column=nope,label"],
                                     tmp_path, monkeypatch, capsys)
    assert code == 2 and "1 sweep cell(s) failed" in err.strip().splitlines()[-1]
    statuses = {p.parent.name: json.loads(p.read_text())["status"]
                for p in (tmp_path / "outputs" / "multirun").rglob("metrics.json")}
    assert statuses["0"].startswith("failed: dataset 'toy'") and statuses["1"] == "ok"


@pytest.mark.heavy
def test_a_failing_cell_under_the_joblib_launcher_fails_the_sweep(tmp_path, monkeypatch, capsys):
    """A joblib worker is another process: the failure is read back from the cell's metrics.json."""
    code, _, err = distil_in_process(["-m", "debug=smoke", "hydra/launcher=joblib", "hydra.launcher.n_jobs=1",
                                      "dataset.label_column=nope,label"], tmp_path, monkeypatch, capsys)
    (failed,) = [p.parent for p in (tmp_path / "outputs" / "multirun").rglob("metrics.json")
                 if json.loads(p.read_text())["status"].startswith("failed: dataset 'toy'")]
    assert code == 2 and err.strip().splitlines()[-1].endswith(f"1 sweep cell(s) failed (status in their "
                                                               f"metrics.json): {failed.relative_to(tmp_path)}")


@pytest.mark.heavy
def test_a_failing_cell_under_the_submitit_local_launcher_fails_the_sweep(tmp_path, monkeypatch, capsys):
    """submitit_local (hydra-submitit-launcher, the local twin of submitit_slurm) runs every cell as a job
    in a process of its own, which submitit reports as completed: the failure is read back from the cell's
    metrics.json, as for joblib. One failing cell (a second would start a second torch process)."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    code, _, err = distil_in_process(["-m", "debug=smoke", "hydra/launcher=submitit_local",
                                      "dataset.label_column=nope"], tmp_path, monkeypatch, capsys)
    (metrics,) = (tmp_path / "outputs" / "multirun").rglob("metrics.json")
    failed = metrics.parent
    assert json.loads(metrics.read_text())["status"].startswith("failed: dataset 'toy'")
    (job_log,) = failed.parent.glob(".submitit/*/*_0_log.err")  # the job ran through submitit; its stderr:
    assert "distil: error: dataset 'toy'" in job_log.read_text()
    assert code == 2 and err.strip().splitlines()[-1].endswith(f"1 sweep cell(s) failed (status in their "
                                                               f"metrics.json): {failed.relative_to(tmp_path)}")


@pytest.mark.parametrize("dataset,student,metric", [("toy-pair", "bilstm", "accuracy"),
                                                    ("toy-ner", "bilstm-tagger", "f1")])
def test_every_task_runs_end_to_end(tmp_path, monkeypatch, capsys, dataset, student, metric):
    code, out, err = distil_in_process(["debug=smoke", f"dataset={dataset}", f"student={student}"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["metric"] == metric and 0.0 <= metrics["student"]["test"][metric] <= 1.0
    if dataset == "toy-ner":
        assert set(metrics["student"]["test"]["per_language"]) == {"aa", "bb"}
        assert "f1_std" in metrics["teacher"]["test"]


@pytest.mark.parametrize("args,size,rule", [
    (["trainer.batch_size=20"], 20, "command line / preset"),
    (["trainer.batch_size=null"], 64, "schedule"),  # hard: Mukherjee & Awadallah's 64 beats nothing set
])
def test_runs_train_with_the_batch_size_the_rule_picks(tmp_path, monkeypatch, capsys, args, size, rule):
    """The batches the stage really draws, and what each stage record says, follow training_batch_size."""
    from distil.run import schedule

    drawn = []

    def recording(n, batch_size, rng):
        batches = real(n, batch_size, rng)
        drawn.append([len(b) for b in batches])
        return batches

    real = schedule.shuffled_batches
    monkeypatch.setattr(schedule, "shuffled_batches", recording)
    code, _, err = distil_in_process(["debug=smoke", "schedule=hard", *args], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert [(s["batch_size"], s["batch_size_from"]) for s in metrics["student"]["stages"]] == [(size, rule)]
    examples = metrics["data"]["sizes"]["labeled"] + metrics["data"]["sizes"]["transfer"]  # 60
    full, rest = divmod(examples, size)
    assert drawn and all(epoch == [size] * full + ([rest] if rest else []) for epoch in drawn)


@pytest.mark.parametrize("unk_dropout", [None, 0.0])  # None: the default student.unk_dropout
def test_a_run_starts_from_u_0_1_and_trains_the_unk_row_unseen_tokens_read(tmp_path, monkeypatch, capsys,
                                                                            unk_dropout):
    import torch

    from distil.run import pipeline
    from distil.serve.student import SavedStudent
    from distil.students import word_embeddings
    from distil.students.vocab import UNK

    started, unk_gradients = {}, []

    def recording(schedule, trainer, model, *args, **kwargs):
        weight = word_embeddings(model).weight
        started["weights"] = weight.detach().clone()  # as the run hands it to training
        weight.register_hook(lambda grad: unk_gradients.append(grad[UNK].abs().sum().item()))
        return real(schedule, trainer, model, *args, **kwargs)

    real = pipeline.run_schedule
    monkeypatch.setattr(pipeline, "run_schedule", recording)
    args = ["debug=smoke", "student.embedding_init=random"]
    args += [] if unk_dropout is None else [f"student.unk_dropout={unk_dropout}"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    initial = started["weights"]
    rows = initial[2:]  # Mukherjee & Awadallah 6.1: U(-0.1, 0.1), std 0.2 / sqrt(12) = 0.0577
    assert rows.abs().max().item() <= 0.1 and rows.std().item() == pytest.approx(0.0577, rel=0.05)
    assert torch.all(initial[0] == 0) and torch.allclose(initial[UNK], rows.mean(dim=0))

    assert unk_gradients  # one per training batch
    if unk_dropout == 0.0:
        assert max(unk_gradients) == 0.0  # no training token maps to [UNK]: without word dropout it never learns
    else:
        assert sum(g > 0 for g in unk_gradients) >= len(unk_gradients) / 2  # word dropout trains it

    saved = SavedStudent(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent / "student")
    layer = word_embeddings(saved.model)
    # A sentence of words the toy data never holds reads the [UNK] row: changing the row changes the logits.
    text = "quokka xylophone zeppelin"
    ids, _ = saved._encode(text)
    assert UNK in ids
    before = saved.model(*model_inputs_for(ids))["logits"]
    with torch.no_grad():
        layer.weight[UNK] += 1.0
    assert not torch.allclose(before, saved.model(*model_inputs_for(ids))["logits"])


@pytest.mark.heavy
def test_a_full_vocabulary_gives_every_teacher_wordpiece_its_own_row(tmp_path, monkeypatch, capsys):
    """student.vocabulary=full (XtremeDistil §3-4: mBERT's whole vocabulary, SVD-reduced): one row per
    teacher wordpiece, so a test wordpiece the training data never holds reads its own row, not [UNK];
    the default trims to the training wordpieces and reads [UNK] there."""
    from distil.serve.student import SavedStudent
    from distil.students.vocab import UNK

    saved = {}
    for vocabulary in ("trimmed", "full"):
        where = tmp_path / vocabulary
        where.mkdir()
        args = ["debug=smoke", "student.embedding_init=svd", f"student.vocabulary={vocabulary}"]
        code, _, err = distil_in_process(args, where, monkeypatch, capsys)
        assert code == 0, err
        run_dir = next((where / "outputs" / "runs").rglob("metrics.json")).parent
        saved[vocabulary] = (json.loads((run_dir / "metrics.json").read_text()), SavedStudent(run_dir / "student"))
    metrics, student = saved["full"]
    tokenizer = student.tokenizer  # the teacher's
    assert metrics["student"]["vocab_size"] == len(tokenizer) + 2  # + [PAD] and [UNK]
    assert saved["trimmed"][0]["student"]["vocab_size"] < len(tokenizer)
    text = "quokka xylophone zeppelin"  # words the toy data never holds
    assert UNK in saved["trimmed"][1]._encode(text)[0]
    ids, _ = student._encode(text)
    teacher_ids = tokenizer(text)["input_ids"]
    assert UNK not in ids and ids == [i + 2 for i in teacher_ids]  # student row = teacher id + 2


def model_inputs_for(ids):
    from distil.data.batching import model_inputs

    return model_inputs([ids])


def test_parameter_counts_of_a_run_leave_out_the_projection_head(tmp_path, monkeypatch, capsys):
    """d2 trains a representation head to the tiny teacher's 32 units, and its logit loss a W^r of its own
    (schedule.shared_output_layer=false): neither is part of the deployed student."""
    code, out, err = distil_in_process(["debug=smoke", "schedule=d2", "schedule.projection=side"], tmp_path,
                                       monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    student, teacher = metrics["student"], metrics["teacher"]
    vocab, teacher_vocab, e, h, classes = student["vocab_size"], teacher["vocab_size"], 32, 32, 3
    body = 2 * 4 * (h * e + h * h + 2 * h) + 2 * h * classes + classes  # BiLSTM + classifier
    assert student["param_counts"] == {"deployed": vocab * e + body, "full_teacher_vocab": teacher_vocab * e + body,
                                       "without_embeddings": body, "training_only": 2 * h * 32 + 32 + 2 * h * classes
                                       + classes, "models": 1}
    assert student["params"] == vocab * e + body
    # the teacher (hidden 32) holds its whole vocabulary: deployed is the full-vocabulary count
    tc = teacher["param_counts"]
    assert tc["deployed"] == tc["full_teacher_vocab"] == teacher["params"]
    assert tc["deployed"] - tc["without_embeddings"] == teacher_vocab * 32
    ratio = tc["full_teacher_vocab"] / student["param_counts"]["full_teacher_vocab"]
    assert f"{ratio:.1f}x with the teacher's full vocabulary" in out


def test_student_that_cannot_do_the_task_fails_before_training(tmp_path, monkeypatch, capsys):
    args = ["debug=smoke", "dataset=toy-ner", "student=bilstm"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "student 'bilstm' cannot do tagging" in err and "bilstm_tagger" in err
    assert cache_files(tmp_path / "outputs") == []


def test_d0_trains_one_student_per_language(tmp_path, monkeypatch, capsys):
    args = ["debug=smoke", "dataset=toy-ner", "student=bilstm-tagger", "schedule=d0"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    student = json.loads((run_dir / "metrics.json").read_text())["student"]
    assert student["models"] == 2 and set(student["stages"]) == {"aa", "bb"}
    per_language = student["test"]["per_language"]
    assert student["test"]["f1"] == pytest.approx(sum(per_language.values()) / 2)
    # parameters: each language's model, and their sum (what D0 deploys)
    counts = student["param_counts"]
    assert counts["models"] == 2 and set(counts["per_model"]) == {"aa", "bb"}
    for key in ("deployed", "full_teacher_vocab", "without_embeddings"):
        assert counts[key] == sum(model[key] for model in counts["per_model"].values())
    assert student["params"] == counts["deployed"]
    # smoke: E = H = 32; the tagger's 8 outputs are the 7 tags and 'X'
    lstm, classifier = 2 * 4 * (32 * 32 + 32 * 32 + 2 * 32), 64 * 8 + 8
    assert all(model["without_embeddings"] == lstm + classifier for model in counts["per_model"].values())
    assert (run_dir / "student-aa" / "model.safetensors").is_file()


@pytest.mark.parametrize("args,message", [
    (["student.embedding_init=svd", "student.embedding_dim=64"],
     "embedding_dim 64 is larger than the teacher's hidden size 32"),
    (["student.embedding_init=file", "student.vectors_file=/no/such/glove.txt"], "glove.txt does not exist"),
    (["student=siamese"], "student 'siamese' cannot do classification"),
])
def test_size_mismatches_fail_before_any_training(tmp_path, monkeypatch, capsys, args, message):
    code, _, err = distil_in_process(["debug=smoke", *args], tmp_path, monkeypatch, capsys)
    assert code == 2 and message in err.strip().splitlines()[-1]
    assert cache_files(tmp_path / "outputs") == []  # not even the teacher was fine-tuned


def test_vectors_file_of_the_wrong_dimension(tmp_path, monkeypatch, capsys):
    vectors = tmp_path / "glove.txt"
    vectors.write_text("the 0.1 0.2 0.3\nfilm 0.3 0.2 0.1\n")
    args = ["debug=smoke", "student.embedding_init=file", f"student.vectors_file={vectors}"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 2 and "has 3-dimensional vectors but student.embedding_dim is 32" in err


@pytest.mark.parametrize("dataset,student,init,text", [
    ("toy", "bilstm", "svd", "the chef made soup"),
    ("toy", "rnn", "random", "a new laptop app"),
    ("toy-pair", "siamese", "pca", "chef soup bread ||| garlic recipe oven"),
    ("toy-ner", "bilstm-tagger", "svd", "anna visited acme in paris"),
    ("toy-pair", "sra", "random", "chef soup ||| laptop app"),
    ("toy-ner", "transformer-tiny", "random", "boris met globex in oslo"),
])
def test_saved_student_predicts(tmp_path, monkeypatch, capsys, dataset, student, init, text):
    from distil.cli.predict import main as predict

    args = ["debug=smoke", f"dataset={dataset}", f"student={student}", f"student.embedding_init={init}"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    predict([str(run_dir), text])
    line = capsys.readouterr().out.strip().splitlines()[-1]
    if student == "bilstm":  # the `distil predict run_dir=... text=...` form gives the same answer
        code, out, _ = distil_in_process(["predict", f"run_dir={run_dir}", f"text={text}"],
                                         tmp_path, monkeypatch, capsys)
        assert code == 0 and out.strip().splitlines()[-1] == line
    prediction = line.split("\t")[0]
    if dataset == "toy-ner":
        assert [pair.split("/")[0] for pair in prediction.split()] == text.split()
    else:
        labels = json.loads((run_dir / "student" / "config.json").read_text())["labels"]
        assert prediction in labels


def test_report_keeps_only_overrides_that_tell_cells_apart(tmp_path):
    from distil.tables.report import collect

    for cell, overrides in {"0": ["schedule=d1", "trainer.epochs=4", "teacher.layer=2"],
                            "1": ["schedule=d2", "trainer.epochs=4", "teacher.layer=5"]}.items():
        (tmp_path / cell).mkdir()
        metrics = {"status": "failed: interrupted", "choices": {"schedule": overrides[0].split("=")[1]},
                   "overrides": overrides}
        (tmp_path / cell / "metrics.json").write_text(json.dumps(metrics))
    table = collect(tmp_path)
    # trainer.epochs is shared and the schedule has its own column: only the layer is left.
    assert list(table["overrides"]) == ["teacher.layer=2", "teacher.layer=5"]
    assert list(table["schedule"]) == ["d1", "d2"]
