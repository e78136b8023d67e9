"""Pre-training, task-agnostic distillation and serving on the active runtime, on the CPU:
bf16 autocast trains near fp32, precision enters the artifact keys only when it is not fp32 (the
device never does), checkpoints carry the CUDA random states and resume exactly where they are
missing or belong to another machine, and a saved student serves on a chosen device in fp32."""

from __future__ import annotations

import json
import logging
import math
import subprocess
import sys

import pytest
import torch
from omegaconf import OmegaConf

import distil.pretrain.sra as sra
from distil.common.runtime import Runtime, current, use
from distil.config.schema import AgnosticConfig, PretrainConfig
from distil.errors import DistilError
from distil.pretrain import mlm
from distil.pretrain.corpus import Batch
from distil.store.artifacts import spec_hash
from tests.test_pretrain import CORPUS, pretrain_cfg, tiny_tokenizer
from tests.test_wu_agnostic_budget import STUDENT, agnostic, initial_rows, toy_encoder, toy_lines, toy_tokenizer

BF16 = ("cpu", "bf16")
# bf16 keeps 8 bits of mantissa: over a few steps from the same start its losses stay within this of
# fp32's (measured: 3e-4 nats for the masked LM near 4.4, 6e-4 for the SRA cosine loss near 0.3)
MLM_TOLERANCE = 0.02  # nats
SRA_TOLERANCE = 0.005  # of eq. 1's loss, which lies in [0, 1]


def weights(path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(path)


@pytest.fixture
def tokenizer(smoke_cfg):
    return tiny_tokenizer(smoke_cfg)


def masked_lm(tokenizer, out, runtime: tuple[str, str] = ("cpu", "fp32")) -> dict:
    """8 steps of masked-LM pre-training into `out` (resuming its checkpoint), a held-out loss every 4."""
    out.mkdir(exist_ok=True)
    with use(Runtime.resolve(*runtime)):
        return mlm.pretrain(pretrain_cfg(steps=8, heldout_every=4), 2, 32, tokenizer, CORPUS, 0, out, CORPUS[:12])


def test_bf16_masked_lm_steps_are_finite_and_near_fp32(tokenizer, tmp_path):
    fp32 = masked_lm(tokenizer, tmp_path / "fp32")
    bf16 = masked_lm(tokenizer, tmp_path / "bf16", BF16)
    assert current() == Runtime()  # `use` restores the CPU in fp32
    for ours, theirs in zip(bf16["history"], fp32["history"], strict=True):
        for key in ("mlm_loss", "nsp_loss", "heldout_mlm_loss"):
            assert math.isfinite(ours[key]) and ours[key] == pytest.approx(theirs[key], abs=MLM_TOLERANCE), key
    bf16_weights, fp32_weights = weights(tmp_path / "bf16" / mlm.WEIGHTS), weights(tmp_path / "fp32" / mlm.WEIGHTS)
    # autocast ran (the weights moved otherwise than in fp32), and the artifact is fp32 all the same
    assert any(not torch.equal(bf16_weights[k], fp32_weights[k]) for k in fp32_weights)
    assert {tensor.dtype for tensor in bf16_weights.values()} == {torch.float32}


def test_a_masked_lm_batch_moves_to_the_device_in_one_put():
    """Every tensor of the pre-training batch on the device (`meta` stands for a GPU here), an absent
    one kept absent, the CPU's batch untouched; on the CPU, the batch itself."""
    ids = torch.ones(2, 3, dtype=torch.long)
    batch = Batch(ids, ids, ids, ids, None)
    moved = Runtime(torch.device("meta")).put(batch)
    assert [getattr(value, "device", value) for value in vars(moved).values()] == [torch.device("meta")] * 4 + [None]
    assert batch.input_ids.device.type == "cpu" and Runtime().put(batch) is batch


def sra_build(tmp_path, name: str, runtime: tuple[str, str] = ("cpu", "fp32"), steps: int = 7):
    lines, held_out = toy_lines(40), toy_lines(6, seed=1)
    tokenizer = toy_tokenizer(tmp_path)
    encoder = toy_encoder(tokenizer)
    out = tmp_path / name
    out.mkdir(exist_ok=True)
    with use(Runtime.resolve(*runtime)):
        info = sra.distil_agnostic(agnostic(steps=steps), lambda: encoder, tokenizer, STUDENT, initial_rows, lines,
                                   held_out, out)
    return info, sra.load_agnostic(out)


def test_bf16_sra_steps_are_finite_and_near_fp32(tmp_path):
    fp32, fp32_weights = sra_build(tmp_path, "fp32")
    bf16, bf16_weights = sra_build(tmp_path, "bf16", BF16)
    for ours, theirs in zip(bf16["history"], fp32["history"], strict=True):
        for key in ("loss", "validation_loss"):
            assert math.isfinite(ours[key]) and ours[key] == pytest.approx(theirs[key], abs=SRA_TOLERANCE), key
    assert any(not torch.equal(bf16_weights[k], fp32_weights[k]) for k in fp32_weights)
    assert {tensor.dtype for tensor in bf16_weights.values()} == {torch.float32}


def test_the_teachers_vectors_under_bf16_are_fp32s(tmp_path):
    """They are targets, as the run's teacher cache is: bf16 would round them to 8 mantissa bits."""
    tokenizer = toy_tokenizer(tmp_path)
    encoder = toy_encoder(tokenizer)
    ids = tokenizer(toy_lines(20), truncation=True, max_length=16)["input_ids"]
    fp32 = sra.pooled_vectors(encoder, ids, tokenizer.pad_token_id, sra.POOLINGS, batch_size=8)
    with use(Runtime.resolve(*BF16)):
        bf16 = sra.pooled_vectors(encoder, ids, tokenizer.pad_token_id, sra.POOLINGS, batch_size=8)
    for pooling in sra.POOLINGS:
        assert bf16[pooling].dtype == torch.float32 and torch.equal(bf16[pooling], fp32[pooling])


# the keys git HEAD gave before precisions existed (pinned: an artifact built then is still found)
MLM_KEY = "c350a00f3c93a636"  # PretrainConfig() at L2/H128, as below
SRA_KEY = "ee5eaf5e12542942"  # AgnosticConfig() with SIZES, as below
SIZES = {"embedding_dim": 300, "hidden_size": 512, "num_layers": 1, "dropout": 0.2, "embedding_init": "svd"}


def mlm_key(precision: str | None = None) -> str:
    return spec_hash(mlm.pretrain_spec(OmegaConf.structured(PretrainConfig()), 2, 128, {"vocab": "v"}, "digest", 1,
                                       precision))


def sra_key(precision: str | None = None) -> str:
    return spec_hash(sra.agnostic_spec(OmegaConf.structured(AgnosticConfig()), {"name_or_path": "x"}, SIZES,
                                       "d" * 64, 384, precision))


def test_fp32_keys_are_the_old_ones_and_bf16_has_its_own_whatever_the_device():
    assert (mlm_key(), mlm_key("fp32"), sra_key(), sra_key("fp32")) == (MLM_KEY, MLM_KEY, SRA_KEY, SRA_KEY)
    with use(Runtime.resolve("cpu", "fp32")):
        assert (mlm_key(), sra_key()) == (MLM_KEY, SRA_KEY)
    with use(Runtime.resolve(*BF16)):  # the active runtime's precision, by default
        bf16 = (mlm_key(), sra_key())
    assert bf16 == (mlm_key("bf16"), sra_key("bf16")) and MLM_KEY not in bf16 and SRA_KEY not in bf16
    assert mlm.pretrain_spec(OmegaConf.structured(PretrainConfig()), 2, 128, {}, "d", 1, "bf16")["precision"] == "bf16"
    # the device is never part of a key: a GPU's bf16 run finds the CPU's artifact (Runtime() built
    # directly: resolve would refuse a GPU this machine does not have)
    with use(Runtime(torch.device("cuda", 0), "bf16")):
        assert (mlm_key(), sra_key()) == bf16


def test_the_existing_pretrained_artifacts_key_is_unchanged():
    """outputs/cache/pretrained/bert-L2-H128-b9fece35f67bb9a2 (pretrain=cpu-long, built in fp32)."""
    cfg = OmegaConf.structured(PretrainConfig(max_length=64, steps=18000, batch_size=64, lr=5e-4, seed=1))
    identity = {"vocab": "a240c9abbd82e5b969f5681fb7c3f633609db3e4383964ade85bd16f03fbda9b", "class": "BertTokenizer",
                "lower": True}
    digest = "f4d69d61ab8535aa2d4cc0bfdfd581f3b0f9e33bce7a81ca864add223cd29750"
    assert spec_hash(mlm.pretrain_spec(cfg, 2, 128, identity, digest, 1)) == "b9fece35f67bb9a2"


def test_the_shared_vectors_key_is_fp32s_under_bf16_and_its_own_under_fp16():
    cfg = AgnosticConfig()
    lines = toy_lines(10)
    before = {"teacher": {"t": 1}, "pooling": cfg.pooling, "max_length": cfg.max_length,
              "corpus": sra.lines_digest(lines), "layout": sra.VECTORS_LAYOUT}  # as shared_vectors built it
    assert sra.vectors_spec(cfg, {"t": 1}, lines) == before
    with use(Runtime.resolve(*BF16)):
        assert sra.vectors_spec(cfg, {"t": 1}, lines) == before
    with use(Runtime(torch.device("cuda", 0), "fp16")):  # built directly: no GPU here to resolve
        assert sra.vectors_spec(cfg, {"t": 1}, lines) == {**before, "precision": "fp16"}


def gpu_written(state: dict, gpus: int) -> dict:
    """The checkpoint as a machine with `gpus` GPUs would have written it (CUDA states as saved: on the
    CPU, since torch.cuda.get_rng_state_all returns them there); 0: as written before CUDA states."""
    state = dict(state)
    if gpus:
        state["cuda_rng"] = [torch.full((16,), index, dtype=torch.uint8) for index in range(gpus)]
    else:
        state.pop("cuda_rng", None)
        state.pop("scaler", None)
    return state


@pytest.mark.parametrize("gpus", [2, 0])
def test_a_masked_lm_checkpoint_from_a_gpu_or_from_before_resumes_on_the_cpu_exactly(tokenizer, tmp_path,
                                                                                      monkeypatch, gpus):
    """A checkpoint written on a 2-GPU machine (its CUDA states have nowhere to go here), or before
    CUDA states were saved, resumes on the CPU to the uninterrupted run's weights."""
    reference = masked_lm(tokenizer, tmp_path / "reference")
    original = mlm.save_checkpoint

    def dying(path, *args):
        original(path, *args)
        if args[5] == 5:  # step
            state = torch.load(path, weights_only=True, map_location="cpu")
            assert state["cuda_rng"] == [] and state["scaler"] is None  # this machine: no GPU, fp32
            torch.save(gpu_written(state, gpus), path)
            raise KeyboardInterrupt

    monkeypatch.setattr(mlm, "save_checkpoint", dying)
    out = tmp_path / "interrupted"
    with pytest.raises(KeyboardInterrupt):
        masked_lm(tokenizer, out)
    monkeypatch.setattr(mlm, "save_checkpoint", original)
    info = masked_lm(tokenizer, out)
    assert info["steps"] == 8 and not (out / mlm.CHECKPOINT).exists()
    # the held-out curve as uninterrupted (the running training loss restarts its mean at a resume)
    assert ([entry["heldout_mlm_loss"] for entry in info["history"]] ==
            [entry["heldout_mlm_loss"] for entry in reference["history"]])
    assert (out / mlm.WEIGHTS).read_bytes() == (tmp_path / "reference" / mlm.WEIGHTS).read_bytes()


def test_cuda_states_are_restored_only_on_a_machine_with_as_many_gpus(tokenizer, tmp_path, monkeypatch):
    """The resumed pre-training hands its checkpoint's CUDA states to torch where the GPU count matches
    (a machine with GPUs faked here: the model still runs on the CPU), and drops them elsewhere."""
    restored = []
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [])
    written = gpu_written(torch.load(write_checkpoint(tokenizer, tmp_path, monkeypatch), weights_only=True), 2)
    for gpus in (1, 2):
        out = tmp_path / f"on-{gpus}"
        out.mkdir()
        torch.save(written, out / mlm.CHECKPOINT)
        with monkeypatch.context() as machine:
            machine.setattr(torch.cuda, "is_available", lambda: True)
            machine.setattr(torch.cuda, "device_count", lambda gpus=gpus: gpus)
            mlm.pretrain(pretrain_cfg(steps=6), 2, 32, tokenizer, CORPUS, 0, out)
    assert len(restored) == 1 and [s.tolist() for s in restored[0]] == [s.tolist() for s in written["cuda_rng"]]


def write_checkpoint(tokenizer, tmp_path, monkeypatch):
    """A masked-LM checkpoint after the first of 6 steps, as this machine writes it."""
    out = tmp_path / "writer"
    out.mkdir()
    original = mlm.save_checkpoint

    def stop(path, *args):
        original(path, *args)
        raise KeyboardInterrupt

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(mlm, "save_checkpoint", stop)
        mlm.pretrain(pretrain_cfg(steps=6), 2, 32, tokenizer, CORPUS, 0, out)
    return out / mlm.CHECKPOINT


def test_an_sra_checkpoint_from_a_gpu_resumes_on_the_cpu_exactly(tmp_path, monkeypatch):
    whole, reference = sra_build(tmp_path, "whole")
    monkeypatch.setattr(sra, "CHECKPOINT_SECONDS", 0.0)
    calls = []
    step = sra.optimiser_step

    def dying(*args, **kwargs):
        if len(calls) == 3:  # killed as the 4th update starts: its checkpoint is the 3rd update's
            path = tmp_path / "killed" / sra.CHECKPOINT
            torch.save(gpu_written(torch.load(path, weights_only=True, map_location="cpu"), 2), path)
            raise KeyboardInterrupt
        calls.append(1)
        return step(*args, **kwargs)

    monkeypatch.setattr(sra, "optimiser_step", dying)
    with pytest.raises(KeyboardInterrupt):
        sra_build(tmp_path, "killed")
    monkeypatch.setattr(sra, "optimiser_step", step)
    resumed, again = sra_build(tmp_path, "killed")
    assert resumed["history"] == whole["history"]
    assert all(torch.equal(reference[k], again[k]) for k in reference)


def saved_student(smoke_cfg, tokenizer, tmp_path, *overrides: str):
    """A freshly built (untrained) student's folder, as a run writes it."""
    from distil.serve.student import write_student
    from distil.students import build_student
    from distil.students.vocab import TrimmedVocab
    from distil.tasks import make_task

    cfg = smoke_cfg(*overrides)
    task = make_task(cfg.dataset)
    vocab = TrimmedVocab(list(range(5, 80)))
    torch.manual_seed(0)
    model = build_student(cfg.student, len(vocab), 2, task, 32)
    out = tmp_path / "student"
    write_student(out, model, vocab, tokenizer, student=OmegaConf.to_container(cfg.student), task=task,
                  labels=["negative", "positive"], teacher_hidden_size=32, representation_head=False,
                  projection="side", max_length=32)
    return out


@pytest.mark.parametrize("overrides", [(), ("student=static", "student.embedding_dim=8")], ids=["bilstm", "static"])
def test_a_saved_student_serves_on_a_chosen_device_in_fp32(smoke_cfg, tokenizer, tmp_path, overrides):
    from distil.serve.student import SavedStudent

    directory = saved_student(smoke_cfg, tokenizer, tmp_path, *overrides)
    texts = ["a gripping , funny film", "dull", "the cat sat on the mat and then it left"]
    plain = SavedStudent(directory)  # outside a runtime: the CPU
    assert plain.runtime == Runtime()
    expected = plain.logits(plain.encode_batch(texts))
    with use(Runtime.resolve(*BF16)):  # the active device, but serving stays in fp32
        served = SavedStudent(directory)
    assert served.runtime == Runtime() and served.to("cpu") is served
    logits = served.logits(served.encode_batch(texts))
    assert logits.device.type == "cpu" and logits.dtype == torch.float32 and torch.equal(logits, expected)
    assert SavedStudent(directory, device="cpu").predict(texts[0]) == plain.predict(texts[0])
    if not torch.cuda.is_available():
        with pytest.raises(DistilError, match="no CUDA GPU"):
            SavedStudent(directory, device="cuda")


def test_distil_predict_takes_a_device(smoke_cfg, tokenizer, tmp_path, capsys):
    from distil.cli.predict import main as predict

    directory = saved_student(smoke_cfg, tokenizer, tmp_path)
    assert predict([str(directory), "a funny film"]) == 0
    default = capsys.readouterr().out
    assert predict([str(directory), "a funny film", "--device", "cpu"]) == 0
    assert capsys.readouterr().out == default
    assert predict([f"run_dir={directory}", "text=a funny film", "device=cpu"]) == 0
    assert capsys.readouterr().out == default and default.endswith("\ta funny film\n")
    assert current() == Runtime()
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as stopped:
            predict([str(directory), "a funny film", "--device", "cuda"])
        assert stopped.value.code == 2
        assert capsys.readouterr().err.startswith("distil predict: error: runtime.device=cuda: this machine has no")


@pytest.mark.heavy
def test_serving_imports_no_training_loop():
    """distil predict loads the serving code alone (the tasks read their losses, nothing else of training)."""
    code = ("import sys, distil.cli.predict, distil.serve.student; "
            "print(sorted(m for m in sys.modules if m.startswith(('distil.training.', 'distil.pretrain', "
            "'distil.teacher', 'distil.run'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "['distil.training.losses']"


def test_distil_pretrain_runs_on_the_runtime_it_is_given_and_bf16_builds_its_own_artifact(tmp_path, monkeypatch,
                                                                                         capsys):
    from tests.test_cli import distil_in_process

    monkeypatch.setattr(logging.root, "handlers", [])  # as in a fresh process: the command's own log lines
    monkeypatch.setattr(logging.root, "level", logging.WARNING)
    args = ["pretrain", "debug=smoke", f"paths.outputs={tmp_path / 'out'}", "pretrain.corpus=transfer",
            "pretrain.steps=6", "pretrain.batch_size=8", "student=transformer-tiny", "runtime.device=cpu"]
    for precision in ("fp32", "bf16"):
        code, out, err = distil_in_process([*args, f"runtime.precision={precision}"], tmp_path, monkeypatch, capsys)
        assert code == 0, err
        assert f"(cpu), {precision}" in err and "(Turc et al.): built" in out
    built = sorted((tmp_path / "out" / "cache" / "pretrained").iterdir())
    assert len(built) == 2
    specs = [json.loads((path / "manifest.json").read_text())["spec"] for path in built]
    assert sorted(spec.get("precision", "fp32") for spec in specs) == ["bf16", "fp32"]
    code, _, err = distil_in_process([*args, "runtime.precision=fp16"], tmp_path, monkeypatch, capsys)
    assert code == 2 and "runtime.precision=fp16 needs a CUDA GPU" in err.strip().splitlines()[-1]


def test_distil_pretrain_takes_trainer_threads(monkeypatch):
    """`distil pretrain trainer.threads=1` builds on one CPU thread, as a run does: left at torch's
    default it crowded the job beside it (a 1-thread table cell) and both slowed ~3x."""
    import distil.cli.pretrain as command

    before = torch.get_num_threads()
    monkeypatch.setattr(command, "_build", lambda cfg, overrides: torch.get_num_threads())
    try:
        assert command.build(["student=sra", "trainer.threads=1"]) == 1
        assert command.build(["student=sra", "trainer.threads=2"]) == 2
    finally:
        torch.set_num_threads(before)
