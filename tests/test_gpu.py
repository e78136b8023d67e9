"""The GPU path against the CPU's (`make gpu-check` runs the `gpu` tests: `pytest -m gpu tests/test_gpu.py`).

Every `gpu` test is skipped, with the reason, where torch sees no CUDA GPU, and the default suite
leaves them out (pyproject.toml's addopts: `-m 'not slow and not gpu'`). What they hold the GPU to:

- the schedules d1 and d4.2 (toy), and d4.2 on the tagging toy set, run end to end with
  runtime.device=cuda and give the CPU run's metrics within TOLERANCE (below);
- the teacher's cached targets from a GPU forward in fp32 equal the CPU's within fp16 rounding
  (one unit in the last place of the cache's fp16);
- teacher fine-tuning in bf16 (and fp16, with its GradScaler) converges on the toy set;
- a student checkpoint written on the GPU resumes on the CPU, and one from the CPU on the GPU.

Comparing two devices is comparing float rounding only when nothing random differs between them:
dropout draws from the CPU generator on the CPU and from the CUDA generator on a GPU, so the runs
compared here turn the student's dropouts off, and the GPU run reuses the teacher the CPU run
fine-tuned (the tiny teacher's BERT dropout cannot be turned off from the config). The GPU run then
computes the teacher's targets, trains the student and evaluates both on the GPU. TF32 is off in
these tests (torch lets cuDNN's LSTM use it in fp32 by default): fp32 on both sides.

Not `gpu`-marked: every GPU preset in distil/conf/experiment/ composes and asks for a GPU.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from distil.config.compose import compose_run_config
from distil.config.schema import CONF_DIR
from tests import test_resume
from tests.test_cli import distil_in_process

CUDA = torch.cuda.is_available()
NO_CUDA = (f"no CUDA GPU: torch {torch.__version__} sees none "
           "(the GPU checks run where one is: make gpu-check, or pytest -m gpu tests/test_gpu.py)")


def gpu_test(function):
    """A test of the GPU path: marked `gpu` (make gpu-check), skipped without CUDA."""
    return pytest.mark.gpu(pytest.mark.skipif(not CUDA, reason=NO_CUDA)(function))


# How far a CUDA run may be from the CPU run of the same command (float rounding alone: other kernels
# sum in another order, and a few dozen Adam steps carry the difference forward):
# - every loss a run records (each stage step's dev loss, its per-epoch train and dev values):
#   relative 2e-3, or absolute 1e-4 near zero. bf16 where fp32 was asked would be ~1e-2 off;
# - every score (accuracy, F1, per language): 0.05 absolute, one of the toy set's 24 test sentences
#   (1/24 = 0.042) predicted otherwise, as a near-tie between two classes may be;
# - which epoch each step kept and how many it ran: equal.
TOLERANCE = {"loss_rtol": 2e-3, "loss_atol": 1e-4, "score_atol": 0.05}

# No random draw in the student's training: the two devices' generators differ.
NO_DROPOUT = ["student.dropout=0", "student.unk_dropout=0", "student.recurrent_dropout=0"]
# d4.2's stages on the labels alone: 4 epochs, not smoke's 30 (a test of devices, not of training)
SHORT = ["trainer.labels_only_epochs=4"]

SCHEDULES = {
    "d1": ["schedule=d1"],
    "d4.2": ["schedule=d4.2"],
    "tagging-d4.2": ["dataset=toy-ner", "student=bilstm-tagger", "schedule=d4.2"],  # per-token targets, word starts
}

# The presets for paper-scale runs on one GPU (distil/conf/experiment/*-gpu.yaml)
GPU_PRESETS = ["xtremedistil-table3-gpu", "mukherjee-table6-gpu", "turc-pretraining-gpu", "wu-agnostic-gpu"]


@pytest.fixture
def exact_fp32():
    """fp32 arithmetic on the GPU as on the CPU: no TF32 in matrix products, convolutions or cuDNN's RNNs."""
    try:
        settings = [(torch.backends.cuda.matmul, "fp32_precision"), (torch.backends.cudnn.conv, "fp32_precision"),
                    (torch.backends.cudnn.rnn, "fp32_precision")]
    except AttributeError:  # torch before the fp32_precision API
        settings = [(torch.backends.cuda.matmul, "allow_tf32"), (torch.backends.cudnn, "allow_tf32")]
    saved = [getattr(owner, name) for owner, name in settings]
    for owner, name in settings:
        setattr(owner, name, False if name == "allow_tf32" else "ieee")
    yield
    for (owner, name), value in zip(settings, saved, strict=True):
        setattr(owner, name, value)


# --------------------------------------------------------------------------------------- helpers


def run(tmp_path: Path, monkeypatch, capsys, name: str, cache: Path, *args: str) -> dict:
    """`distil debug=smoke ARGS` in this process; its metrics.json."""
    run_dir = tmp_path / "runs" / name
    code, _, err = distil_in_process(["debug=smoke", f"paths.cache={cache}", f"hydra.run.dir={run_dir}", *args],
                                     tmp_path, monkeypatch, capsys)
    assert code == 0, err[-3000:]
    return json.loads((run_dir / "metrics.json").read_text())


def scores_apart(where: str, a, b, sides: tuple[str, str]) -> list[str]:
    """Each score (a number, or a dict of them: f1, f1_std, per_language) further apart than the tolerance."""
    if isinstance(a, dict):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(a)} {sides[0]}, {sorted(b)} {sides[1]}"]
        return [line for key in a for line in scores_apart(f"{where}.{key}", a[key], b[key], sides)]
    if abs(a - b) > TOLERANCE["score_atol"]:
        return [f"{where}: {a:.4f} {sides[0]}, {b:.4f} {sides[1]}"]
    return []


def losses_apart(where: str, a: float, b: float, sides: tuple[str, str]) -> list[str]:
    if not math.isclose(a, b, rel_tol=TOLERANCE["loss_rtol"], abs_tol=TOLERANCE["loss_atol"]):
        return [f"{where}: {a:.6g} {sides[0]}, {b:.6g} {sides[1]} ({abs(b - a) / max(abs(a), 1e-12):.2e} relative)"]
    return []


def differences(a: dict, b: dict, sides: tuple[str, str] = ("on the CPU", "on the GPU")) -> list[str]:
    """Where two runs' metrics.json differ by more than TOLERANCE: the teacher's and the student's
    scores, and every stage step's selection, losses and scores."""
    found = []
    for model in ("teacher", "student"):
        for split in ("dev", "test"):
            if split in a[model]:
                found += scores_apart(f"{model}.{split}", a[model][split], b[model][split], sides)
    steps = [[(s["name"], s["step"]) for s in m["student"]["stages"]] for m in (a, b)]
    if steps[0] != steps[1]:
        return [*found, f"stage steps {steps[0]} {sides[0]}, {steps[1]} {sides[1]}"]
    for ours, theirs in zip(a["student"]["stages"], b["student"]["stages"], strict=True):
        where = f"student {ours['name']} {ours['step']}"
        for key in ("best_epoch", "epochs_run"):
            if ours[key] != theirs[key]:
                found.append(f"{where}: {key} {ours[key]} {sides[0]}, {theirs[key]} {sides[1]}")
        found += losses_apart(f"{where} dev_loss", ours["dev_loss"], theirs["dev_loss"], sides)
        found += scores_apart(f"{where} dev", ours["dev"], theirs["dev"], sides)
        found += scores_apart(f"{where} test", ours["test"], theirs["test"], sides)
        for x, y in zip(ours["history"], theirs["history"], strict=False):
            for key in ("train_loss", "dev"):
                if key in x and key in y:
                    found += losses_apart(f"{where} epoch {x['epoch']} {key}", x[key], y[key], sides)
    return found


def fp16_ulp(values: torch.Tensor) -> torch.Tensor:
    """The spacing of fp16 numbers at each value: 2^(exponent - 10); 2^-24 below the normal range."""
    magnitude = values.float().abs().clamp_min(2.0 ** -14)
    return torch.exp2(torch.floor(torch.log2(magnitude)) - 10)


# ------------------------------------------------------------------------------------- GPU tests


@gpu_test
@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_a_cuda_run_gives_the_cpu_runs_metrics(tmp_path, monkeypatch, capsys, exact_fp32, schedule):
    args = [*SCHEDULES[schedule], *NO_DROPOUT, *SHORT]
    cpu_cache, gpu_cache = tmp_path / "cache-cpu", tmp_path / "cache-cuda"
    cpu = run(tmp_path, monkeypatch, capsys, "cpu", cpu_cache, *args, "runtime.device=cpu")
    # the CPU's fine-tuned teacher (the device is in no key: the GPU run finds it by its key); its
    # targets, the student and every evaluation are then the GPU's
    shutil.copytree(cpu_cache / "teachers", gpu_cache / "teachers")
    gpu = run(tmp_path, monkeypatch, capsys, "cuda", gpu_cache, *args, "runtime.device=cuda")
    assert cpu["runtime"]["device"] == "cpu" and gpu["runtime"]["device"].startswith("cuda")
    assert gpu["runtime"]["precision"] == "fp32" and gpu["runtime"]["name"] == torch.cuda.get_device_name()
    assert gpu["artifacts"]["teacher_reused"] and not gpu["artifacts"]["targets_reused"]
    assert (gpu["artifacts"]["teacher"], gpu["artifacts"]["targets"]) == (cpu["artifacts"]["teacher"],
                                                                           cpu["artifacts"]["targets"])
    apart = differences(cpu, gpu)
    assert not apart, "the CUDA run differs from the CPU run beyond TOLERANCE:\n" + "\n".join(apart)


@gpu_test
@pytest.mark.parametrize("dataset,apart", [("toy", False), ("toy-ner", False), ("toy-pair", True)])
def test_the_cache_from_a_gpu_forward_equals_the_cpus_within_fp16_rounding(smoke_cfg, exact_fp32, dataset, apart):
    from distil.common.runtime import Runtime, use
    from distil.run.pipeline import prepare_data
    from distil.store.artifacts import ArtifactStore
    from distil.tasks import make_task
    from distil.teacher import ensure_teacher, load_finetuned
    from distil.teacher.cache import compute_shard

    cfg = smoke_cfg(f"dataset={dataset}")
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, ArtifactStore(cfg.paths.cache), cfg.seed, True)
    model, tokenizer = load_finetuned(teacher.path, task)
    split = prepared["transfer"]
    rows = np.arange(len(split))
    # batches of 8 over a few dozen examples: several length-sorted batches of different widths
    cpu = compute_shard(model, task, split, rows, tokenizer.pad_token_id, 8, -1, apart=apart)
    runtime = Runtime.resolve("cuda", "fp32")
    with use(runtime):
        gpu = compute_shard(model.to(runtime.device), task, split, rows, tokenizer.pad_token_id, 8, -1, apart=apart)
    assert set(gpu) == set(cpu)
    for name, ours in cpu.items():
        theirs = gpu[name]
        assert theirs.device.type == "cpu" and theirs.dtype == ours.dtype and theirs.shape == ours.shape, name
        if not ours.is_floating_point():  # offsets: exact
            assert torch.equal(theirs, ours), name
            continue
        assert ours.dtype == torch.float16 and torch.isfinite(theirs).all(), name
        gap = (theirs.float() - ours.float()).abs()
        ulp = fp16_ulp(torch.maximum(ours.float().abs(), theirs.float().abs()))
        worst = int(torch.argmax(gap - ulp))
        assert (gap <= ulp).all(), (f"{name}: {int((gap > ulp).sum())} of {gap.numel()} values differ by more than "
                                    f"one fp16 unit, e.g. {ours.flatten()[worst].item()} on the CPU, "
                                    f"{theirs.flatten()[worst].item()} on the GPU")


@gpu_test
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_teacher_fine_tuning_in_low_precision_converges(smoke_cfg, precision):
    """The tiny teacher on the toy set, 60 passes at lr 3e-3: on the CPU (bf16 and fp32 alike) its train
    loss falls from ln 3 = 1.10 to ~0.05 and its dev accuracy ends at 0.71 (majority 0.33)."""
    from distil.common.runtime import Runtime, use
    from distil.run.pipeline import prepare_data
    from distil.store.artifacts import ArtifactStore
    from distil.tasks import make_task
    from distil.teacher import ensure_teacher

    cfg = smoke_cfg("teacher.finetune.epochs=60", "teacher.finetune.patience=100", "teacher.finetune.lr=3e-3",
                    "teacher.finetune.batch_size=8")
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    with use(Runtime.resolve("cuda", precision)):
        teacher = ensure_teacher(cfg.teacher, task, data, prepared, ArtifactStore(cfg.paths.cache), cfg.seed, True)
    losses = [epoch["train_loss"] for epoch in teacher.info["history"] if "train_loss" in epoch]
    assert len(losses) >= 30 and all(math.isfinite(loss) for loss in losses)
    assert losses[0] > 0.9 and min(losses[-5:]) < 0.25, f"{precision} fine-tuning did not converge: {losses}"
    assert teacher.info["dev_score"] > teacher.info["baseline_dev_score"]
    weights = load_file(teacher.path / "model.safetensors")
    assert {tensor.dtype for tensor in weights.values()} == {torch.float32}  # autocast: the weights stay fp32


@gpu_test
@pytest.mark.parametrize("written_on,resumed_on", [("cuda", "cpu"), ("cpu", "cuda")])
def test_a_checkpoint_resumes_on_the_other_device(tmp_path, monkeypatch, exact_fp32, written_on, resumed_on):
    """d1 killed at its third dev evaluation (epoch 2's, so epoch 1 is checkpointed) on one device,
    resumed on the other: it continues after epoch 1 and ends where an uninterrupted run there ends."""
    args = ["schedule=d1", *NO_DROPOUT]
    reference, _ = test_resume.distil_in_process(tmp_path, monkeypatch, "reference", *args,
                                                 f"runtime.device={resumed_on}")
    test_resume.count_dev_scores(monkeypatch, kill_at=3)
    with pytest.raises(test_resume.Killed):
        test_resume.distil_in_process(tmp_path, monkeypatch, "killed", *args, f"runtime.device={written_on}")
    test_resume.count_dev_scores(monkeypatch)
    resumed, log = test_resume.distil_in_process(tmp_path, monkeypatch, "resumed", *args,
                                                 f"runtime.device={resumed_on}")
    assert "resuming d1 S1 (ce+logit_mse) after epoch 1 from" in log
    assert resumed["runtime"]["device"].startswith(resumed_on)
    apart = differences(reference, resumed, ("uninterrupted", f"resumed on {resumed_on}"))
    assert not apart, f"resumed on {resumed_on} after a checkpoint from {written_on}:\n" + "\n".join(apart)
    assert list((tmp_path / "outputs" / "cache" / "checkpoints").iterdir()) == []


# ---------------------------------------------------------------------------- not GPU-marked


def test_every_gpu_preset_is_listed_here():
    assert sorted(path.stem for path in (CONF_DIR / "experiment").glob("*-gpu.yaml")) == sorted(GPU_PRESETS)


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_every_gpu_preset_composes_and_asks_for_a_gpu(preset):
    cfg = compose_run_config([f"+experiment={preset}"])
    assert cfg.runtime.device in ("auto", "cuda")
    assert cfg.runtime.precision in ("fp32", "bf16", "fp16")
    header = (CONF_DIR / "experiment" / f"{preset}.yaml").read_text().split("\ndefaults:")[0]
    assert "not measured (make gpu-check has not run on a GPU)" in " ".join(
        line.lstrip("# ") for line in header.splitlines())
