"""The paper-table presets as data (distil/conf/table/*.yaml), read without the table loader:
every published number sits under a row and column the preset lays out, and every file says
what its cpu scale costs. The loader's own tests build and compose their sweeps."""

from __future__ import annotations

import re

import pytest
import yaml

from distil.config.schema import CONF_DIR
from distil.tables.preset import FORMATS, KINDS, ROWS_FROM, SCALES

PRESETS = sorted((CONF_DIR / "table").glob("*.yaml"))
# The tables of Mukherjee & Awadallah and XtremeDistil that the runner reproduces.
LISTED = [f"mukherjee-table{n}" for n in (3, 4, 5, 6, 7, 8, 9, 10, 12)] + [
    f"xtremedistil-table{n}" for n in (1, 3, 4, 6, 11, 12, 13, 14, 15, 16, 17)]


def load(path):
    return yaml.safe_load(path.read_text())


def test_every_listed_table_has_a_preset():
    assert sorted(set(LISTED) - {p.stem for p in PRESETS}) == []


@pytest.mark.parametrize("path", PRESETS, ids=lambda p: p.stem)
def test_preset_is_consistent(path):
    preset = load(path)
    assert preset["name"] == path.stem
    assert (preset["kind"], preset["format"]) in {(k, f) for k in KINDS for f in FORMATS}
    assert preset["rows_from"] in ROWS_FROM
    # a paper's table has both scales; a scale probe (not a table of the paper) reads the cpu scale's effect
    assert sorted(preset["scales"]) == (["cpu"] if path.stem.endswith("-probe") else sorted(SCALES))
    rows = [r["label"] for r in preset["rows"]]
    columns = [c["label"] for c in preset.get("columns") or []]
    assert len(set(rows)) == len(rows) and len(set(columns)) == len(columns)
    for row, value in preset["paper_values"].items():
        # rows read from a run (stages, languages) are not listed in the preset
        assert preset["rows_from"] is not None or row in rows, f"paper value for unknown row {row!r}"
        for column in value if isinstance(value, dict) else []:
            assert column in columns, f"paper value for unknown column {column!r} of row {row!r}"
    # the budget of `make tables` is kept by these estimates: each file states its own
    assert re.match(r"# cpu scale: ~\d+ minutes?", path.read_text())


def test_mukherjee_table8_soft_column_is_their_full_distillation():
    """Table 8's "soft" numbers are Table 12's RL | LL + CE, not logits alone."""
    preset = load(CONF_DIR / "table" / "mukherjee-table8.yaml")
    soft = next(c for c in preset["columns"] if c["label"] == "Soft Distillation")
    assert soft["overrides"] == ["schedule=rl-llce"]
    twelve = load(CONF_DIR / "table" / "mukherjee-table12.yaml")["paper_values"]
    same_row = {"AG News": "Ag News", "Elec (SST-2 at cpu)": "Elec (SST-2 at cpu)", "DBPedia": "DbPedia",
                "IMDB": "IMDB"}
    for row, values in preset["paper_values"].items():
        assert values["Soft Distillation"] == twelve[f"{same_row[row]} (BERT Large)"]["RL | LL + CE"]


@pytest.mark.parametrize("path", [p for p in PRESETS if load(p)["rows_from"] == "stages"], ids=lambda p: p.stem)
def test_stage_paper_values_are_named_as_the_renderer_names_stage_steps(path):
    """`<stage> <step>` (e.g. "S3 bilstm"), or the stage alone for a stage trained all at once."""
    steps = "projection|bilstm|embeddings|classifier|encoder"
    for row in load(path)["paper_values"]:
        assert re.fullmatch(rf"S\d+( ({steps}))?", row), f"paper value for stage step {row!r}"


def test_tang_table1_paper_values_are_the_slides_table_1():
    """Each published row of Tang Table 1 as the slides print it: Acc, F1/Acc, Acc, Acc."""
    slides = (CONF_DIR.parent.parent.parent / "shared" / "papers" / "tang-2019-distilling-bert-into-bilstm-slides.txt")
    if not slides.is_file():
        pytest.skip("the papers are beside the project in ../shared/papers")
    printed = {"Teacher (BERT Large; MiniLM at cpu)": "1\tBERT _{LARGE} (Devlin et al., 2018)",
               "Distilled BiLSTM_SOFT (labels + augmented)": "6\tDistilled BiLSTM _{SOFT}",
               "BiLSTM (labels only)": "7\tBiLSTM (our implementation)"}
    lines = slides.read_text().splitlines()
    values = load(CONF_DIR / "table" / "tang-table1.yaml")["paper_values"]
    for row, prefix in printed.items():
        [line] = [line for line in lines if line.startswith(prefix)]
        sst2, qqp, mnli_m, mnli_mm = line[len(prefix):].split()
        f1, acc = qqp.split("/")
        ours = values[row]
        assert [ours["SST-2"], ours["QQP F1 (Quora pairs at cpu)"], ours["QQP Acc (Quora pairs at cpu)"],
                ours["MNLI-m"], ours["MNLI-mm"]] == [float(v) for v in (sst2, f1, acc, mnli_m, mnli_mm)]
