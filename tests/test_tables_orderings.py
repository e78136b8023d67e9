"""distil.tables.orderings through write_table: the paper's order against ours, judged by the spread."""

from __future__ import annotations

import pytest

from distil.tables.preset import Axis, Cell, Scale, TablePreset
from distil.tables.render import write_table


def run(row: str, column: str, seed: int, accuracy: float) -> Cell:
    return Cell(row=row, column=column, seed=seed, overrides=[], key=f"{row}-{column}-{seed}",
                metrics={"status": "ok", "student": {"test": {"accuracy": accuracy}}})


def preset(compare: str | None, rows: list[str], columns: list[str], paper: dict) -> TablePreset:
    return TablePreset(name="paper-table10", paper="Mukherjee & Awadallah (2019)", table="Table 10", title="500 labels",
                       scales={"cpu": Scale(seeds=[1, 2])}, rows=[Axis(r) for r in rows],
                       columns=[Axis(c) for c in columns], paper_values=paper, compare=compare)


COLUMNS = ["RNN", "no distil.", "distil."]
PAPER = {"AG": {"RNN": 85.03, "no distil.": 85.85, "distil.": 90.45},
         "IMDB": {"RNN": 52.94, "no distil.": 61.53, "distil.": 89.08}}
CELLS = [
    # AG: distil. 84.00 and no distil. 83.50, each on two seeds that agree exactly, and RNN 78.00 ± 2.83:
    # the seed variance pooled over the row is (0 + 0 + 8) / 3 on 3 df, the standard error of a
    # difference of two-seed means sqrt(8/3) = 1.63, the margin t(0.975, 3) = 3.182 times it, 5.20.
    # distil. - no distil. = +0.50 is within it (the pair's own spread, 0, would call it beyond);
    # no distil. - RNN = +5.50 is beyond it (the pair's own, variance 4 on 2 df: 4.303 x 2 = 8.61,
    # would call it within)
    run("AG", "distil.", 1, 0.84), run("AG", "distil.", 2, 0.84),
    run("AG", "no distil.", 1, 0.835), run("AG", "no distil.", 2, 0.835),
    run("AG", "RNN", 1, 0.76), run("AG", "RNN", 2, 0.80),
    # IMDB: one seed each, reversed; RNN not run, so its pair is left out
    run("IMDB", "distil.", 1, 0.70), run("IMDB", "no distil.", 1, 0.75),
]


def test_columns_are_ranked_within_each_row_and_judged_by_the_seed_variance_pooled_over_the_row(tmp_path):
    write_table(preset("columns", ["AG", "IMDB"], COLUMNS, PAPER), CELLS, tmp_path)
    text = (tmp_path / "paper-table10.md").read_text()
    assert ("**Orderings against the paper's** (within each row, each pair of neighbours in the paper's order, "
            "the paper's better one first; our difference; \"beyond the spread\": a t-test at 95% counts it, "
            "|difference| > t(0.975, df) standard errors, the seed variance and its df pooled over the row).\n"
            "The paper's order holds in 2 of 3 pairs: 1 beyond the "
            "spread, 0 reversed beyond the spread, 1 on one seed (not judged).\n\n"
            "- AG: distil. > no distil.: holds (+0.50, within the spread); "
            "no distil. > RNN: holds (+5.50, beyond the spread)\n"
            "- IMDB: distil. > no distil.: reversed (-5.00, one seed, not judged)\n") in text
    # the pool the verdicts used, printed: s = sqrt(8/3) on 1 + 1 + 1 degrees; IMDB has no spread
    assert text.count("Seed spread pooled") == 1
    assert ("Seed spread pooled over each row: the pooled sample std s, its degrees of freedom, and the "
            "margin t(0.975, df) x SE a difference of two means must pass: AG s = 1.63 on 3 df, margin 5.20 "
            "(means of 2 seeds).\n") in text


def test_rows_are_ranked_within_each_column_and_a_paper_tie_states_no_order(tmp_path):
    paper = {"D0": {"2x": 70.0, "5x": 71.0}, "D1": {"2x": 75.0, "5x": 71.0}, "D2": {"2x": 80.0, "5x": 74.0}}
    cells = [run("D0", "2x", s, v) for s, v in ((1, 0.60), (2, 0.62))] + \
            [run("D1", "2x", s, v) for s, v in ((1, 0.70), (2, 0.74))] + \
            [run("D2", "2x", s, v) for s, v in ((1, 0.50), (2, 0.52))] + \
            [run(r, "5x", s, 0.5) for r in ("D0", "D1", "D2") for s in (1, 2)]
    write_table(preset("rows", ["D0", "D1", "D2"], ["2x", "5x"], paper), cells, tmp_path)
    text = (tmp_path / "paper-table10.md").read_text()
    # at 2x: D2 > D1 reversed by 21 points, far beyond; D1 > D0 holds by 11. At 5x the paper ties
    # D0 and D1 (no order between them), and ours ties D2 with D0
    assert ("- 2x: D2 > D1: reversed (-21.00, beyond the spread); D1 > D0: holds (+11.00, beyond the spread)\n"
            "- 5x: D2 > D0: tied (+0.00, within the spread)\n") in text
    assert "The paper's order holds in 1 of 3 pairs: 1 beyond the spread, 1 reversed beyond the spread" in text


def test_without_compare_there_is_no_orderings_paragraph(tmp_path):
    write_table(preset(None, ["AG", "IMDB"], COLUMNS, PAPER), CELLS, tmp_path)
    assert "Orderings" not in (tmp_path / "paper-table10.md").read_text()


def test_a_difference_is_beyond_the_spread_when_the_pooled_t_test_counts_it():
    from distil.tables.orderings import Spread, beyond_spread

    # sample variances 2 and 2, n 2 and 2: pooled 2 on 2 df, the difference's standard error sqrt(2),
    # the margin t(0.975, 2) x sqrt(2) = 4.303 x 1.414 = 6.085 (2 SE, the old rule, would be 2.83)
    assert beyond_spread([5.08, 7.08], [-1.0, 1.0]) is False  # means 6.08 apart
    assert beyond_spread([5.09, 7.09], [-1.0, 1.0]) is True  # 6.09 apart
    assert beyond_spread([1.0, 3.0, 2.0], [0.0]) is None  # one value: nothing to judge
    # a group's pooled spread given: variance 0.5 on 10 df over n 2 and 2, SE 0.707, t(0.975, 10) = 2.228
    spread = Spread(variance=0.5, degrees=10, seeds=2)
    assert beyond_spread([1.0, 1.0], [-0.57, -0.57], spread) is False  # 1.57 apart, the margin 1.5755
    assert beyond_spread([1.0, 1.0], [-0.58, -0.58], spread) is True  # 1.58 apart


def test_the_seed_variance_is_pooled_by_degrees_of_freedom():
    from distil.tables.orderings import beyond_spread, pooled_spread, pooled_variance

    # variances 2 (n 2, 1 degree) and 1/3 (n 4, 3 degrees): (1 x 2 + 3 x 1/3) / 4 = 0.75, not their
    # plain mean 1.17; a one-value sample adds nothing, and with none left there is no estimate
    assert pooled_variance([[1.0, 3.0], [0.0, 1.0, 0.0, 1.0], [9.0]]) == pytest.approx(0.75)
    assert pooled_spread([[1.0, 3.0], [0.0, 1.0, 0.0, 1.0], [9.0]]).degrees == 4
    assert pooled_variance([[9.0], []]) is None
    # by default a pair pools its own two: 0.75 on 4 df over n 2 and 4, SE 0.75, margin 2.776 x 0.75 = 2.082
    assert beyond_spread([1.0, 3.0], [-0.6, 0.4, -0.6, 0.4]) is True  # 2.1 apart
    assert beyond_spread([1.0, 3.0], [-0.5, 0.5, -0.5, 0.5]) is False  # 2.0 apart


def test_a_teacher_row_is_left_out_of_the_columns_pool(tmp_path):
    # Wu Table 1's BERT row read from the students' runs: its two seeds are two teacher fine-tunes
    # (18 apart here), a noise the students' comparison must not borrow. Students A 81, 83 and B 74,
    # 76 pool to s^2 = 2 on 2 df, margin t(0.975, 2) x sqrt(2) = 6.08: A - B = +7.00 is beyond it.
    # With the teacher's variance (162) in the pool, the margin would be 3.182 x 7.44 = 23.7 and the
    # same +7.00 within.
    def both(row, seed, student, teacher):
        return Cell(row=row, column="SST-2", seed=seed, overrides=[], key=f"{row}-{seed}",
                    metrics={"status": "ok", "student": {"test": {"accuracy": student}},
                             "teacher": {"test": {"accuracy": teacher}}})
    table = TablePreset(name="wu-table1", paper="Wu et al. (2019)", table="Table 1", title="SRA",
                        scales={"cpu": Scale(seeds=[1, 2])},
                        rows=[Axis("BERT", reads="teacher"), Axis("A"), Axis("B")], columns=[Axis("SST-2")],
                        paper_values={"BERT": {"SST-2": 93.5}, "A": {"SST-2": 90.0}, "B": {"SST-2": 84.5}},
                        compare="rows")
    cells = [both("BERT", 1, 0.0, 0.89), both("BERT", 2, 0.0, 0.71),
             both("A", 1, 0.81, 0.5), both("A", 2, 0.83, 0.5), both("B", 1, 0.74, 0.5), both("B", 2, 0.76, 0.5)]
    write_table(table, cells, tmp_path)
    text = (tmp_path / "wu-table1.md").read_text()
    assert ("- SST-2: BERT > A: reversed (-2.00, within the spread); A > B: holds (+7.00, beyond the spread)\n"
            in text)
    assert ("Seed spread pooled over each column (the teacher's row left out): the pooled sample std s, its "
            "degrees of freedom, and the margin t(0.975, df) x SE a difference of two means must pass: "
            "SST-2 s = 1.41 on 2 df, margin 6.08 (means of 2 seeds).") in text
