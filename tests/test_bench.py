"""distil-bench in --quick mode: files, one row per model, honest param counts, every target judged.

No timing assertions: timings depend on the machine and its load; only their presence and sign are checked.
"""

from __future__ import annotations

import pandas as pd
import pytest

from distil import bench
from distil.students.bilstm import BiLSTMClassifier


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench")
    bench.main(["--quick", "--out", str(out), "--examples", "16", "--seq-len", "8"])
    return out


def test_writes_markdown_and_csv(quick_run):
    assert (quick_run / "bench.md").is_file()
    assert (quick_run / "bench.csv").is_file()
    assert not list(quick_run.glob("*.tmp"))  # atomic writes leave no temporaries behind


def test_csv_has_every_model_with_positive_measurements(quick_run):
    table = pd.read_csv(quick_run / "bench.csv")
    names = {spec.name for spec in (*bench.TEACHERS, *bench.STUDENTS)}
    assert set(table["model"]) == names
    assert set(table["kind"]) == {"teacher", "student"}
    assert (table["batch32_ex_per_s"] > 0).all()
    assert (table["online_ms"] > 0).all()
    assert (table["params"] > 0).all()


@pytest.mark.parametrize(("name", "vocab", "embedding", "hidden"), [
    ("BiLSTM E300 H2x300", 30522, 300, 300),
    ("BiLSTM E50 H2x100", 119547, 50, 100),
])
def test_student_params_match_an_independently_built_model(quick_run, name, vocab, embedding, hidden):
    table = pd.read_csv(quick_run / "bench.csv")
    rows = table[table["model"] == name]
    expected = sum(p.numel() for p in BiLSTMClassifier(vocab, embedding, hidden, 2, 0.0).parameters())
    assert (rows["params"] == expected).all()
    assert (rows["vocab"] == vocab).all()


def test_tang_row_is_tangs_architecture(quick_run):
    """Tang Fig. 1 at the Table 2 sizes (E300, H2x150, ReLU layer 200) over bert-large's 30,522 wordpieces:
    embedding + 2 directions x (4 gates x H(E+H) + 2 x 4H biases) + ReLU layer + output, by hand."""
    table = pd.read_csv(quick_run / "bench.csv")
    rows = table[table["model"] == "Tang BiLSTM E300 H2x150 ReLU200"]
    expected = 30522 * 300 + 2 * (4 * 150 * (300 + 150) + 8 * 150) + (300 * 200 + 200) + (200 * 2 + 2)
    assert expected == 9_759_602
    assert list(rows["params"]) == [expected, expected]  # one row per teacher it is compared with
    assert list(rows["vs_teacher"]) == ["bert-base", "bert-large"]


def test_students_are_compared_with_teachers_sharing_their_vocabulary(quick_run):
    table = pd.read_csv(quick_run / "bench.csv")
    xtreme = table[table["model"] == "BiLSTM E50 H2x100"]
    assert list(xtreme["vs_teacher"]) == ["mbert"]
    mbert_params = int(table.loc[table["model"] == "mbert", "params"].iloc[0])
    assert xtreme["compression"].iloc[0] == pytest.approx(mbert_params / xtreme["params"].iloc[0], rel=1e-3)


def test_targets_section_judges_every_check(quick_run):
    text = (quick_run / "bench.md").read_text()
    assert "## Targets" in text
    section = text.split("## Targets", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert len(bench.TARGETS) == 6
    for target in bench.TARGETS:
        matching = [row for row in rows if target.check in row]
        assert len(matching) == 1, target.check
        verdict = [cell.strip() for cell in matching[0].strip().strip("|").split("|")][-1]
        assert verdict in {"met", "not met"}
