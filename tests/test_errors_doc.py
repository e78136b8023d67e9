"""docs/reference/errors.md: every row's message is asserted by the test it names, and that test exists."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PLACEHOLDER = re.compile(r"<[a-z ]+>")  # <path>, <file>, <cause>: the parts that vary
# A message a test spells over several lines as adjacent string literals ("... " newline "...") reads as one.
CONTINUATION = re.compile(r"""(["'])\s*\\?\n\s*f?\1""")


def rows() -> list[tuple[str, str, str]]:
    """(case, message, node id) of every table row naming a test."""
    found = []
    for line in (REPO / "docs" / "reference" / "errors.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split(" | ")]
        if len(cells) == 3 and cells[2].startswith("`tests/"):
            found.append((cells[0], cells[1].strip("`"), cells[2].strip("`")))
    return found


def test_errors_doc_lists_at_least_40_cases():
    assert len(rows()) >= 40


def test_every_row_names_an_existing_test_that_asserts_its_message():
    for case, message, node in rows():
        path, _, name = node.partition("::")
        function, _, param = name.partition("[")
        source = CONTINUATION.sub("", (REPO / path).read_text())
        assert re.search(rf"^def {re.escape(function)}\(", source, re.M), f"{case}: no test {node}"
        assert param.rstrip("]") in source, f"{case}: no parameter id {param} in {path}"
        for fixed in PLACEHOLDER.split(message):
            assert fixed.strip() in source, f"{case}: {fixed!r} is not in {path}"
