"""Issue 54, fair rows in Wu Tables 1 and 3 and Tang Table 1, read from the presets as composed:

- Wu: the KD rows read what the BiLSTM and SRA rows read, the labeled set alone (Wu §4.2, §4.3,
  §5.1.2; §5.3 for Table 3), with the same splits, vocabulary and epoch cap; KD on the labels and the
  column's real unlabeled text (the KD rows before the issue) is a row of its own.
- Tang: every row trains at one batch (50, the slides' "Hyperparameters") with one step minimum,
  and a "logits on labels only" row (eq. 3's loss, alpha = 0, on the labeled set, no augmentation)
  separates augmentation from distillation."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from distil.run.plan import training_batch_size
from distil.run.schedule import stage_epochs
from distil.tables.cells import cell_specs
from distil.tables.load import load_preset
from tests.conftest import compose_config


def composed_cells(name: str, scale: str) -> dict[tuple[str, str | None], object]:
    """(row, column) -> the composed config of its first seed's first selection option."""
    out = {}
    for row, column, _, overrides in cell_specs(load_preset(name), scale):
        if (row, column) not in out:
            out[(row, column)] = compose_config(*overrides[:-1])
    return out


def stage_data(cfg) -> list[list[str]]:
    return [list(stage.data) for stage in cfg.schedule.stages]


def loss_weights(cfg) -> dict[str, float]:
    return {name: float(w) for name, w in OmegaConf.to_container(cfg.schedule.stages[0].losses, resolve=True).items()}


WU = {"wu-table1": {"BiLSTM": "BiLSTM (our implementation)", "SRA": "BiLSTM_SRA (Ours)",
                    "KD": ["BiLSTM_KD (Tang et al.)", "BiLSTM_SRA+KD"],
                    "unlabeled": {"BiLSTM_KD (Tang et al.)": "BiLSTM_KD + unlabeled text",
                                  "BiLSTM_SRA+KD": "BiLSTM_SRA+KD + unlabeled text"},
                    "teacher": "BERT_BASE (teacher; MiniLM-L6 at cpu)"},
      "wu-table3": {"BiLSTM": "BiLSTM", "SRA": "BiLSTM_SRA", "KD": ["BiLSTM_KD"],
                    "unlabeled": {"BiLSTM_KD": "BiLSTM_KD + unlabeled text"}, "teacher": "BERT_LARGE (MiniLM at cpu)"}}


@pytest.mark.parametrize("name", sorted(WU))
@pytest.mark.parametrize("scale", ["cpu", pytest.param("paper", marks=pytest.mark.slow)])
@pytest.mark.heavy
def test_wu_kd_rows_read_the_labeled_set_as_the_bilstm_and_sra_rows(name, scale):
    rows, cells = WU[name], composed_cells(name, scale)
    columns = sorted({column for _, column in cells}, key=str)
    for column in columns:
        plain = cells[(rows["BiLSTM"], column)]
        for kd in rows["KD"]:
            cfg = cells[(kd, column)]
            assert loss_weights(cfg)["logit_mse"] > 0 and loss_weights(cfg)["ce"] == 0  # still Tang's KD
            # the data of the BiLSTM and SRA rows: the labeled set, nothing unlabeled
            assert stage_data(cfg) == stage_data(plain) == stage_data(cells[(rows["SRA"], column)]) == [["labeled"]]
            # the same splits and vocabulary (the transfer set drawn, only not trained on) and epoch cap
            assert cfg.transfer_size == plain.transfer_size and cfg.augment == plain.augment
            assert (stage_epochs(cfg.schedule.stages[0], cfg.trainer)
                    == stage_epochs(plain.schedule.stages[0], plain.trainer))
            # "+ unlabeled text": the same KD on the labels and the column's unlabeled set, a row of its own
            more = cells[(rows["unlabeled"][kd], column)]
            assert stage_data(more) == [["labeled", "transfer"]] and more.schedule.name == cfg.schedule.name
            assert more.transfer_size == cfg.transfer_size
    # the teacher's row reads the KD row's own runs (no run of its own)
    preset = load_preset(name)
    assert preset.row(rows["teacher"]).overrides_for(scale) == preset.row(rows["KD"][0]).overrides_for(scale)


@pytest.mark.parametrize("name", sorted(WU))
def test_wu_notes_say_what_the_kd_rows_read_and_cite_wu(name):
    preset = load_preset(name)
    assert "unlabeled" in preset.notes and "§4.2" in preset.notes
    for row in WU[name]["unlabeled"].values():
        assert preset.row(row) is not None and row not in preset.paper_values  # not a paper row


TANG = "tang-table1"
LABELS_ONLY, LOGITS_ONLY = "BiLSTM (labels only)", "BiLSTM_SOFT (logits on labels only)"


@pytest.mark.heavy
def test_tang_every_row_trains_at_the_distilled_rows_batch_with_one_step_minimum():
    """Before: the labels-only row alone had min_steps=300, and on the pairs a batch of 32 (d0 reads the
    siamese student's default) where the distilled rows had schedule=bilstm-soft's 50."""
    cells = composed_cells(TANG, "cpu")
    settings = {key: (training_batch_size(cfg)[0], cfg.trainer.min_steps) for key, cfg in cells.items()}
    assert set(settings.values()) == {(50, 300)}, settings
    assert load_preset(TANG).scales["cpu"].seeds == [1, 2, 3]


def test_tang_has_a_logits_on_labels_only_row_that_differs_from_labels_only_in_the_loss_alone():
    cells = composed_cells(TANG, "cpu")
    columns = {column for _, column in cells}
    for column in columns:
        logits, labels = cells[(LOGITS_ONLY, column)], cells[(LABELS_ONLY, column)]
        distilled = cells[("Distilled BiLSTM_SOFT (labels + augmented)", column)]
        assert loss_weights(logits) == loss_weights(distilled) == {"ce": 0.0, "logit_mse": 2.0}  # eq. 3, alpha = 0
        assert loss_weights(labels) == {"ce": 1.0}
        assert logits.augment.method == labels.augment.method == "none" and distilled.augment.method == "tang"
        assert logits.transfer_size == labels.transfer_size
        assert stage_data(logits) == stage_data(labels) == [["labeled"]]
        assert stage_epochs(logits.schedule.stages[0], logits.trainer) == stage_epochs(labels.schedule.stages[0],
                                                                                       labels.trainer)
        assert training_batch_size(logits) == training_batch_size(labels)
    preset = load_preset(TANG)
    teacher = preset.row("Teacher (BERT Large; MiniLM at cpu)")
    assert teacher.overrides_for("cpu") == preset.row(LABELS_ONLY).overrides_for("cpu")
    assert LOGITS_ONLY in preset.notes and "Hyperparameters" in preset.notes


def test_tang_distilled_row_reads_every_augmented_copy_and_the_real_rows_as_many_examples():
    """The slides' procedure: n_iter copies of every labeled example (20 for a sentence, 10 for a pair),
    duplicates dropped, none capped; the real-unlabeled rows draw 14,000 (the augmented SST-2 set's size)."""
    cells = composed_cells(TANG, "cpu")
    sst2 = cells[("Distilled BiLSTM_SOFT (labels + augmented)", "SST-2")]
    assert sst2.augment.method == "tang" and sst2.augment.max_examples is None and sst2.augment.n_iter is None
    assert sst2.transfer_size.name == "none"  # the augmented copies are its whole transfer set
    for row in ("BiLSTM_SOFT (labels + real unlabeled, same size)",
                "BiLSTM_SOFT (labels + augmented + real unlabeled)"):
        assert cells[(row, "SST-2")].transfer_size.count == 14000
    assert cells[("BiLSTM_SOFT (labels + augmented + real unlabeled)", "SST-2")].augment.max_examples is None


@pytest.mark.heavy
def test_mukherjee_table6_paper_scale_labels_every_imdb_training_review_and_reads_the_official_test():
    """Their IMDB row fine-tunes on the labeled train set (25,000; here 24,000 beside the 1,000 dev
    reviews) and scores on the 25,000 test reviews: 12,500 per class cannot be drawn after dev."""
    cells = composed_cells("mukherjee-table6", "paper")
    for (row, _), cfg in cells.items():
        if row == "IMDB":
            assert cfg.dataset.split.labeled_per_class is None and cfg.dataset.files.test == "test.tsv.gz"
            assert cfg.transfer_size.source == "file"


@pytest.mark.parametrize("name", ["mukherjee-table8", "mukherjee-table10", "mukherjee-table12"])
@pytest.mark.parametrize("scale", ["cpu", "paper"])
@pytest.mark.heavy
def test_mukherjee_wordpiece_students_keep_the_teachers_whole_vocabulary(name, scale):
    """M&A §6 (Table 7): "wordpiece tokenization with 30K fixed vocabulary size": the wordpiece students
    of Tables 8, 10 and 12 (with and without distillation, every schedule) keep every teacher wordpiece, not
    the trimmed table that student=bilstm defaults to; Table 10's RNN reads words, its own vocabulary."""
    cells = composed_cells(name, scale)
    for (row, column), cfg in cells.items():
        if column == "RNN":
            assert cfg.student.name == "rnn", (row, column)
        else:
            assert (cfg.student.name, cfg.student.vocabulary) == ("bilstm", "full"), (row, column)
