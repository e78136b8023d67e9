"""Guards on what may influence what: test labels choose nothing, the teacher learns from the
labeled split alone, and `teacher.layer=k` caches the teacher's hidden_states[k]."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from distil.run.pipeline import prepare_data, run
from distil.store.artifacts import ArtifactStore
from distil.tasks import make_task
from distil.teacher import ensure_targets, ensure_teacher, load_finetuned, open_targets

TOY = Path(__file__).resolve().parent.parent / "distil" / "resources" / "toy"


def toy_copy(root: Path, relabel_test: bool = False) -> Path:
    """The toy dataset copied under `root`; with `relabel_test`, every test example labelled `food`
    (any predictor scores differently on it, a constant one included)."""
    shutil.copytree(TOY, root)
    if relabel_test:
        lines = (root / "test.tsv").read_text().splitlines()
        moved = [lines[0]] + [f"{line.rsplit(chr(9), 1)[0]}\tfood" for line in lines[1:]]
        (root / "test.tsv").write_text("\n".join(moved) + "\n")
    return root


def test_changing_test_labels_changes_no_weight_and_no_dev_score(smoke_cfg, tmp_path):
    runs = {}
    for name, relabel in (("gold", False), ("relabelled", True)):
        data = toy_copy(tmp_path / f"data-{name}", relabel_test=relabel)
        cfg = smoke_cfg(f"dataset.path={data}", f"paths.cache={tmp_path / name / 'cache'}", "schedule=d4.1")
        run_dir = tmp_path / name / "run"
        metrics = run(cfg, run_dir, {}, [])
        runs[name] = (metrics, load_file(run_dir / "student" / "model.safetensors"))
    (gold, gold_weights), (moved, moved_weights) = runs["gold"], runs["relabelled"]
    assert gold["student"]["test"]["accuracy"] != moved["student"]["test"]["accuracy"]  # the change reached test
    assert gold_weights.keys() == moved_weights.keys()
    for name in gold_weights:
        assert torch.equal(gold_weights[name], moved_weights[name]), name
    for a, b in zip(gold["student"]["stages"], moved["student"]["stages"], strict=True):
        assert (a["dev"], a["best_epoch"], a["history"]) == (b["dev"], b["best_epoch"], b["history"])
    assert gold["teacher"]["dev"] == moved["teacher"]["dev"]
    # everything the fine-tuning recorded but its wall-clock time, which a busy machine moves
    untimed = [{k: v for k, v in m["teacher"]["finetune"].items() if k != "seconds"} for m in (gold, moved)]
    assert untimed[0] == untimed[1]


def test_teacher_is_fine_tuned_on_the_labeled_split_alone(smoke_cfg, tmp_path):
    """Scramble the transfer and test rows the teacher could read: its weights stay byte-identical."""
    weights = []
    for name in ("clean", "scrambled"):
        cfg = smoke_cfg(f"paths.cache={tmp_path / name}")
        task = make_task(cfg.dataset)
        data, prepared = prepare_data(cfg, task)
        if name == "scrambled":
            rng = np.random.default_rng(0)
            for split in ("transfer", "test"):
                ids = prepared[split].ids
                ids.values[:] = rng.integers(1000, 2000, size=ids.values.shape)  # other wordpieces, same lengths
                prepared[split].labels[:] = torch.from_numpy(rng.integers(0, 3, size=len(prepared[split])))
        teacher = ensure_teacher(cfg.teacher, task, data, prepared, ArtifactStore(cfg.paths.cache), cfg.seed, True)
        weights.append(load_file(teacher.path / "model.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    for key in weights[0]:
        assert torch.equal(weights[0][key], weights[1][key]), key


@pytest.mark.parametrize("layer", [0, 1, -1])
def test_teacher_layer_k_caches_hidden_states_k(smoke_cfg, layer):
    """Checked against the teacher called directly through transformers, not through the cache's own code."""
    cfg = smoke_cfg(f"teacher.layer={layer}")
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    store = ArtifactStore(cfg.paths.cache)
    teacher = ensure_teacher(cfg.teacher, task, data, prepared, store, cfg.seed, True)
    targets = ensure_targets(cfg.teacher, teacher, task, data, prepared, store, layer,
                             lambda: load_finetuned(teacher.path, task))
    cached = open_targets(targets)["dev"].hidden([3])[0]
    model, tokenizer = load_finetuned(teacher.path, task)
    encoded = tokenizer(prepared["dev"].examples["text"][3], return_tensors="pt")
    with torch.no_grad():
        states = model(**encoded, output_hidden_states=True).hidden_states
    assert len(states) == cfg.teacher.random_init.num_hidden_layers + 1  # embeddings + every layer
    expected = states[layer][0, 0]  # the [CLS] position of layer k (0: the embeddings)
    assert torch.allclose(cached, expected, atol=2e-3)
    others = [k for k in range(len(states)) if k != layer % len(states)]
    assert all(not torch.allclose(cached, states[k][0, 0], atol=2e-3) for k in others)
