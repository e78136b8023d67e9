"""The committed results pages are what the recorded runs give: a page regenerated from results/
equals the committed one, so no number on it is typed, stale or from a run nobody recorded."""

from __future__ import annotations

import re

import pytest

from distil.cli.table import main as table_main
from distil.tables.pages import write_pages
from tests.conftest import REPO


def block(page: str, table: str) -> str:
    """One table's block of a results page: from its marker to the next table's (or the page's end)."""
    start = page.index(f"<!-- table: {table} -->")
    rest = page[start + 1:]
    end = rest.find("<!-- table: ")
    return page[start:] if end == -1 else page[start: start + 1 + end]


@pytest.mark.heavy
def test_the_committed_tang_page_is_what_the_recorded_cells_render(tmp_path, monkeypatch):
    monkeypatch.setenv("DISTIL_RESULTS", str(REPO / "results"))  # read only: no run here, so nothing is recorded
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    table_main(["tang-table1", "tang-table1-probe", "--render-only"])
    write_pages(tmp_path / "outputs" / "tables", tmp_path / "results")
    regenerated = (tmp_path / "results" / "tang.md").read_text()
    committed = (REPO / "docs" / "results" / "tang.md").read_text()
    for name in ("tang-table1", "tang-table1-probe"):
        assert block(regenerated, name) == block(committed, name), (
            f"docs/results/tang.md's {name} differs from what results/cells renders: run `make results`")
    assert re.search(r"\d+\.\d\d ± \d+\.\d\d \(n=3\)", block(committed, "tang-table1"))  # numbers, not 'not run'


@pytest.mark.slow
def test_every_committed_results_page_is_what_the_recorded_runs_render(tmp_path, monkeypatch):
    """make results from results/ alone (a fresh clone's view) writes exactly the committed pages."""
    monkeypatch.setenv("DISTIL_RESULTS", str(REPO / "results"))
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    table_main(["--all", "--render-only"])
    table_main(["--all", "--set", "frontier", "--render-only", "--frontier-targets"])
    table_main(["--pages", str(tmp_path / "results")])  # as make results: the papers' pages and the searches'
    committed = sorted(p.name for p in (REPO / "docs" / "results").glob("*.md"))
    assert sorted(p.name for p in (tmp_path / "results").glob("*.md")) == committed
    for name in committed:
        assert (tmp_path / "results" / name).read_text() == (REPO / "docs" / "results" / name).read_text(), (
            f"docs/results/{name} differs from what results/ renders: run `make results`")
