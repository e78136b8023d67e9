"""Turc's figures pre-train once per run seed wherever a cell reads pre-training.

Before, every seed of turc-fig6/7/8 fine-tuned or distilled the one pre-trained student of
pretrain.seed 0, so the spread over seeds left out pre-training's variance. Now each cell whose
student starts pre-trained (PF, PD, PDF: Turc et al. §3 step 1, §5.1) sets pretrain.seed=${seed}:
it composes, resolves to the run seed, and gives each seed its own pre-training artifact; the
cells that never read pre-training keep their keys. Nothing is trained here.
"""

import pytest

from distil.config.compose import compose_run_config
from distil.pretrain.mlm import pretrain_spec
from distil.store.artifacts import ArtifactStore
from distil.tables.cells import _result_config, cell_specs
from distil.tables.load import load_preset

PRESETS = ("turc-fig6", pytest.param("turc-fig7", marks=pytest.mark.slow), "turc-fig8")  # fig7: 30 cells, ~7 s
SEED_OVERRIDE = "pretrain.seed=${seed}"


def pretraining_key(cfg) -> str:
    """The pre-trained artifact's key this run would read (tokenizer and corpus held fixed)."""
    spec = pretrain_spec(cfg.pretrain, cfg.student.num_layers, cfg.student.hidden_size, {"vocab": "v"}, "corpus",
                         cfg.pretrain.seed)
    return ArtifactStore("unused").key(f"bert-L{cfg.student.num_layers}-H{cfg.student.hidden_size}", spec)


@pytest.mark.parametrize("name", PRESETS)
@pytest.mark.parametrize("scale", ["cpu", pytest.param("paper", marks=pytest.mark.slow)])  # composing is the cost
@pytest.mark.heavy
def test_every_cell_that_reads_pretraining_follows_the_run_seed(name, scale):
    preset = load_preset(name)
    keys: dict[tuple, dict[int, str]] = {}
    reads = 0
    for row, column, seed, overrides in cell_specs(preset, scale):
        cfg = compose_run_config(overrides)
        pretrained = cfg.schedule.student_init == "pretrained"
        assert (SEED_OVERRIDE in overrides) == pretrained, (scale, row, column)
        if not pretrained:
            # its key as before: pretrain.seed stays at its default, left out of the cell key
            assert cfg.pretrain.seed == 0
            assert "seed" not in _result_config(tuple(overrides[:-1]), None).get("pretrain", {})
            continue
        reads += 1
        assert cfg.pretrain.seed == seed == cfg.seed, (scale, row, column)
        keys.setdefault((row, column), {})[seed] = pretraining_key(cfg)
    assert reads, f"{name} {scale}: no cell reads pre-training"
    for cell, by_seed in keys.items():
        assert len(set(by_seed.values())) == len(by_seed), (scale, cell, by_seed)  # one artifact per seed


def test_a_cell_of_another_seed_reads_another_pretraining_of_the_same_size():
    base = ["dataset=sst2", "teacher=minilm", "transfer_size=5k", "student=transformer-tiny", "schedule=pd",
            SEED_OVERRIDE]
    one, two = compose_run_config([*base, "seed=1"]), compose_run_config([*base, "seed=2"])
    assert (one.pretrain.seed, two.pretrain.seed) == (1, 2)
    assert pretraining_key(one) != pretraining_key(two)
    # the pre-training seed is the only difference: the same seed gives the same artifact
    assert pretraining_key(one) == pretraining_key(compose_run_config([*base, "seed=1"]))
    fixed = compose_run_config([*base[:-1], "seed=2"])
    assert fixed.pretrain.seed == 0 and pretraining_key(fixed) != pretraining_key(two)


def test_the_long_budget_composes_and_keeps_the_held_out_lines_out_of_training():
    cfg = compose_run_config(["student=transformer-tiny", "teacher=minilm", "pretrain=cpu-long", "pretrain.seed=1"])
    assert (cfg.pretrain.name, cfg.pretrain.steps, cfg.pretrain.batch_size) == ("cpu-long", 18000, 64)
    assert cfg.pretrain.max_sentences + cfg.pretrain.heldout_sentences <= 427017  # the corpus's lines
    assert pretraining_key(cfg) != pretraining_key(compose_run_config(["student=transformer-tiny", "teacher=minilm",
                                                                      "pretrain.seed=1"]))
