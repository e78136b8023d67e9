"""scripts/teacher_pooling_probe.py, the linear probe that chose Wu's pooling at cpu scale (agnostic=cpu-long,
results/probes/teacher-pooling.md): on a toy SST-2 and a stand-in teacher whose [CLS] carries nothing
and whose wordpieces carry the label, the [CLS] probe must score the majority class and the mean probe
every sentence; then what `main` writes, and how a bad override stops it."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from distil.errors import DistilError
from tests.conftest import load_script

GOOD, BAD = ("good", "fine", "great"), ("bad", "dull", "awful")


@pytest.fixture(scope="module")
def script():
    return load_script("teacher_pooling_probe")


def sentences(count: int, offset: int) -> list[tuple[str, int]]:
    """Balanced: a positive sentence holds one of GOOD, a negative one of BAD, among words of neither."""
    rows = []
    for i in range(offset, offset + count):
        label = i % 2
        word = (GOOD if label else BAD)[i % 3]
        rows.append((f"in scene {i} the film was {word} and the plot {['moved', 'ran', 'went'][i % 3]} on", label))
    return rows


@pytest.fixture
def toy_sst2(tmp_path) -> list[str]:
    """A toy copy of dataset=sst2's files (train, dev, labeled test, unlabeled sentences) and the
    overrides that read it with 4 labeled sentences a class."""
    folder = tmp_path / "data" / "sst2"
    folder.mkdir(parents=True)
    for name, rows in (("train.tsv", sentences(40, 0)), ("dev.tsv", sentences(10, 100)),
                       ("test_labeled.tsv", sentences(12, 200))):
        (folder / name).write_text("sentence\tlabel\n" + "".join(f"{t}\t{y}\n" for t, y in rows))
    (folder / "unlabeled_sst_train_sentences.txt").write_text("".join(f"{t}\n" for t, _ in sentences(20, 300)))
    return [f"paths.data_dir={tmp_path / 'data'}", "dataset.split.labeled_per_class=4", "transfer_size=none"]


class WordsNotCLS(torch.nn.Module):
    """A stand-in teacher: its top layer is zero at [CLS] and, at every other wordpiece, (is one of
    GOOD, is one of BAD). So the mean over the wordpieces separates the classes and [CLS] cannot."""

    def __init__(self, tokenizer):
        super().__init__()
        self.config = SimpleNamespace(hidden_size=2)
        self.good = torch.tensor(tokenizer.convert_tokens_to_ids(list(GOOD)))
        self.bad = torch.tensor(tokenizer.convert_tokens_to_ids(list(BAD)))

    def forward(self, input_ids, attention_mask):
        states = torch.stack([torch.isin(input_ids, self.good), torch.isin(input_ids, self.bad)], dim=-1).float()
        states[:, 0] = 0.0
        return SimpleNamespace(last_hidden_state=states)


@pytest.fixture
def teacher(script):
    tokenizer = script.load_tokenizer(script.compose_run_config(script.BASE).teacher, True)
    return WordsNotCLS(tokenizer), tokenizer


def test_the_cls_probe_scores_the_majority_and_the_mean_probe_every_sentence(script, toy_sst2, teacher):
    rows = {row["pooling"]: row for row in script.probe(toy_sst2, 1, *teacher)}
    assert set(rows) == {"cls", "mean"}
    # [CLS] is the same vector for every sentence: every C fits a constant, the first C is kept
    assert rows["cls"]["C"] == script.CS[0] and rows["cls"]["dev"] == 0.5 and rows["cls"]["test"] == 0.5
    assert rows["mean"]["dev"] == 1.0 and rows["mean"]["test"] == 1.0
    assert rows["mean"]["labeled"] == 8 and rows["mean"]["seed"] == 1


def test_main_writes_every_seeds_rows_and_a_page_with_the_command(script, toy_sst2, teacher, tmp_path, monkeypatch):
    monkeypatch.setattr(script, "load_encoder", lambda cfg, offline: teacher[0])
    monkeypatch.setattr(script, "OUT", tmp_path / "probes")
    monkeypatch.setattr(script, "SEEDS", (1, 2))
    assert script.main(toy_sst2) == 0
    table = pd.read_csv(tmp_path / "probes" / "teacher-pooling.csv")
    assert sorted(zip(table.seed, table.pooling, strict=True)) == [(1, "cls"), (1, "mean"), (2, "cls"), (2, "mean")]
    page = (tmp_path / "probes" / "teacher-pooling.md").read_text()
    assert "each seed's 8 labeled sentences" in page and "seeds 1, 2" in page
    assert f"`python scripts/teacher_pooling_probe.py {' '.join(toy_sst2)}`" in page
    summary = [line.split("|")[2:-1] for line in page.splitlines() if line.startswith(("| cls", "| mean"))]
    # dev mean, dev std, test mean, test std (%), cls then mean
    assert [[float(cell) for cell in row] for row in summary] == [[50, 0, 50, 0], [100, 0, 100, 0]]


def test_a_bad_override_is_a_distil_error_before_any_teacher_loads(script, monkeypatch):
    monkeypatch.setattr(script, "load_encoder", lambda cfg, offline: pytest.fail("loaded a teacher"))
    with pytest.raises(DistilError, match="nosuchgroup"):
        script.main(["nosuchgroup=1"])
