"""The tiny teacher fine-tunes and caches; artifacts are reused, keyed by content, sharded,
verified, and resumed after an interrupt."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from distil.run.pipeline import prepare_data
from distil.store.artifacts import ArtifactStore
from distil.tasks import make_task
from distil.teacher import ensure_targets, ensure_teacher, load_finetuned, open_targets
from distil.teacher.cache import shard_name
from distil.teacher.inference import run_teacher


def setup(cfg):
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    return task, data, prepared, ArtifactStore(cfg.paths.cache)


def teacher_and_targets(cfg, layer=None):
    task, data, prepared, store = setup(cfg)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, hub_offline=True)
    targets = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, layer,
                             lambda: load_finetuned(teacher.path, task))
    return task, data, prepared, store, teacher, targets


def shard_bytes(artifact):
    return {p.name: p.read_bytes() for p in sorted(artifact.path.glob("*.safetensors"))}


def test_tiny_teacher_fine_tunes_and_caches(smoke_cfg):
    cfg = smoke_cfg("teacher.finetune.epochs=3", "teacher.finetune.patience=3", "teacher.shard_size=10")
    task, data, prepared, store, teacher, logits_only = teacher_and_targets(cfg)
    history = teacher.info["history"]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert (teacher.path / "model.safetensors").is_file() and not (teacher.path / "finetune-checkpoint.pt").exists()

    with_layer = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1,
                                lambda: load_finetuned(teacher.path, task))
    assert not with_layer.reused and with_layer.key != logits_only.key
    model, tokenizer = load_finetuned(teacher.path, task)
    plain, layered = open_targets(logits_only), open_targets(with_layer)
    for split, examples in prepared.items():
        # shards of 10 examples: the 36 transfer examples are 4 files, the last one of 6
        assert len(list(with_layer.path.glob(f"{split}-*.safetensors"))) == -(-len(examples) // 10)
        assert plain[split].hidden([0]) is None  # no schedule asked for a layer
        logits = layered[split].all_logits()
        hidden = layered[split].hidden(np.arange(len(examples)))
        assert logits.shape == (len(examples), data.num_labels)
        assert hidden.shape == (len(examples), cfg.teacher.random_init.hidden_size)
        assert torch.equal(logits, plain[split].all_logits())
        # what the lazy reader gives back is the teacher's own output, rounded to fp16
        expected, states = run_teacher(model, task, examples, np.arange(len(examples)), tokenizer.pad_token_id,
                                       64, layer=-1)
        assert torch.allclose(logits, torch.stack(expected).half().float())
        # fp16 keeps ~3 digits: the cache's batches and this one's sum in another order, which can move
        # a value across a rounding boundary (seen on a fresh machine), so compare within fp16's precision
        assert torch.allclose(hidden, torch.cat(states), rtol=1e-3, atol=1e-3)
        # rows in any order, across shards
        assert torch.equal(layered[split].logits([7, 2, 15]), logits[[7, 2, 15]])
    shard = load_file(with_layer.path / shard_name("transfer", 3))
    assert shard["logits"].dtype == torch.float16 and shard["logits"].shape == (6, data.num_labels)
    # once a cache with the layer exists, a logits-only run reads it instead of a new pass
    again = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, None, lambda: pytest.fail("ran"))
    assert again.key == with_layer.key and again.reused


def test_tagging_cache_keeps_every_wordpiece_and_word_starts(smoke_cfg):
    cfg = smoke_cfg("dataset=toy-ner", "student=bilstm-tagger", "teacher.shard_size=8")
    task, data, prepared, store, teacher, targets = teacher_and_targets(cfg, layer=-1)
    view = open_targets(targets)["dev"]
    for row in (0, 9, 15):  # across both shards of 8
        assert view.logits([row])[0].shape == (len(prepared["dev"].ids[row]), data.num_labels + 1)
        words = int((prepared["dev"].word_starts[row] >= 0).sum())
        assert view.hidden([row])[0].shape == (words, cfg.teacher.random_init.hidden_size)


def test_second_run_reuses_teacher_and_cache(smoke_cfg):
    cfg = smoke_cfg()
    first = teacher_and_targets(cfg)
    again = teacher_and_targets(cfg)
    assert again[4].reused and again[5].reused
    assert (again[4].key, again[5].key) == (first[4].key, first[5].key)


def test_changing_seed_or_max_length_makes_new_keys(smoke_cfg):
    base = smoke_cfg()
    task, data, prepared, store = setup(base)
    key = ensure_teacher(base.teacher, task, data, prepared, store, base.seed, True).key

    reseeded = smoke_cfg("seed=2")
    _, data2, prepared2, _ = setup(reseeded)
    assert ensure_teacher(reseeded.teacher, task, data2, prepared2, store, reseeded.seed, True).key != key

    shorter = smoke_cfg("teacher.max_length=32")
    _, data3, prepared3, _ = setup(shorter)
    teacher = ensure_teacher(shorter.teacher, task, data3, prepared3, store, shorter.seed, True)
    assert teacher.key != key and not teacher.reused


def test_a_new_transfer_set_runs_the_teacher_on_it_alone(smoke_cfg, monkeypatch):
    """Two transfer sets, one teacher: the second artifact takes the labeled, dev and test shards
    of the first (the same bytes, no teacher pass) and computes only its own transfer split; a
    damaged donor shard is computed instead of copied."""
    cfg = smoke_cfg("teacher.shard_size=10")
    task, data, prepared, store, teacher, first = teacher_and_targets(cfg)
    other = smoke_cfg("teacher.shard_size=10", "transfer_size=none")
    _, data2, prepared2, _ = setup(other)
    assert data2.fingerprint("transfer") != data.fingerprint("transfer")
    victim = first.path / shard_name("test", 0)  # damaged in place: the donor check must refuse it
    raw = bytearray(victim.read_bytes())
    raw[-1] ^= 0xFF
    victim.write_bytes(bytes(raw))
    calls = []
    import distil.teacher.cache as cache_module
    original_shard = cache_module.compute_shard

    def counting(model, task_, split, rows, *args, **kwargs):
        calls.append((split.name, int(rows[0])))
        return original_shard(model, task_, split, rows, *args, **kwargs)

    monkeypatch.setattr(cache_module, "compute_shard", counting)
    second = ensure_targets(other.teacher, teacher, task, data2, prepared2, store, None,
                            lambda: load_finetuned(teacher.path, task))
    assert second.key != first.key and not second.reused
    computed = {name for name, _ in calls}
    assert computed == {"test"} | ({"transfer"} if len(prepared2["transfer"]) else set())
    for split in ("labeled", "dev"):
        for shard in second.path.glob(f"{split}-*.safetensors"):
            assert shard.read_bytes() == (first.path / shard.name).read_bytes()
            assert os.path.samefile(shard, first.path / shard.name)  # a link, not a copy
    # the recomputed test shard is the teacher's output, not the damaged bytes
    model, tokenizer = load_finetuned(teacher.path, task)
    expected, _ = run_teacher(model, task, prepared2["test"], np.arange(len(prepared2["test"])),
                              tokenizer.pad_token_id, 64)
    assert torch.allclose(open_targets(second)["test"].all_logits(), torch.stack(expected).half().float())


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_shard_is_reported_and_only_it_is_rebuilt(smoke_cfg, caplog, damage):
    cfg = smoke_cfg("teacher.shard_size=10")
    task, data, prepared, store, teacher, targets = teacher_and_targets(cfg)
    original = shard_bytes(targets)
    victim = targets.path / shard_name("transfer", 1)
    if damage == "flip":
        raw = bytearray(victim.read_bytes())
        raw[-1] ^= 0xFF
        victim.write_bytes(bytes(raw))
    elif damage == "truncate":
        victim.write_bytes(victim.read_bytes()[:-10])
    else:
        victim.unlink()
    computed = []

    def load():
        computed.append(True)
        return load_finetuned(teacher.path, task)

    calls = []
    import distil.teacher.cache as cache_module
    original_shard = cache_module.compute_shard

    def counting(model, task_, split, rows, *args, **kwargs):
        calls.append((split.name, int(rows[0])))
        return original_shard(model, task_, split, rows, *args, **kwargs)

    cache_module.compute_shard = counting
    try:
        rebuilt = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, None, load)
    finally:
        cache_module.compute_shard = original_shard
    assert not rebuilt.reused and rebuilt.key == targets.key
    assert calls == [("transfer", 10)]  # only the damaged shard ran through the teacher again
    assert shard_bytes(rebuilt) == original
    message = {"flip": "checksum mismatch in transfer-00001", "truncate": "transfer-00001.safetensors is truncated",
               "delete": "missing transfer-00001"}[damage]
    assert any(message in r.getMessage() and "damaged" in r.getMessage() for r in caplog.records)


INTERRUPTED_CACHE = """
import os, sys
from distil.teacher import cache
original = cache.save_file
calls, kill_at, where = 0, int(sys.argv[1]), sys.argv[2]
only_rank = os.environ.get("KILL_ONLY_RANK", os.environ.get("RANK", "0"))  # under torchrun: one rank dies
def dying(tensors, path):
    global calls
    calls += 1
    if calls == kill_at and os.environ.get("RANK", "0") == only_rank:
        if where == "mid":  # killed while writing the shard: half a file on disk
            original(tensors, path)
            os.truncate(path, os.path.getsize(path) // 2)
        os.kill(os.getpid(), 9)
    return original(tensors, path)
cache.save_file = dying
from distil.cli.main import main
sys.argv = ["distil", *sys.argv[3:]]
main()
"""


# kill -9 mid-shard with the heavy tests (CI); at a shard boundary (~12 s more) with the slow tests
@pytest.mark.parametrize("where", [pytest.param("boundary", marks=pytest.mark.slow), "mid"])
@pytest.mark.heavy
def test_cache_killed_mid_build_resumes_byte_identical(tmp_path, where, monkeypatch, capsys):
    """kill -9 while caching; the next run keeps the finished shards and ends with the
    same bytes as a build that was never interrupted."""
    from tests.test_cli import distil_in_process

    args = ["debug=smoke", "teacher.shard_size=10", "trainer.epochs=1"]
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)

    def distil(cwd):  # in this process: only the killed run needs its own
        cwd.mkdir(exist_ok=True)
        code, _, err = distil_in_process(args, cwd, monkeypatch, capsys)
        assert code == 0, err

    distil(tmp_path / "reference")
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    # the 4th shard: labeled 0-9, 10-19, 20-23, then transfer 0-9
    killed = subprocess.run([sys.executable, "-c", INTERRUPTED_CACHE, "4", where, *args], cwd=interrupted,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    build = next(p for p in (interrupted / "outputs/cache/tmp").glob("tiny-*") if p.suffix != ".claims")
    assert sorted(p.name for p in build.glob("*.safetensors")) == [shard_name("labeled", i) for i in range(3)]
    assert [p.name for p in build.glob("*.partial")] == (["transfer-00000.partial"] if where == "mid" else [])
    distil(interrupted)

    def targets(root):
        return next((root / "outputs/cache/targets").iterdir())

    ours, theirs = targets(interrupted), targets(tmp_path / "reference")
    assert ours.name == theirs.name
    assert shard_bytes_of(ours) == shard_bytes_of(theirs)
    manifests = [json.loads((p / "manifest.json").read_text())["files"] for p in (ours, theirs)]
    assert manifests[0] == manifests[1]


def shard_bytes_of(path):
    return {p.name: p.read_bytes() for p in sorted(path.glob("*.safetensors"))}


def test_finetuning_killed_after_an_epoch_resumes_from_its_checkpoint(smoke_cfg, monkeypatch):
    """An interrupted fine-tuning continues from the last finished epoch and ends with the
    same weights as one that was never interrupted."""
    from distil.training.checkpoint import Checkpoint

    cfg = smoke_cfg("teacher.finetune.epochs=3", "teacher.finetune.patience=3")
    task, data, prepared, store = setup(cfg)
    reference_store = ArtifactStore(cfg.paths.cache + "-reference")
    reference = ensure_teacher(cfg.teacher, task, data, prepared, reference_store, cfg.seed, True)

    saved, epochs_seen = Checkpoint.save, []

    def save_then_die(checkpoint, state):
        saved(checkpoint, state)
        epochs_seen.append(state["epoch"])
        if state["epoch"] == 2:
            raise KeyboardInterrupt  # as Ctrl-C after the second epoch's checkpoint
    monkeypatch.setattr(Checkpoint, "save", save_then_die)
    with pytest.raises(KeyboardInterrupt):
        ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, True)
    monkeypatch.setattr(Checkpoint, "save", saved)
    resumed = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, True)
    assert epochs_seen == [1, 2]
    assert resumed.info["history"] == reference.info["history"]
    ours = load_file(resumed.path / "model.safetensors")
    theirs = load_file(reference.path / "model.safetensors")
    assert all(torch.equal(ours[k], theirs[k]) for k in theirs)


def test_reading_thousands_of_shards_keeps_few_files_open(smoke_cfg, monkeypatch):
    from distil.teacher.cache import SplitTargets

    monkeypatch.setattr(SplitTargets, "MAX_OPEN", 2)
    cfg = smoke_cfg("teacher.shard_size=4")
    *_, targets = teacher_and_targets(cfg)
    view = open_targets(targets)["transfer"]  # 36 examples: 9 shards
    everything = view.all_logits()
    source = view.parts[0][0]
    assert sum(shard._fd is not None for shard in source._shards.values()) == 2
    assert torch.equal(view.logits([35, 0, 17]), everything[[35, 0, 17]])  # closed shards reopen


@pytest.mark.parametrize("policy,task,needed,expected", [
    ("auto", "classification", False, -1),  # [CLS] vectors are small: every schedule shares one cache
    ("auto", "tagging", False, None),  # per-token states only when a schedule compares them
    ("auto", "tagging", True, -1),
    ("needed", "classification", False, None),
    ("needed", "pair", True, -1),
])
def test_which_layer_the_cache_holds(smoke_cfg, policy, task, needed, expected):
    from distil.run.plan import layer_to_cache
    from distil.tasks import get_task

    cfg = smoke_cfg(f"teacher.cache_layer={policy}")
    assert layer_to_cache(cfg.teacher, get_task(task), needed) == expected


def test_unknown_cache_layer_policy_is_one_clear_error(smoke_cfg):
    from distil.errors import DistilError
    from distil.run.plan import layer_to_cache
    from distil.tasks import get_task

    with pytest.raises(DistilError, match="unknown teacher.cache_layer 'always'; choose one of: auto, needed"):
        layer_to_cache(smoke_cfg("teacher.cache_layer=always").teacher, get_task("classification"), False)


def test_pair_sentences_apart_are_their_own_cache_and_serve_logits_only_runs(smoke_cfg):
    """Wu et al. §3.1: a pair's sentences cached apart ([n, 2, H] fp16 in each shard) under their
    own key, never mistaken for the joined pair's [CLS]; a logits-only run reuses either."""
    cfg = smoke_cfg("+experiment=smoke-pair", "teacher.shard_size=10")
    task, data, prepared, store = setup(cfg)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, hub_offline=True)

    def load():
        return load_finetuned(teacher.path, task)

    apart = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1, load, apart=True)
    width = cfg.teacher.random_init.hidden_size
    shard = load_file(apart.path / shard_name("transfer", 1))
    assert shard["hidden"].dtype == torch.float16 and shard["hidden"].shape == (10, 2, width)
    assert shard["logits"].shape == (10, data.num_labels)
    logits_only = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, None, lambda: pytest.fail("ran"))
    assert logits_only.key == apart.key and logits_only.reused
    joint = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1, load)
    assert not joint.reused and joint.key != apart.key
    assert load_file(joint.path / shard_name("transfer", 1))["hidden"].shape == (10, width)
    views = {name: open_targets(artifact)["transfer"] for name, artifact in (("apart", apart), ("joint", joint))}
    assert torch.equal(views["apart"].all_logits(), views["joint"].all_logits())  # the joined pair's logits
    assert views["apart"].hidden([3, 12, 25]).shape == (3, 2, width)


def test_only_a_pair_can_be_cached_apart(smoke_cfg):
    cfg = smoke_cfg()
    task, data, prepared, store = setup(cfg)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, hub_offline=True)
    with pytest.raises(ValueError, match="only a pair can be cached apart"):
        ensure_targets(cfg.teacher, teacher, task, data, prepared, store, -1, lambda: pytest.fail("ran"), apart=True)


@pytest.mark.parametrize("task,student,layer,expected", [
    ("pair", "sra", -1, True),  # reads the sentences apart: each is distilled on its own (Wu et al. §3.1)
    ("pair", "siamese", -1, True),
    ("pair", "bilstm", -1, False),  # reads the joined pair: the joint [CLS]
    ("classification", "sra", -1, False),
    ("pair", "siamese", None, False),  # logits only
])
def test_which_students_get_a_pairs_sentences_apart(smoke_cfg, task, student, layer, expected):
    from distil.run.plan import cache_pairs_apart
    from distil.tasks import get_task

    assert cache_pairs_apart(get_task(task), smoke_cfg(f"student={student}").student, layer) is expected
