"""distil.tables.render and scripts/readme_results.py: cells built by hand, nothing is run."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from distil.errors import DistilError
from distil.tables.preset import Axis, Cell, Scale, TablePreset
from distil.tables.render import write_table
from tests.conftest import load_script

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OOM = "failed: CUDA out of memory while caching the teacher's logits for the transfer set of 100k"


def ok(**scores) -> dict:
    return {"status": "ok", "student": {"test": scores}}


def preset(**fields) -> TablePreset:
    base = dict(name="paper-table3", paper="XtremeDistil (ACL 2020)", table="Table 3", title="Strategies",
                scales={"cpu": Scale(base=[], seeds=[1, 2])}, rows=[Axis("D0"), Axis("D1")],
                paper_metric="accuracy (SST-2)")
    return TablePreset(**{**base, **fields})


def cell(row: str, seed: int, metrics: dict | None = None, column: str | None = None, error: str | None = None):
    return Cell(row=row, column=column, seed=seed, overrides=[], key=f"{row}-{column}-{seed}", metrics=metrics,
                error=error)


SEEDED = [cell("D0", 1, ok(accuracy=0.80)), cell("D0", 2, ok(accuracy=0.82)),
          cell("D1", 1, {"status": OOM}), cell("D1", 2)]


def md_rows(path) -> list[list[str]]:
    """The md table's header and body rows (the separator left out), as stripped cells."""
    lines = [line for line in path.read_text().splitlines() if line.startswith("|")]
    return [[c.strip() for c in line.split("|")[1:-1]] for line in [lines[0], *lines[2:]]]


def test_seeds_are_mean_std_and_n_beside_the_paper_with_the_difference(tmp_path):
    paths = write_table(preset(paper_values={"D0": 80.0, "D1": 75.5}), SEEDED, tmp_path)
    assert [p.name for p in paths] == ["paper-table3.md", "paper-table3.csv", "paper-table3.tex",
                                       "paper-table3.summary.json"]
    rows = md_rows(tmp_path / "paper-table3.md")
    cut = OOM[:59] + "…"  # a failed cell shows its error, cut to 60 characters
    assert rows == [["", "ours", "paper", "Δ"],
                    ["D0", "81.00 ± 1.41 (n=2)", "80.00", "+1.00"],
                    ["D1", cut, "75.50", "–"]]
    text = (tmp_path / "paper-table3.md").read_text()
    assert text.startswith("<!-- table: paper-table3 -->\n### XtremeDistil (ACL 2020), Table 3: Strategies\n")
    assert ("Paper's metric: accuracy (SST-2). Δ = ours − paper (percentage points). "
            "Several seeds: mean ± sample std (n = seeds with a number). \"still improving\": seeds whose run "
            "stopped at an epoch cap with its last epoch its best on dev, in some step of its schedule.\n") in text
    assert text.endswith("Scale: cpu; seeds: 1, 2; cells: 2 done (0 still improving), 1 failed, 1 not run.\n")


def test_a_parameter_column_shows_millions_beside_the_papers_and_the_legend_says_which_delta_is_points(tmp_path):
    # XtremeDistil Tables 15/16: F1 (percent) beside params (M) read from a raw count in metrics.json
    columns = [Axis("F1", value="student.test.f1", format="percent"),
               Axis("params (M)", value="student.param_counts.full_teacher_vocab", format="millions")]
    metrics = {"status": "ok", "student": {"test": {"f1": 0.2309}, "param_counts": {"full_teacher_vocab": 1_654_321}}}
    cells = [cell("D0", 1, metrics, column=label) for label in ("F1", "params (M)")]
    write_table(preset(rows=[Axis("D0")], columns=columns, scales={"cpu": Scale(base=[], seeds=[1])},
                       paper_values={"D0": {"F1": 80.26, "params (M)": 4.7}}), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["D0", "23.09", "80.26", "-57.17", "1.65", "4.70", "-3.05"]
    assert ("Δ = ours − paper (percentage points in F1; the others in their own units)."
            in (tmp_path / "paper-table3.md").read_text())


def test_a_cell_empty_by_design_shows_a_dash_not_the_missing_path(tmp_path):
    # Wu Table 4: a student never distilled has no distillation loss; its accuracy column still reads the run
    columns = [Axis("Distillation Loss", value="student.pretrained.validation_loss", format="number"),
               Axis("SST-2 Acc", value="student.test.accuracy")]
    metrics = ok(accuracy=0.7271)
    cells = [cell("D0", 1, metrics, column=label) for label in ("Distillation Loss", "SST-2 Acc")]
    shown = dict(rows=[Axis("D0")], columns=columns, scales={"cpu": Scale(base=[], seeds=[1])})
    write_table(preset(**shown, empty={"D0": ["Distillation Loss"]}), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["D0", "–", "72.71"]
    write_table(preset(**shown), cells, tmp_path)  # without `empty`, the absent path is the cell's error
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["D0", "no student.pretrained.validation_loss in metrics.json",
                                                        "72.71"]


def test_a_pipe_in_a_label_is_escaped_so_the_md_row_keeps_its_cells(tmp_path):
    # Mukherjee Table 12's schedules read "RL | LL + CE": unescaped, the '|' split its column
    schedules = [Axis("RL | LL + CE"), Axis("RL + LL + CE")]
    cells = [cell("D0", 1, ok(accuracy=0.8), column="RL | LL + CE"),
             cell("D0", 1, ok(accuracy=0.7), column="RL + LL + CE")]
    write_table(preset(rows=[Axis("D0")], columns=schedules), cells, tmp_path)
    lines = [line for line in (tmp_path / "paper-table3.md").read_text().splitlines() if line.startswith("|")]
    cells_of = [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]  # split at bare '|'
    assert cells_of[0] == ["", "RL \\| LL + CE", "RL + LL + CE"]
    assert cells_of[2] == ["D0", "80.00", "70.00"]


def test_csv_and_tex_hold_the_numbers_of_the_md(tmp_path):
    write_table(preset(paper_values={"D0": 80.0}), SEEDED, tmp_path)
    csv = pd.read_csv(tmp_path / "paper-table3.csv")
    d0, d1 = csv.iloc[0], csv.iloc[1]
    assert (d0["row"], d0["mean"], round(d0["std"], 6), d0["n"], d0["paper"], round(d0["diff"], 6)) == (
        "D0", 81.0, 1.414214, 2, 80.0, 1.0)
    assert (d1["n"], d1["failed"], d1["not_run"], d1["error"]) == (0, 1, 1, OOM)
    tex = (tmp_path / "paper-table3.tex").read_text()
    assert r"D0 & 81.00 $\pm$ 1.41 (n=2) & 80.00 & +1.00 \\" in tex
    assert r"\caption{XtremeDistil (ACL 2020), Table 3: Strategies}" in tex


def test_a_seed_that_failed_is_counted_beside_the_mean_of_the_others(tmp_path):
    cells = [cell("D0", 1, ok(accuracy=0.80)), cell("D0", 2, ok(accuracy=0.90)), cell("D0", 3, {"status": OOM})]
    write_table(preset(rows=[Axis("D0")]), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["D0", "85.00 ± 7.07 (n=2, 1 failed)"]


def test_a_seed_still_to_run_is_not_counted_as_failed(tmp_path):
    cells = [cell("D0", 1, ok(accuracy=0.80)), cell("D0", 2, error="not run"), cell("D0", 3, {"status": OOM}),
             cell("D1", 1, ok(accuracy=0.70)), cell("D1", 2)]
    write_table(preset(rows=[Axis("D0"), Axis("D1")]), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1:] == [["D0", "80.00 (n=1, 1 failed, 1 not run)"],
                                                          ["D1", "70.00 (n=1, 1 not run)"]]


def test_columns_get_an_ours_paper_difference_group_only_where_the_paper_has_numbers(tmp_path):
    cells = [cell("D0", 1, ok(accuracy=0.7126), "0.7M"), cell("D0", 1, ok(accuracy=0.5), "5k"),
             cell("D1", 1, ok(accuracy=0.75), "0.7M")]
    p = preset(columns=[Axis("0.7M"), Axis("5k")], paper_values={"D0": {"0.7M": 71.26}, "D1": {"0.7M": 74.0}},
               format="percent")
    write_table(p, cells, tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows == [["", "0.7M", "0.7M (paper)", "0.7M Δ", "5k"],
                    ["D0", "71.26", "71.26", "+0.00", "50.00"],
                    ["D1", "75.00", "74.00", "+1.00", "not run"]]


def stage(name: str, step: str, f1: float) -> dict:
    return {"name": name, "step": step, "dev": {"f1": f1 - 0.1}, "test": {"f1": f1}}


def test_stage_rows_are_the_progression_of_each_column_run(tmp_path):
    metrics = {"status": "ok", "student": {"test": {"f1": 0.6}, "stages": [
        stage("S1", "all", 0.2), stage("S2", "classifier", 0.5), stage("S2", "encoder", 0.6)]}}
    p = preset(rows=[Axis("d4.2")], rows_from="stages", value="student.test.f1", format="percent",
               paper_values={"S2 encoder": 88.0})
    write_table(p, [cell("d4.2", 1, metrics)], tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows == [
        ["stage", "ours", "paper", "Δ"],
        ["S1", "20.00", "–", "–"], ["S2 classifier", "50.00", "–", "–"], ["S2 encoder", "60.00", "88.00", "-28.00"]]


def test_language_rows_are_the_per_language_scores(tmp_path):
    metrics = {"status": "ok", "student": {"test": {"f1": 0.7, "per_language": {"en": 0.8, "de": 0.6}}}}
    p = preset(rows=[Axis("d4.2")], rows_from="languages", value="student.test.f1", paper_values={"de": 70.0})
    write_table(p, [cell("d4.2", 1, metrics)], tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows == [
        ["language", "ours", "paper", "Δ"], ["en", "80.00", "–", "–"], ["de", "60.00", "70.00", "-10.00"]]


def test_bench_rows_are_picked_by_model_and_column(tmp_path):
    pd.DataFrame([{"model": "bert-base", "params": 109_483_778, "speedup": 27.31},
                  {"model": "bilstm", "params": 13_000_000, "speedup": 1.0}]).to_csv(tmp_path / "bench.csv")
    p = preset(kind="bench", rows=[Axis("bert-base"), Axis("tang")], columns=[Axis("params"), Axis("speedup")],
               format="count", paper_values={"bert-base": {"speedup": 64}})
    write_table(p, [], tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows == [
        ["model", "params", "speedup", "speedup (paper)", "speedup Δ"],
        ["bert-base", "109,483,778", "27.3", "64", "-36.7"],
        ["tang", "no model 'tang' in bench.csv", "no model 'tang' in bench.csv", "–", "–"]]
    assert (tmp_path / "paper-table3.md").read_text().endswith(
        "Measured by `distil-bench` on this machine (bench.csv, no record of when); rows: 1 done, 1 failed.\n")


def test_a_bench_table_without_bench_csv_says_to_run_the_bench(tmp_path):
    with pytest.raises(DistilError) as error:
        write_table(preset(kind="bench"), [], tmp_path)
    assert str(error.value) == (f"table paper-table3: {tmp_path / 'bench.csv'} does not exist: "
                                "run `make bench` (distil-bench) first")


def test_data_rows_are_dataset_summaries_and_an_unknown_dataset_is_its_row_error(tmp_path):
    p = preset(kind="data", rows=[Axis("toy", ["dataset=toy"]), Axis("nope", ["dataset=nope"])],
               columns=[Axis("labels"), Axis("test")], format="count", scales={"cpu": Scale()})
    write_table(p, [], tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    unknown = "failed: unknown dataset 'nope'; choose one of: ag_news, bbc…"  # the row's error, cut
    assert rows == [["dataset", "labels", "test"], ["toy", "3", "24"], ["nope", unknown, unknown]]
    assert (tmp_path / "paper-table3.md").read_text().endswith(
        "Scale: cpu; dataset summaries as `distil-data` computes them (no training); rows: 1 done, 1 failed.\n")


@pytest.mark.parametrize("plot", [{"x": "columns", "kind": "line"},
                                  {"x": "speed.speedup", "y": "student.test.accuracy", "kind": "scatter"}],
                         ids=["line", "scatter"])
def test_a_plot_is_written_as_a_png(tmp_path, plot):
    cells = [cell(row, seed, {**ok(accuracy=0.7 + seed / 100), "speed": {"speedup": 10.0 * seed}}, column)
             for row in ("D0", "D1") for column in ("0.7M", "5k") for seed in (1, 2)]
    p = preset(columns=[Axis("0.7M"), Axis("5k")], paper_values={"D0": {"0.7M": 71.26}}, plot=plot)
    paths = write_table(p, cells, tmp_path)
    assert paths[-1] == tmp_path / "paper-table3.png"
    assert paths[-1].read_bytes()[:8] == PNG_MAGIC


@pytest.mark.parametrize("paper_values, ylabel", [
    ({}, "test accuracy (%)"),
    ({"D0": {"0.7M": 71.26}}, "test accuracy (%); the paper's: accuracy (SST-2)"),
], ids=["ours-only", "with-the-papers"])
def test_a_plots_y_axis_names_our_metric_and_the_papers_only_where_it_is_drawn(tmp_path, monkeypatch,
                                                                               paper_values, ylabel):
    """turc-fig8's axis read 'accuracy on Amazon Book Reviews' over our SST-2 numbers."""
    from distil.tables import plots

    drawn = {}
    monkeypatch.setattr(plots, "line", lambda xs, series, label, title, path: drawn.setdefault("ylabel", label))
    cells = [cell(row, 1, ok(accuracy=0.7), column) for row in ("D0", "D1") for column in ("0.7M", "5k")]
    p = preset(columns=[Axis("0.7M"), Axis("5k")], paper_values=paper_values, plot={"x": "columns", "kind": "line"},
               value="student.test.accuracy", format="percent")
    write_table(p, cells, tmp_path)
    assert drawn["ylabel"] == ylabel


@pytest.mark.parametrize("columns, legend", [
    ([Axis("0.7M"), Axis("5k")], ["D0 (ours)", "D0 (paper)", "D1 (ours)"]),
    ([], ["ours", "paper"]),  # one column (XtremeDistil Table 11): its rows are x, one line, not "ours (ours)"
], ids=["a-line-per-row", "one-column"])
def test_a_line_plots_legend_names_each_row_and_whose_line_it_is(tmp_path, monkeypatch, columns, legend):
    from distil.tables import plots

    drawn, finish = {}, plots.finish
    monkeypatch.setattr(plots, "finish", lambda fig, ax, *rest: (
        drawn.setdefault("legend", ax.get_legend_handles_labels()[1]), finish(fig, ax, *rest))[1])
    cells = [cell(row, 1, ok(accuracy=0.7), column.label if column else None)
             for row in ("D0", "D1") for column in (columns or [None])]
    paper = {"D0": {"0.7M": 71.26}} if columns else {"D0": 71.26}
    write_table(preset(columns=columns, paper_values=paper, plot={"kind": "line"}), cells, tmp_path)
    assert sorted(drawn["legend"]) == sorted(legend)  # matplotlib lists lines before error bars


@pytest.mark.parametrize("lines", [2, 20])
def test_a_long_legend_sits_beside_the_axes_and_a_short_one_inside(lines):
    """Twenty entries (XtremeDistil Table 3: ten rows, ours and the paper's) inside the axes hid the
    lines they name: beyond LEGEND_INSIDE_MAX the legend starts right of the axes."""
    import matplotlib.pyplot as plt

    from distil.tables.plots import LEGEND_INSIDE_MAX, place_legend

    fig, ax = plt.subplots()
    for index in range(lines):
        ax.plot([0, 1], [index, index + 1], label=f"row {index}")
    place_legend(ax)
    fig.canvas.draw()
    legend, axes = ax.get_legend().get_window_extent(), ax.get_window_extent()
    plt.close(fig)
    if lines > LEGEND_INSIDE_MAX:
        assert legend.x0 >= axes.x1  # wholly beside the axes
    else:
        assert axes.x0 <= legend.x0 and legend.x1 <= axes.x1  # within them


def test_a_scatter_places_the_papers_points_at_its_own_x_beside_ours():
    from distil.tables.render import paper_points, scatter_entries, scatter_points

    cells = [cell(row, seed, {**ok(accuracy=0.7 + seed / 100), "speed": {"speedup": 10.0 * seed}})
             for row in ("D0", "D1") for seed in (1, 2)]
    plot = {"x": "speed.speedup", "y": "student.test.accuracy", "kind": "scatter", "paper_x": {"D0": 51, "D1": 14}}
    p = preset(paper_values={"D0": 86.46}, plot=plot)
    assert paper_points(p) == [("D0", 51.0, 86.46)]  # D1 has an x but no paper value: no point
    assert scatter_points(*scatter_entries(p, cells)) == [("D0", 15.0, pytest.approx(71.5)),
                                                          ("D1", 15.0, pytest.approx(71.5))]


def test_a_scatters_paper_points_take_y_from_the_column_that_reads_the_plots_y():
    # XtremeDistil Table 16: one run per row read by F1, params and speed-up columns; the paper's
    # point is its F1 (not its parameter count) at its own speed-up
    from distil.tables.render import paper_points

    columns = [Axis("params (M)", value="student.param_counts.full_teacher_vocab", format="millions"),
               Axis("F1", value="student.test.f1")]
    plot = {"x": "speed.speedup", "y": "student.test.f1", "kind": "scatter", "paper_x": {"D0": 51}}
    p = preset(columns=columns, paper_values={"D0": {"params (M)": 5.1, "F1": 86.46}}, plot=plot)
    assert paper_points(p) == [("D0", 51.0, 86.46)]


def test_a_scatters_reference_rows_are_drawn_apart_and_its_x_axis_reads_in_words(tmp_path, monkeypatch):
    """Rows labelled with `references` (other tools: frontier tables' peers) are not drawn as ours."""
    from distil.tables import plots

    drawn = {}
    monkeypatch.setattr(plots, "scatter", lambda points, xlabel, ylabel, title, path, **options:
                        drawn.update(points=points, xlabel=xlabel, **options))
    cells = [cell(row, seed, {**ok(accuracy=accuracy), "timing": {"single_ms": ms}})
             for row, seed, accuracy, ms in (("static", 1, 0.80, 0.3), ("static", 2, 0.84, 0.5),
                                             ("peer: tfidf", 1, 0.78, 0.1))]
    plot = {"x": "timing.single_ms", "y": "student.test.accuracy", "kind": "scatter", "frontier": "lower_x",
            "references": "peer: ", "xscale": "log", "xlabel": "ms per sentence"}
    write_table(preset(rows=[Axis("static"), Axis("peer: tfidf")], plot=plot), cells, tmp_path)
    assert drawn["points"] == [("static", 0.4, pytest.approx(82.0))]  # means over the seeds
    assert drawn["references"] == [("peer: tfidf", 0.1, pytest.approx(78.0))]
    # error bars: the sample std of y over the seeds (80, 84: 2.83); one seed has none
    assert drawn["spreads"] == {"static": pytest.approx(2 * 2 ** 0.5)}
    assert (drawn["xlabel"], drawn["xscale"], drawn["frontier"]) == ("ms per sentence", "log", "lower_x")
    del plot["xlabel"]
    write_table(preset(rows=[Axis("static"), Axis("peer: tfidf")], plot=plot), cells, tmp_path)
    assert drawn["xlabel"] == "timing single ms"  # no words given: its metrics.json path


@pytest.mark.parametrize("fields, message", [
    ({"rows_from": "languages", "value": "f1"},
     "table paper-table3: rows_from: languages reads student.<split>.per_language, so value must be "
     "student.<split>.<metric> (e.g. student.test.f1), not 'f1'"),
    ({"plot": {"kind": "bars"}}, "table paper-table3: unknown plot kind 'bars'; choose one of: line, scatter"),
    ({"plot": {"kind": "scatter"}}, "table paper-table3: a scatter plot needs x: a metrics.json path "
                                    "(e.g. {x: speed.speedup, y: student.test.f1, kind: scatter})"),
    ({"plot": {"kind": "scatter", "x": "speed.speedup", "paper_x": {"D9": 3.0}}},
     "table paper-table3: plot.paper_x names rows the table does not have: D9; use the labels of rows:"),
    ({"plot": {"kind": "scatter", "x": "speed.speedup", "frontier": "lower"}},
     "table paper-table3: unknown plot.frontier 'lower' (did you mean 'lower_x'?); choose one of: null, lower_x, "
     "higher_x (lower_x: x is a latency; higher_x: x is a speed-up)"),
], ids=["languages-value", "plot-kind", "scatter-x", "paper-x-row", "frontier"])
def test_a_preset_that_cannot_be_rendered_is_one_line_before_any_file_is_written(tmp_path, fields, message):
    with pytest.raises(DistilError) as error:
        write_table(preset(**fields), SEEDED, tmp_path)
    assert str(error.value) == message
    assert list(tmp_path.iterdir()) == []


def readme_results():
    return load_script("readme_results")


README = "# distil\n\nintro\n\n## What is reproduced\n\n<!-- reproduced:start -->\nold, typed by hand\n" \
         "<!-- reproduced:end -->\n\ntext after\n"


def test_readme_results_fills_only_between_its_markers_from_the_verdicts_and_is_idempotent(tmp_path):
    tables = tmp_path / "outputs" / "tables"
    write_table(preset(), SEEDED, tables)
    (tables / "bench.md").write_text("| model |\n")  # not a table preset's: left out
    readme = tmp_path / "README.md"
    readme.write_text(README)
    script = readme_results()
    script.main(["--readme", str(readme), "--tables", str(tables)])
    once = readme.read_text()
    head, rest = once.split("<!-- reproduced:start -->\n")
    generated, tail = rest.split("\n<!-- reproduced:end -->")
    assert head == "# distil\n\nintro\n\n## What is reproduced\n\n" and tail == "\n\ntext after\n"
    assert generated.startswith("Generated by `make results` from the recorded runs: every number and finding is "
                                "on the [results pages](docs/results/index.md).\n\n| paper ")
    # one row per paper, one cell per table: its verdict in a word (here its orderings: two seeds each side,
    # every pair of the paper's order held but not beyond the spread), linked to the paper's page
    assert "| XtremeDistil (ACL 2020) | [Table 3](docs/results/paper.md): " in generated
    assert "old, typed by hand" not in once
    script.main(["--readme", str(readme), "--tables", str(tables)])
    assert readme.read_text() == once


def test_readme_results_leaves_a_readme_without_markers_or_without_tables_as_it_is(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(README)
    readme_results().main(["--readme", str(readme), "--tables", str(tmp_path / "none")])
    assert readme.read_text() == README
    tables = tmp_path / "tables"
    write_table(preset(), SEEDED, tables)
    readme.write_text("# distil\n")
    readme_results().main(["--readme", str(readme), "--tables", str(tables)])
    assert readme.read_text() == "# distil\n"


def test_an_axis_names_its_model_or_field_so_labels_can_read_like_the_papers(tmp_path):
    """The presets' convention: a bench row's `model=<bench model>`, a data column's `value=<field>`."""
    pd.DataFrame([{"model": "BiLSTM E300 H2x600", "params": 13_488_602}]).to_csv(tmp_path / "bench.csv")
    bench = preset(kind="bench", rows=[Axis("Distilled Student", ["model=BiLSTM E300 H2x600"])],
                   value="params", format="count")
    write_table(bench, [], tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["Distilled Student", "13,488,602"]
    data = preset(kind="data", rows=[Axis("Toy", ["dataset=toy"])], columns=[Axis("Class", ["value=labels"])],
                  format="count", scales={"cpu": Scale()})
    write_table(data, [], tmp_path)
    assert md_rows(tmp_path / "paper-table3.md") == [["dataset", "Class"], ["Toy", "3"]]


def test_a_one_column_table_reads_row_to_number_paper_values(tmp_path):
    """XtremeDistil Table 4 and 17: one run (a column), its stages or languages as rows."""
    metrics = {"status": "ok", "student": {"test": {"f1": 0.6, "per_language": {"de": 0.5, "en": 0.7}}}}
    p = preset(rows=[], columns=[Axis("TinyMBERT")], rows_from="languages", value="student.test.f1",
               paper_values={"de": 89, "en": 83})
    write_table(p, [cell("", 1, metrics, column="TinyMBERT")], tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1:] == [["de", "50.00", "89.00", "-39.00"],
                                                         ["en", "70.00", "83.00", "-13.00"]]


def test_a_row_that_reads_the_teacher_shows_the_teachers_score_from_the_same_runs(tmp_path):
    both = {"status": "ok", "student": {"test": {"accuracy": 0.80, "f1": 0.70}},
            "teacher": {"test": {"accuracy": 0.90, "f1": 0.88}}}
    columns = [Axis("acc"), Axis("F1", value="student.test.f1")]
    rows = [Axis("BERT", reads="teacher"), Axis("BiLSTM")]
    cells = [cell(row, 1, both, column) for row in ("BERT", "BiLSTM") for column in ("acc", "F1")]
    write_table(preset(rows=rows, columns=columns), cells, tmp_path)
    body = md_rows(tmp_path / "paper-table3.md")[1:]
    assert [r[0] for r in body] == ["BERT", "BiLSTM"]
    assert ["90.00", "88.00"] == [c for c in body[0][1:] if c not in ("–", "")][:2]
    assert ["80.00", "70.00"] == [c for c in body[1][1:] if c not in ("–", "")][:2]


def with_dev(dev: float, test: float) -> dict:
    return {"status": "ok", "student": {"dev": {"accuracy": dev}, "test": {"accuracy": test}}}


def test_a_selected_setting_is_picked_on_dev_never_on_test(tmp_path):
    """Wu et al. pick the learning rate on dev: each (row, seed) shows the run with the best dev
    score, here the option whose test score is the lower one; a row whose options have not all run
    says how many have."""
    select = {"over": ["trainer.lr=2e-4", "trainer.lr=1e-3"], "by": "student.dev.accuracy"}
    cells = [Cell("D0", None, 1, [], "a", with_dev(0.70, 0.90), choice="trainer.lr=2e-4"),
             Cell("D0", None, 1, [], "b", with_dev(0.75, 0.60), choice="trainer.lr=1e-3"),
             Cell("D1", None, 1, [], "c", with_dev(0.80, 0.80), choice="trainer.lr=2e-4"),
             Cell("D1", None, 1, [], "d", None, choice="trainer.lr=1e-3")]
    write_table(preset(select=select, scales={"cpu": Scale(base=[], seeds=[1])}), cells, tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows[1] == ["D0", "60.00"]  # dev 0.75 beats 0.70: its test 0.60, not the other's 0.90
    assert rows[2] == ["D1", "not run: 1 of 2 runs to select from"]
    assert ("Each run is the best on student.dev.accuracy of trainer.lr=2e-4, trainer.lr=1e-3 (chosen on dev; "
            "test only reported).") in (tmp_path / "paper-table3.md").read_text()


def test_a_seed_whose_selection_is_still_running_is_waiting_not_failed(tmp_path):
    """A seed with only some of its options run is waiting, in the cell and in the footer alike."""
    select = {"over": ["trainer.lr=2e-4", "trainer.lr=1e-3"], "by": "student.dev.accuracy"}
    cells = [Cell("D0", None, 1, [], "a", with_dev(0.70, 0.90), choice="trainer.lr=2e-4"),
             Cell("D0", None, 1, [], "b", with_dev(0.75, 0.60), choice="trainer.lr=1e-3"),
             Cell("D0", None, 2, [], "c", with_dev(0.80, 0.80), choice="trainer.lr=2e-4"),
             Cell("D0", None, 2, [], "d", None, choice="trainer.lr=1e-3")]
    write_table(preset(select=select, scales={"cpu": Scale(base=[], seeds=[1, 2])}), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1] == ["D0", "60.00 (n=1, 1 not run)"]
    assert (tmp_path / "paper-table3.md").read_text().endswith(
        "cells: 3 done (0 still improving), 0 failed, 1 not run.\n")


def test_select_must_read_a_dev_score(tmp_path):
    from distil.tables.load import load_preset

    path = tmp_path / "sel.yaml"
    path.write_text("name: sel\npaper: p\ntable: T\ntitle: t\nscales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                    "rows: [{label: a, overrides: [schedule=d0]}]\n"
                    "select: {over: [trainer.lr=1e-3], by: student.test.accuracy}\n")
    with pytest.raises(DistilError, match="select.by must be a dev score"):
        load_preset(path)


def test_a_learning_curve_reads_each_epochs_dev_score(tmp_path):
    """rows_from: epochs (Wu Fig. 2): a row per epoch of the last step's history, a column per run."""
    history = [{"epoch": 0, "dev": 0.5}, {"epoch": 1, "train_loss": 0.7, "dev": 0.6}, {"epoch": 2, "dev": 0.65}]
    metrics = {"status": "ok", "student": {"stages": [{"history": [{"epoch": 0, "dev": 0.1}]}, {"history": history}]}}
    cells = [Cell("", "SRA", 1, [], "k", metrics), Cell("", "BiLSTM", 1, [], "j", None)]
    write_table(preset(rows=[], rows_from="epochs", columns=[Axis("SRA"), Axis("BiLSTM")], value="student.dev.accuracy",
                       scales={"cpu": Scale(base=[], seeds=[1])}), cells, tmp_path)
    rows = md_rows(tmp_path / "paper-table3.md")
    assert rows[0][:3] == ["epoch", "SRA", "BiLSTM"]
    assert [r[:2] for r in rows[1:4]] == [["epoch 0", "50.00"], ["epoch 1", "60.00"], ["epoch 2", "65.00"]]


def test_columns_of_one_run_count_it_once_and_an_untimed_run_reads_not_timed_yet(tmp_path):
    """A frontier table's columns read other fields of the same run: the footer counts runs, and a
    run finished before the table's timing step shows that it waits for it, not a missing field."""
    runs = {("fast", 1): {**ok(accuracy=0.80), "timing": {"single_ms": 0.5}}, ("slow", 1): ok(accuracy=0.82),
            ("fast", 2): ok(accuracy=0.80)}
    cells = [Cell(row=row, column=column, seed=seed, overrides=[], key=f"{row}-{seed}", metrics=metrics)
             for (row, seed), metrics in runs.items() for column in ("accuracy", "ms")]
    columns = [Axis("accuracy", value="student.test.accuracy", format="percent"),
               Axis("ms", value="timing.single_ms", format="number")]
    seeds = {"cpu": Scale(base=[], seeds=[1, 2])}
    write_table(preset(rows=[Axis("fast"), Axis("slow")], columns=columns, scales=seeds), cells, tmp_path)
    # a seed that ran after the timing step waits for the next one: not a failure
    assert md_rows(tmp_path / "paper-table3.md")[1:] == [["fast", "80.00 ± 0.00 (n=2)", "0.500 (n=1, 1 not timed yet)"],
                                                         ["slow", "82.00", "not timed yet"]]
    assert (tmp_path / "paper-table3.md").read_text().endswith(
        "cells: 3 done (0 still improving), 0 failed, 0 not run.\n")


def test_a_number_below_one_keeps_three_significant_digits():
    """Mukherjee Table 9's variances (0.240 against 0.066) and Wu Table 4's eq. 1 losses (0.0288) read
    apart only with their third digit; percentages and numbers from 1 on keep two decimals."""
    from distil.tables.render import number_text

    assert [number_text(v, "number") for v in (0.2323, 0.0660, 0.02884, 0.5, 0.00001, 0.0, 4.4, 12.345)] == [
        "0.232", "0.0660", "0.0288", "0.500", "0.0000", "0.00", "4.40", "12.35"]
    assert number_text(0.2323 - 0.240, "number", signed=True) == "-0.0077"
    assert number_text(0.2323, "percent") == "0.23"  # percent cells are scaled first: 23.23


def stepped(accuracy: float, *steps: tuple[int, int]) -> dict:
    """A run whose schedule steps ended at (best epoch, epochs run)."""
    return {"status": "ok", "student": {"test": {"accuracy": accuracy}, "params": 10,
                                        "stages": [{"name": "S1", "step": "all", "best_epoch": best,
                                                    "epochs_run": run} for best, run in steps]}}


def test_a_run_stopped_at_its_cap_while_improving_is_marked_and_counted(tmp_path):
    """Issue 54: a seed whose step's best epoch is its last stopped at the cap, not on patience."""
    cells = [cell("D0", 1, stepped(0.80, (3, 6))), cell("D0", 2, stepped(0.82, (10, 10))),  # seed 2 at its cap
             cell("D1", 1, stepped(0.70, (4, 4), (2, 5))), cell("D1", 2, stepped(0.72, (0, 3)))]  # a step at its cap
    write_table(preset(), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1:] == [["D0", "81.00 ± 1.41 (n=2, 1 still improving)"],
                                                         ["D1", "71.00 ± 1.41 (n=2, 1 still improving)"]]
    text = (tmp_path / "paper-table3.md").read_text()
    assert text.endswith("cells: 4 done (2 still improving), 0 failed, 0 not run.\n")
    assert list(pd.read_csv(tmp_path / "paper-table3.csv")["still_improving"]) == [1, 1]
    # the size of a student is not a score its training could still improve
    write_table(preset(value="student.params", format="count"), cells, tmp_path)
    assert md_rows(tmp_path / "paper-table3.md")[1:] == [["D0", "10 ± 0 (n=2)"], ["D1", "10 ± 0 (n=2)"]]


@pytest.mark.parametrize("count", [3, 9])
def test_a_crowded_scatter_numbers_its_points_and_names_them_in_a_key(tmp_path, monkeypatch, count):
    """Two dozen names by their points (a frontier table's students and their deployed forms) overlapped
    into an unreadable block: beyond NAMES_BY_POINTS_MAX each point gets a number, its name in a key."""
    from distil.tables import plots

    drawn, finish = {}, plots.finish
    monkeypatch.setattr(plots, "finish", lambda fig, ax, *rest: (
        drawn.update(notes=[t.get_text() for t in ax.texts]), finish(fig, ax, *rest))[1])
    points = [(f"student {i}", 0.1 * (i + 1), 70.0 + i) for i in range(count - 1)]
    plots.scatter(points, "ms", "accuracy", "a frontier", tmp_path / "f.png", frontier="lower_x",
                  references=[("peer", 0.05, 69.0)], xscale="log")
    if count <= plots.NAMES_BY_POINTS_MAX:
        assert drawn["notes"] == [*(name for name, _, _ in points), "peer"]
    else:
        key = [f"{n:>2}  {name}" for n, name in enumerate([*(name for name, _, _ in points), "peer"], 1)]
        assert drawn["notes"] == [*map(str, range(1, count + 1)), "\n".join(key)]
    assert (tmp_path / "f.png").is_file()
