"""A recorded search's results page and its comparison with the hand-made frontier table, on hand-made rows."""

from __future__ import annotations

import json
import re

import pytest

from distil.search.against_frontier import FrontierRow, compare, summary
from distil.search.page import write_search_page

FAMILIES = ["static", "bilstm", "transformer"]
# the search's Pareto set: latency in the frontier rows' unit (a ratio to the reference), test on it only
PARETO = [{"trial": 1, "student": "static", "backend": "onnx-int8", "dev": 0.78, "latency": 0.3, "test": 0.79},
          {"trial": 2, "student": "static", "backend": "eager", "dev": 0.83, "latency": 0.6, "test": 0.83},
          {"trial": 3, "student": "bilstm", "backend": "eager", "dev": 0.86, "latency": 2.0, "test": 0.845}]
TRIALS = [{"trial": t["trial"], "cell": f"cell{t['trial']}", "backend": t["backend"], "dev": t["dev"]} for t in PARETO]
TRIALS.append({"trial": 4, "cell": "cellG", "backend": "eager", "dev": 0.85})  # not on the Pareto set
SPREAD = [0.80, 0.81, 0.82]  # mean 0.81, s 0.01: a single run's 95% interval ± t(2) 0.01 sqrt(4/3) = ± 0.0497
TIGHT = [0.90, 0.905, 0.91]  # s 0.005: ± 0.0248
ROWS = [
    FrontierRow("A: slower search student within the spread", SPREAD, latency=0.5, ms=0.4, student="static"),
    FrontierRow("B: beaten", SPREAD, latency=0.7, ms=0.6, student="static"),
    FrontierRow("C: over the latency limit", TIGHT, latency=5.0, ms=4.0, student="transformer-mini"),
    FrontierRow("D: a peer", [0.88, 0.885, 0.89], latency=1.0, ms=0.8, student="peer-setfit", peer=True),
    FrontierRow("E: not run", [], latency=None),
    FrontierRow("F: faster than every trial", [0.8], latency=0.1, ms=0.08, student="static"),
    FrontierRow("G: its run trained, not chosen", [0.88, 0.885, 0.89], latency=2.5, ms=0.9, student="bilstm",
                run=("cellG", "eager")),
    FrontierRow("H: a family not in the space", TIGHT, latency=2.5, ms=0.95, student="transformer-tiny"),
    FrontierRow("I: a configuration never tried", TIGHT, latency=2.5, ms=0.95, student="static"),
    FrontierRow("J: not timed", SPREAD, latency=None),
]


def test_each_frontier_row_gets_the_best_dev_student_at_or_below_its_latency_and_a_verdict():
    verdicts = compare(ROWS, PARETO, TRIALS, FAMILIES, max_latency_ms=1.0)
    assert [(v.row.label[0], v.verdict, v.student and v.student["trial"]) for v in verdicts] == [
        ("A", "within the spread", 1), ("B", "at least as accurate", 2), ("C", "below", 3), ("D", "below", 2),
        ("E", "not run", None), ("F", "below", None), ("G", "below", 3), ("H", "below", 3), ("I", "below", 3),
        ("J", "not run", None)]
    within = verdicts[0].difference
    assert (round(within.estimate, 4), round(within.half_width, 4), within.degrees) == (-0.02, 0.0497, 2)
    assert [v.reason for v in verdicts if v.reason] == [
        "the row runs at 4 ms, over the search's latency limit (1 ms): nothing over it trains, so the students "
        "compared are all predicted under it",
        "a peer (another tool's model): not in the search's space",
        "no finished run",
        "no student of the search is this fast (its fastest: 0.3)",
        "the search trained this row's own run (trial 4, dev 0.8500) and chose trial 3 on dev (0.8600): one seed "
        "each, selected on dev",
        "the search never trained student=transformer-tiny: the space's families are static, bilstm, transformer",
        "the search never trained this configuration of static (its family is in the space)",
        "not timed yet"]
    assert [v.cause for v in verdicts if v.verdict == "below"] == [
        "slower than the search's latency limit", "another tool's model", "faster than any student the search trained",
        "the row's own run, not chosen on dev", "a configuration the search never tried",
        "a configuration the search never tried"]
    assert summary(verdicts) == (
        "1 at least as accurate, 1 within the spread, 6 below (1 slower than the search's latency limit; 1 another "
        "tool's model; 1 faster than any student the search trained; 1 the row's own run, not chosen on dev; 2 a "
        "configuration the search never tried), 2 not run")


def record_dir(root, frontier: str | None = "frontier-sst2"):
    """A hand-made record, as distil.search.record writes one (its files' digests included)."""
    from distil.tables.ledger import file_digest

    folder = root / "search" / "handmade"
    folder.mkdir(parents=True)
    header = "trial,student,choices,backend,dev,ms,vs_reference,size_mb,params,cell"
    rows = ["1,static,student.embedding_dim=16,onnx-int8,0.78,0.25,0.3,0.5,1000,cell1",
            "2,static,student.embedding_dim=32,eager,0.83,0.5,0.6,1.0,2000,cell2",
            "3,bilstm,student.hidden_size=32,eager,0.86,1.6,2.0,4.0,9000,cell3",
            "4,bilstm,student.hidden_size=16,eager,0.85,1.7,2.1,3.0,5000,cellG"]
    (folder / "trials.csv").write_text("\n".join([header, *rows]) + "\n")
    (folder / "pareto.csv").write_text("\n".join(
        [header.replace(",dev,", ",dev accuracy,") + ",test accuracy",
         *(f"{row},{test}" for row, test in zip(rows[:3], (0.79, 0.83, 0.845), strict=True))]) + "\n")
    (folder / "pareto.png").write_bytes(b"a plot")
    files = ("trials.csv", "pareto.csv", "pareto.png")
    best = {"trial": 2, "student": "static", "choices": "student.embedding_dim=32", "backend": "eager", "dev": 0.83,
            "ms": 0.5, "size_mb": 1.0}
    (folder / "search.json").write_text(json.dumps({
        "command": "distil search handmade --record", "machine": "a CPU, 2 cores, Linux x86_64",
        "date": "2026-01-02 03:04 UTC", "code": "abc123", "preset": "handmade", "description": "A hand-made search",
        "study": "handmade-0123", "frontier": frontier, "base": ["debug=smoke"], "seed": 1, "sampler": "tpe",
        "latency": "single_ms", "threads": 2, "limits": {"max_latency_ms": 1.0, "max_size_mb": 10.0}, "trials": 6,
        "families": FAMILIES, "reference": {"overrides": ["student=bilstm"], "cell": "cellR", "ms": 0.8},
        "metric": "accuracy", "complete": 4, "pruned": 2, "failed": 0, "killed": 0, "wall_s": 125.0,
        "wall_s_total": 7300.0, "invocations": 2, "trial_s": 6000.0, "best": best,
        "sha256": {name: file_digest(folder / name) for name in files}}))
    return folder


@pytest.mark.heavy
def test_the_page_shows_a_recorded_search_and_its_verdicts_against_the_frontier(tmp_path):
    results, docs = tmp_path / "results", tmp_path / "docs"
    record_dir(results)
    rows = [ROWS[0], ROWS[1], ROWS[3], ROWS[4]]
    path = write_search_page(results / "search", docs, tmp_path / "outputs")  # the frontier table's: not run
    assert "frontier-sst2 is not run yet (`make frontier`): no verdicts." in path.read_text()

    from distil.search.page import search_page

    page = search_page(results / "search", docs, lambda record: (rows, "vs_reference"))
    assert search_page(results / "search", docs, lambda record: (rows, "vs_reference")) == page  # twice: the same
    page = re.sub(r" +", " ", page)  # the tables' column padding aside
    lines = page.splitlines()
    assert lines[:3] == ["# Search: the most accurate student under a budget", "",
                         "Generated by `make results` from the recorded searches in results/search (`distil search "
                         "PRESET --record` records one): do not edit by hand."]
    for line in [
        "## handmade",
        "**The question**: the most accurate student under 1 ms per text and 10 MB (single_ms, timed on 2 threads), "
        "distilled from the teacher of `debug=smoke`; every trial trains at seed 1, its accuracy read on dev.",
        "**Trials**: 6 (4 complete, 2 pruned before training (predicted over a limit), 0 failed); tpe sampler, study "
        "handmade-0123. **Wall time**: 2 min for the recording command, 2 h 2 min over the 2 commands that ended "
        "(each worker its own; a killed one is not counted); the ended trials' own time 1 h 40 min.",
        "**Reproduce**: `distil search handmade --record` on a CPU, 2 cores, Linux x86_64, 2026-01-02 03:04 UTC, code "
        "abc123.",
        "![distil search handmade](figures/search-handmade.png)",
        "Trial 2: static student.embedding_dim=32 (eager), dev accuracy 0.8300, test 0.8300, 0.500 ms per text, "
        "1.00 MB. The search leaves it in its directory's `best/` (`outputs/search/handmade/best` by default).",
        "**1 at least as accurate, 1 within the spread, 1 below (1 another tool's model), 1 not "
        "run.**",
        # the shipped SST-2 preset names a frontier table and is not recorded here
        "## sst2",
        "Not run yet: `distil search sst2 --record` (~45 minutes on 2 cores, the preset's estimate; rerun the same "
        "command to resume it), then `make results`.",
    ]:
        assert line in lines, line
    assert ("| A: slower search student within the spread | 81.00 ± 1.00 (n=3) | 0.5x (0.4 ms) | trial 1: static "
            "(onnx-int8), 0.3x | 79.00 | -2.00 [-6.97, +2.97] | **within the spread** |") in page
    assert "| D: a peer | 88.50 ± 0.50 (n=3) | 1x (0.8 ms) | trial 2: static (eager), 0.6x | 83.00 |" in page
    assert "| 3 | bilstm | student.hidden_size=32 | eager | 0.86 | 1.6 | 2 | 4 | 9000 | 0.845 |" in page  # no cell
    assert (docs / "figures" / "search-handmade.png").read_bytes() == b"a plot"


def test_a_record_whose_files_changed_is_no_record(tmp_path):
    folder = record_dir(tmp_path / "results", frontier=None)
    (folder / "pareto.csv").write_text("trial\n")
    page = write_search_page(tmp_path / "results" / "search", tmp_path / "docs", tmp_path / "outputs").read_text()
    assert "## handmade" not in page and "## sst2" in page


def test_frontier_rows_read_the_tables_runs_as_ratios_to_the_searchs_reference(tmp_path):
    """frontier-sst2's recorded runs (results/cells): the search's reference is its BiLSTM d1 cell at seed 1."""
    from distil.search.frontier_runs import frontier_rows
    from distil.search.preset import load_search
    from distil.search.space import reference_cell
    from distil.tables.cells import expand
    from distil.tables.ledger import record
    from distil.tables.load import load_preset

    cells = {(c.row, c.seed): c.key for c in expand(load_preset("frontier-sst2"), "cpu")}

    def timing(ms: float, accuracy: float) -> dict:
        return {"single_ms": ms, "batch32_ex_per_s": 1000.0, "seconds": {"single_ms": [ms, ms * 2, ms]},
                "test": {"accuracy": accuracy}}

    for seed, (bilstm, static) in {1: (2.0, 0.5), 2: (4.0, 0.5)}.items():
        record(cells[("BiLSTM (Mukherjee)", seed)], {"status": "ok", "student": {"test": {"accuracy": 0.8}},
                                                     "timing": timing(bilstm, 0.8)})
        record(cells[("static (model2vec-style)", seed)], {
            "status": "ok", "student": {"test": {"accuracy": 0.70 + seed / 100}},
            "timing": {**timing(static, 0.0), "onnx": timing(static / 2, 0.75 + seed / 100), "int8": None}})
    reference = reference_cell(load_search("sst2")).key
    assert reference == cells[("BiLSTM (Mukherjee)", 1)]
    rows, unit = frontier_rows("frontier-sst2", "accuracy", 1, reference, "single_ms", tmp_path / "outputs")
    assert unit == "vs_reference"
    # (test accuracy by seed, latency: the median per-pass ratio to the BiLSTM of the same seed, its own ms, its run)
    for label, values, latency, ms, backend in [
        ("static (model2vec-style)", [0.71, 0.72], (0.25 + 0.125) / 2, 0.5, "eager"),  # 0.25 (seed 1), 0.125 (seed 2)
        ("static (model2vec-style), ONNX", [0.76, 0.77], (0.125 + 0.0625) / 2, 0.25, "onnx"),  # twice as fast
    ]:
        row = next(r for r in rows if r.label == label)
        assert (row.values, row.latency, row.ms) == (pytest.approx(values), pytest.approx(latency), ms)
        assert (row.student, row.peer, row.run) == ("static", False, (cells[(label, 1)], backend))
    peer = next(r for r in rows if r.label == "peer: SetFit (labels)")
    assert (peer.values, peer.latency, peer.student, peer.peer) == ([], None, "peer-setfit", True)
    assert len(rows) == 26  # every student, deployed form and peer: the teacher reads no row here


def test_the_committed_search_page_is_what_the_recorded_searches_render(tmp_path, monkeypatch):
    """As a fresh clone renders it: no outputs, the frontier's cells from the tracked record."""
    from tests.conftest import REPO

    monkeypatch.setenv("DISTIL_RESULTS", str(REPO / "results"))  # read only: nothing runs here
    written = write_search_page(REPO / "results" / "search", tmp_path / "docs", tmp_path / "outputs")
    assert written.read_text() == (REPO / "docs" / "results" / "search.md").read_text(), (
        "docs/results/search.md differs from what results/search renders: run `make results`")


def test_a_frontier_table_that_does_not_exist_is_one_line_before_any_trial(tmp_path, capsys):
    from distil.cli.search import main
    from tests.test_search import PRESET

    path = tmp_path / "bad.yaml"
    path.write_text(PRESET + "frontier: frontier-sst3\n")
    with pytest.raises(SystemExit) as exit_:
        main([str(path)])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"distil search: error: search preset {path}: unknown frontier table 'frontier-sst3' (did you mean "
        f"'frontier-sst2'?); choose one of: frontier-mrpc, frontier-sst2, frontier-static, frontier-wikiann (or leave "
        f"frontier out)"]


def test_a_shipped_search_recorded_before_its_trial_count_says_how_far_it_is():
    from distil.search.page import so_far

    assert so_far({"preset": "sst2", "trials": 15}) == (
        " of the preset's 40, so far (`distil search sst2 --record` goes on from the record, anywhere)")
    assert so_far({"preset": "sst2", "trials": 40}) == ""
    assert so_far({"preset": "handmade", "trials": 6}) == ""  # not a shipped preset: nothing to compare with
