"""Issue 54, Wu's task-agnostic stage in the presets: Table 4 varies the corpus size at one update count
with one held-out set (agnostic=cpu-long, Wu §4.3 and §5.4), and every cell that reads the stage
distils it with its own run seed (agnostic.seed=${seed}), while the cells that do not read it keep
the keys they had."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from distil.pretrain.sra import agnostic_spec
from distil.store.artifacts import spec_hash
from distil.tables.cells import _result_config, cell_specs, compose_cell, expand
from distil.tables.load import load_preset
from tests.conftest import compose_config

CORPUS_LINES = 427_017  # ../shared/data/README: wikipedia-sentences
TABLE4 = "wu-table4"
SIZES = {"1M / 106k": 106_250, "2M / 212k": 212_500, "4M / 425k": None}


def composed(name: str, scale: str, seeds: int = 2) -> dict[tuple[str, str | None, int], tuple]:
    """(row, column, seed) -> (overrides, composed config) of its first selection option."""
    out = {}
    preset = load_preset(name)
    for row, column, seed, overrides in cell_specs(preset, scale):
        if seed in preset.scales[scale].seeds[:seeds] and (row, column, seed) not in out:
            out[(row, column, seed)] = (overrides, compose_cell(overrides, None, name))
    return out


def reads_agnostic(cfg) -> bool:
    return cfg.schedule.student_init == "pretrained" and cfg.student.kind == "sra"


def test_cpu_long_is_every_line_for_thousands_of_updates_with_the_corpus_end_held_out():
    cfg = compose_config("student=sra", "agnostic=cpu-long").agnostic
    assert (cfg.max_sentences, cfg.batch_size, cfg.heldout, cfg.heldout_sentences) == (None, 128, "end", 2000)
    training = CORPUS_LINES - cfg.heldout_sentences
    assert cfg.steps == -(-training // cfg.batch_size) == 3321  # one pass over every training line
    default = compose_config("student=sra").agnostic  # agnostic=cpu: as it was (196 updates)
    assert (default.steps, default.heldout, default.max_sentences, default.batch_size) == (None, "after", 50000, 1024)


def test_cpu_long_distils_the_minilm_teachers_mean_pooled_vector_and_the_others_keep_cls():
    """The cpu teacher is a sentence-transformer trained to give the mean over its wordpieces (the
    linear probe: results/probes/teacher-pooling.md); Wu's BERT gives [CLS], the schema's default,
    which agnostic=paper keeps, and agnostic=cpu keeps it so its recorded cells keep their keys."""
    assert compose_config("student=sra", "agnostic=cpu-long").agnostic.pooling == "mean"
    for group in ("cpu", "paper"):
        assert compose_config("student=sra", f"agnostic={group}").agnostic.pooling == "cls", group


@pytest.mark.heavy
def test_table4_rows_vary_the_corpus_size_alone_at_one_update_count_and_held_out_set():
    preset = load_preset(TABLE4)
    assert preset.scales["cpu"].seeds == [1, 2, 3]
    cells = composed(TABLE4, "cpu", seeds=3)
    specs = {}
    for (row, _, seed), (_, cfg) in cells.items():
        if row == "0M / 0":
            assert not reads_agnostic(cfg)
            continue
        assert reads_agnostic(cfg)
        agnostic = cfg.agnostic
        assert (agnostic.name, agnostic.steps, agnostic.batch_size, agnostic.heldout) == ("cpu-long", 3321, 128, "end")
        assert agnostic.max_sentences == SIZES[row] and agnostic.seed == seed == cfg.seed
        student = OmegaConf.to_container(cfg.student)
        specs[(row, seed)] = spec_hash(agnostic_spec(agnostic, {"teacher": "minilm"}, student, row, 384))
        assert specs[(row, seed)] == spec_hash(agnostic_spec(agnostic, {"teacher": "minilm"}, student, row, 384))
    # one task-agnostic student per size and seed, shared by the row's columns
    assert len(set(specs.values())) == len(SIZES) * 3
    # 1 : 2 : 4, as the paper's 1M, 2M, 4M (the largest: every line before the 2,000 held out)
    assert 4 * SIZES["1M / 106k"] == 2 * SIZES["2M / 212k"] == 425_000 <= CORPUS_LINES - 2000
    keys = {(cell.row, cell.column, cell.seed, cell.choice): cell.key for cell in expand(preset, "cpu")}
    for row in SIZES:
        assert len({keys[(row, "SST-2 Acc", seed, "trainer.lr=5e-4")] for seed in (1, 2, 3)}) == 3


@pytest.mark.parametrize("name", [pytest.param("wu-table1", marks=pytest.mark.slow),  # 192 cells to compose: ~12 s
                                  "wu-table3", "wu-table4", "wu-fig2"])
@pytest.mark.parametrize("scale", ["cpu", pytest.param("paper", marks=pytest.mark.slow)])
def test_every_cell_that_reads_the_agnostic_stage_follows_the_run_seed_and_no_other_cell_names_it(name, scale):
    """A cell that does not read the stage has no agnostic seed in its key (the seed sits on the rows
    that read it, so the other rows keep their older keys; at cpu scale they name no
    agnostic setting at all); one that reads it distils with the run's seed."""
    cells = composed(name, scale)
    assert any(reads_agnostic(cfg) for _, cfg in cells.values())
    for (row, column, seed), (overrides, cfg) in cells.items():
        result = _result_config(tuple(overrides[:-1]), None)
        if reads_agnostic(cfg):
            assert cfg.agnostic.seed == seed, (row, column)
            assert result["agnostic"]["seed"] == "${seed}", (row, column)
        else:
            assert "seed" not in result.get("agnostic", {}), (row, column)
            assert scale != "cpu" or "agnostic" not in result, (row, column)
