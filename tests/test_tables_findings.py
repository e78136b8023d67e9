"""distil.tables.findings through write_table: each of the paper's claims, judged on our seeds."""

from __future__ import annotations

import json

import pytest

from distil.errors import DistilError
from distil.tables.preset import Axis, Cell, Finding, Scale, TablePreset
from distil.tables.render import write_table

ROWS, COLUMNS = ["SST-2", "IMDB", "AG"], ["hard", "soft"]
PAPER = {"SST-2": {"soft": 93.56, "hard": 92.57}, "IMDB": {"soft": 91.70, "hard": 91.21},
         "AG": {"soft": 94.33, "hard": 93.17}}


def run(row: str, column: str, seed: int, accuracy: float, improving: bool = False) -> Cell:
    stage = {"name": "S1", "step": "all", "best_epoch": 30 if improving else 4, "epochs_run": 30 if improving else 7}
    return Cell(row=row, column=column, seed=seed, overrides=[], key=f"{row}-{column}-{seed}",
                metrics={"status": "ok", "student": {"test": {"accuracy": accuracy}, "stages": [stage]}})


def table(finding: Finding, seeds=(1, 2, 3)) -> TablePreset:
    return TablePreset(name="mukherjee-table8", paper="Mukherjee & Awadallah (2019)", table="Table 8",
                       title="soft vs hard",
                       scales={"cpu": Scale(seeds=list(seeds))}, rows=[Axis(r) for r in ROWS],
                       columns=[Axis(c) for c in COLUMNS], paper_values=PAPER, findings=[finding])


SOFT = Finding(claim="soft distillation beats hard distillation", better="soft", worse="hard", section="§6.3")
CELLS = (
    # SST-2: soft 80.1, 81.3, 79.8 against hard 78.0, 78.9, 77.2: +2.37, Welch [+0.50, +4.23] -> reproduced
    [run("SST-2", "soft", s, v) for s, v in ((1, 0.801), (2, 0.813), (3, 0.798))]
    + [run("SST-2", "hard", s, v) for s, v in ((1, 0.780), (2, 0.789), (3, 0.772))]
    # IMDB: soft 80.1, 81.3, 79.8 against 79.0, 80.9, 78.2: +1.03 [-1.81, +3.88] -> consistent
    + [run("IMDB", "soft", s, v) for s, v in ((1, 0.801), (2, 0.813), (3, 0.798))]
    + [run("IMDB", "hard", s, v) for s, v in ((1, 0.790), (2, 0.809), (3, 0.782))]
    # AG: two seeds only -> not judged
    + [run("AG", c, s, 0.9) for c in COLUMNS for s in (1, 2)]
)


def findings_of(tmp_path, preset: TablePreset, cells: list[Cell]) -> tuple[str, list[dict]]:
    write_table(preset, cells, tmp_path)
    return ((tmp_path / f"{preset.name}.md").read_text(),
            json.loads((tmp_path / f"{preset.name}.findings.json").read_text()))


def test_a_claim_read_in_several_groups_takes_its_weakest_judged_verdict(tmp_path):
    text, record = findings_of(tmp_path, table(SOFT), CELLS)
    assert ("1. *soft distillation beats hard distillation* (§6.3), soft > hard: **consistent**\n"
            "   - SST-2: paper 93.56 vs 92.57 (+0.99); ours 80.40 vs 78.03: +2.37 [+0.50, +4.23] (n=3, 3) "
            "→ reproduced\n"
            "   - IMDB: paper 91.70 vs 91.21 (+0.49); ours 80.40 vs 79.37: +1.03 [-1.81, +3.88] (n=3, 3) → consistent\n"
            "   - AG: paper 94.33 vs 93.17 (+1.16); ours 90.00 vs 90.00: +0.00 [+0.00, +0.00] (n=2, 2) "
            "→ not judged: fewer than 3 seeds") in text
    assert record[0]["verdict"] == "consistent"
    assert [r["verdict"] for r in record[0]["readings"]] == ["reproduced", "consistent", "not judged"]
    assert record[0]["readings"][0]["low"] == pytest.approx(0.4984, abs=1e-3)


def test_a_reversal_the_interval_excludes_contradicts_and_one_within_it_is_inconclusive(tmp_path):
    flipped = Finding(claim="hard beats soft", better="hard", worse="soft", groups=["SST-2"])
    _, record = findings_of(tmp_path, table(flipped), CELLS)
    assert record[0]["verdict"] == "contradicts"
    flipped = Finding(claim="hard beats soft", better="hard", worse="soft", groups=["IMDB"])
    _, record = findings_of(tmp_path, table(flipped), CELLS)
    assert record[0]["verdict"] == "inconclusive"


def test_a_run_still_improving_leaves_its_comparison_not_judged(tmp_path):
    cells = [c for c in CELLS if not (c.row == "SST-2" and c.column == "hard" and c.seed == 3)]
    cells.append(run("SST-2", "hard", 3, 0.772, improving=True))
    one = Finding(claim="soft beats hard", better="soft", worse="hard", groups=["SST-2"])
    text, record = findings_of(tmp_path, table(one), cells)
    assert record[0]["verdict"] == "not judged"
    assert record[0]["reason"] == "1 run still improving"
    assert "→ not judged: 1 run still improving" in text


def test_reaching_within_a_margin_shifts_the_same_test(tmp_path):
    # IMDB hard 79.37 against soft 80.40: -1.03 [-3.88, +1.81]; with a 4-point margin the shifted
    # interval [+0.12, +5.81] leaves out zero: hard reaches soft; with 1.5, +0.47 [-2.38, +3.31]: consistent
    reach = Finding(claim="hard reaches soft", better="hard", worse="soft", relation=">=", margin=4.0, groups=["IMDB"])
    text, record = findings_of(tmp_path, table(reach), CELLS)
    assert record[0]["verdict"] == "reproduced"
    assert "hard reaches (at most 4 below) soft: **reproduced**" in text
    reach = Finding(claim="hard reaches soft", better="hard", worse="soft", relation=">=", margin=1.5, groups=["IMDB"])
    assert findings_of(tmp_path, table(reach), CELLS)[1][0]["verdict"] == "consistent"


def test_a_scale_without_the_mechanism_is_not_comparable_whatever_the_numbers(tmp_path):
    missing = Finding(claim="soft beats hard", better="soft", worse="hard",
                      not_comparable={"cpu": "pre-training at the unigram level"})
    text, record = findings_of(tmp_path, table(missing), CELLS)
    assert record[0]["verdict"] == "not comparable"
    assert "soft > hard: **not comparable**: pre-training at the unigram level" in text


def test_a_finding_must_name_two_rows_or_two_columns(tmp_path):
    from distil.tables.load import check_preset

    bad = table(Finding(claim="x", better="soft", worse="SST-2"))
    with pytest.raises(DistilError, match="better and worse must name two rows or two columns"):
        check_preset(bad, "mukherjee-table8.yaml")
    bad = table(Finding(claim="x", better="soft", worse="hard", groups=["Elec"]))
    with pytest.raises(DistilError, match="groups names 'Elec'"):
        check_preset(bad, "mukherjee-table8.yaml")
    bad = table(Finding(claim="x", better="soft", worse="hard", margin=1.0))
    with pytest.raises(DistilError, match="only with relation: '>='"):
        check_preset(bad, "mukherjee-table8.yaml")
    bad = table(Finding(claim="x", better="soft", worse="hard", probe="tang-table1-probes"))
    with pytest.raises(DistilError, match="probe names table 'tang-table1-probes', which is not a preset"):
        check_preset(bad, "mukherjee-table8.yaml")
    bad = table(Finding(claim="x", better="soft", worse="hard", explanation={"gpu": "more data"}))
    with pytest.raises(DistilError, match="explanation names scale 'gpu'; choose from: cpu, paper"):
        check_preset(bad, "mukherjee-table8.yaml")


def test_a_teacher_key_whose_runs_record_different_scores_is_reported_in_one_line(tmp_path):
    cells = [run("SST-2", c, s, 0.8) for c in COLUMNS for s in (1, 2, 3)]
    for i, cell in enumerate(cells):
        cell.metrics |= {"metric": "accuracy", "artifacts": {"teacher": "minilm-f0941cefb33abdae"},
                         "teacher": {"test": {"accuracy": 0.8127 if i < 4 else 0.8122}}}
    write_table(table(SOFT), cells, tmp_path)
    assert ("Teacher minilm-f0941cefb33abdae: its runs record test 81.27 (4 runs) and 81.22 (2 runs): one key, "
            "different weights") in (tmp_path / "mukherjee-table8.md").read_text()


def test_a_finding_reports_the_cpu_minutes_of_the_runs_it_reads_each_run_once(tmp_path):
    cells = [run("SST-2", c, s, 0.8 + s / 100) for c in COLUMNS for s in (1, 2, 3)]
    for i, cell in enumerate(cells):
        cell.metrics["seconds"] = 60.0 * (i + 1)  # 1 + 2 + ... + 6 minutes
    preset = table(Finding(claim="soft beats hard", better="soft", worse="hard", groups=["SST-2"]))
    _, record = findings_of(tmp_path, preset, cells)
    assert record[0]["minutes"] == 21.0


def test_a_claim_short_of_runs_names_the_command_that_judges_it_and_its_cost_at_its_runs_pace(tmp_path):
    """The group nearest a verdict (AG: two seeds a side, where IMDB has none) and the minutes its two
    missing runs take, each at its side's pace (hard 60 and 120 s, soft 180 and 240 s: 90 + 210 s)."""
    cells = [run("AG", c, s, 0.9) for c in COLUMNS for s in (1, 2)] + [run("SST-2", "soft", 1, 0.8)]
    for cell, seconds in zip(cells, (60, 120, 180, 240), strict=False):
        cell.metrics["seconds"] = seconds
    text, record = findings_of(tmp_path, table(SOFT), cells)
    assert record[0]["verdict"] == "not judged"
    assert record[0]["to_judge"] == ["distil table mukherjee-table8 --only AG --only soft --only hard", 5]
    assert ("   - to judge it: `distil table mukherjee-table8 --only AG --only soft --only hard` (~5 CPU minutes at "
            "the pace of its runs so far, besides any teacher or pre-trained student a new seed builds)"
            ) in text.splitlines()
    # each side at its own pace: soft's two missing runs at 180 s, hard's one at 90 s (not 3 x 120 s)
    _, record = findings_of(tmp_path, table(SOFT), [c for c in cells if c.key != "AG-soft-2"])
    assert record[0]["to_judge"][1] == round((2 * 180 + 90) / 60)
    # a label with a space is quoted; with no run yet, no pace
    spaced = Finding(claim="x", better="soft", worse="hard", groups=["SST-2 (low)"])
    preset = table(spaced)
    preset.rows.append(Axis("SST-2 (low)"))
    _, record = findings_of(tmp_path, preset, CELLS)
    assert record[0]["to_judge"] == ["distil table mukherjee-table8 --only 'SST-2 (low)' --only soft --only hard",
                                     None]
    # a group that is no row or column (a curve's epoch, where rows come from the runs) gets no --only
    _, record = findings_of(tmp_path, table(Finding(claim="z", better="soft", worse="hard", groups=["epoch 1"])),
                            CELLS)
    assert record[0]["to_judge"] == ["distil table mukherjee-table8 --only soft --only hard", None]
    # judged, or short only of a run that still improves: nothing to run
    _, record = findings_of(tmp_path, table(SOFT), CELLS)
    assert record[0]["to_judge"] is None
    improving = [c for c in CELLS if c.row == "SST-2"][:-1] + [run("SST-2", "hard", 3, 0.772, improving=True)]
    _, record = findings_of(tmp_path, table(Finding(claim="y", better="soft", worse="hard", groups=["SST-2"])),
                            improving)
    assert (record[0]["verdict"], record[0]["to_judge"]) == ("not judged", None)


def test_a_consistent_claim_gives_the_seeds_a_side_that_would_separate_it_and_their_runs_minutes(tmp_path):
    """IMDB's +1.03 (std 0.79 and 1.39 over 3 seeds) would need 21 seeds a side (seeds_to_separate):
    18 more a side at a minute a seed, 36 CPU minutes; the claim's other groups plan nothing."""
    cells = [run(c.row, c.column, c.seed, c.metrics["student"]["test"]["accuracy"]) for c in CELLS]
    for cell in cells:
        cell.metrics["seconds"] = 60.0
    text, record = findings_of(tmp_path, table(SOFT), cells)
    assert [r["needed"] for r in record[0]["readings"]] == [None, 21, None]
    assert record[0]["to_separate"] == [21, 36]
    assert ("   - to separate it: ~21 seeds a side to find it significant 80% of the time, were this difference "
            "and spread the true ones; ~36 CPU minutes of runs at their pace so far, besides any teacher or "
            "pre-trained student a new seed builds") in text.splitlines()
    # reproduced, or reversed: no plan
    _, record = findings_of(tmp_path, table(Finding(claim="r", better="soft", worse="hard", groups=["SST-2"])), cells)
    assert (record[0]["verdict"], record[0]["to_separate"]) == ("reproduced", None)
    _, record = findings_of(tmp_path, table(Finding(claim="i", better="hard", worse="soft", groups=["IMDB"])), cells)
    assert (record[0]["verdict"], record[0]["to_separate"]) == ("inconclusive", None)


def test_a_choice_on_dev_costs_every_option_it_read(tmp_path):
    """With `select`, a seed's number is its best option on dev, but every option ran: the finding's
    minutes and a new seed's pace count both learning rates (60 s the chosen, 30 s the other), and an
    option stopped still improving leaves the choice, and so the number, still improving."""
    cells = []
    for column in COLUMNS:
        for seed in (1, 2, 3):
            for choice, dev, seconds in (("trainer.lr=5e-4", 0.70, 60.0), ("trainer.lr=1e-3", 0.60, 30.0)):
                cell = run("SST-2", column, seed, 0.8 + seed / 100 + (column == "soft") / 10)
                cell.key, cell.choice = f"{cell.key}-{choice}", choice
                cell.metrics.update(seconds=seconds)
                cell.metrics["student"]["dev"] = {"accuracy": dev}
                cells.append(cell)
    preset = table(Finding(claim="s", better="soft", worse="hard", groups=["SST-2"]))
    preset.select = {"over": ["trainer.lr=5e-4", "trainer.lr=1e-3"], "by": "student.dev.accuracy"}
    _, record = findings_of(tmp_path, preset, cells)
    assert record[0]["minutes"] == 6 * 90 / 60
    assert len(record[0]["runs"]) == 12
    assert record[0]["verdict"] == "reproduced"
    # an option not chosen but stopped at its cap still improving: the choice compared unequal budgets
    cells[-1].metrics["student"]["stages"] = [{"name": "S1", "step": "all", "best_epoch": 30, "epochs_run": 30}]
    text, record = findings_of(tmp_path, preset, cells)
    assert record[0]["verdict"] == "not judged" and record[0]["readings"][0]["why"] == "1 run still improving"
    assert "(n=3, 1 still improving)" in text
