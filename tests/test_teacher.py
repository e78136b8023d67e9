"""The tiny teacher fine-tunes and caches; artifacts are reused and keyed by content."""

import torch

from distil.data import build_task_data
from distil.store import ArtifactStore
from distil.teacher import ensure_targets, ensure_teacher, load_targets


def prepare(cfg):
    data = build_task_data(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed)
    return data, ArtifactStore(cfg.paths.cache)


def test_tiny_teacher_fine_tunes_and_caches(smoke_cfg):
    cfg = smoke_cfg("teacher.finetune.epochs=3", "teacher.finetune.patience=3")
    data, store = prepare(cfg)
    teacher = ensure_teacher(cfg.teacher, data, store, cfg.seed, hub_offline=True)
    history = teacher.info["history"]
    assert history[-1]["train_loss"] < history[0]["train_loss"]
    assert (teacher.path / "model.safetensors").is_file() and (teacher.path / "manifest.json").is_file()

    logits_only = ensure_targets(cfg.teacher, teacher, data, store)
    with_layer = ensure_targets(cfg.teacher, teacher, data, store, with_hidden=True)
    assert not with_layer.reused and with_layer.key != logits_only.key
    for split, ds in data.splits.items():
        assert "hidden" not in load_targets(logits_only, split)  # no schedule asked for a layer
        cached = load_targets(with_layer, split)
        assert cached["logits"].shape == (len(ds), data.num_labels)
        assert cached["hidden"].shape == (len(ds), cfg.teacher.random_init.hidden_size)
        assert cached["logits"].dtype == torch.float16
        assert torch.isfinite(cached["logits"].float()).all()
        assert torch.equal(cached["logits"], load_targets(logits_only, split)["logits"])
    # once a cache with the layer exists, a logits-only run reads it instead of a new pass
    again = ensure_targets(cfg.teacher, teacher, data, store)
    assert again.key in (logits_only.key, with_layer.key) and again.reused


def test_second_run_reuses_teacher_and_cache(smoke_cfg):
    cfg = smoke_cfg()
    data, store = prepare(cfg)
    first = ensure_teacher(cfg.teacher, data, store, cfg.seed, True)
    first_targets = ensure_targets(cfg.teacher, first, data, store)
    again = ensure_teacher(cfg.teacher, data, store, cfg.seed, True)
    again_targets = ensure_targets(cfg.teacher, again, data, store)
    assert again.reused and again_targets.reused
    assert (again.key, again_targets.key) == (first.key, first_targets.key)


def test_changing_seed_or_max_length_makes_new_keys(smoke_cfg):
    base = smoke_cfg()
    data, store = prepare(base)
    key = ensure_teacher(base.teacher, data, store, base.seed, True).key

    reseeded = smoke_cfg("seed=2")
    data2, _ = prepare(reseeded)
    assert ensure_teacher(reseeded.teacher, data2, store, reseeded.seed, True).key != key

    shorter = smoke_cfg("teacher.max_length=32")
    teacher = ensure_teacher(shorter.teacher, data, store, shorter.seed, True)
    assert teacher.key != key and not teacher.reused
