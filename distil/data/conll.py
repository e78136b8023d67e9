"""CoNLL column format: one `token ... TAG` line per token, a blank line between sentences."""

from __future__ import annotations

import gzip
from pathlib import Path

from distil.errors import DistilError


def read_conll(path: Path, token_column: int = 0, tag_column: int = -1) -> dict[str, list]:
    """{"tokens": [[...]], "tags": [[...]]}; a malformed line is reported with file and line number."""
    opener = gzip.open if path.suffix == ".gz" else open
    sentences, tags = [], []
    tokens_now, tags_now = [], []
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            line = line.rstrip("\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if tokens_now:
                    sentences.append(tokens_now)
                    tags.append(tags_now)
                    tokens_now, tags_now = [], []
                continue
            fields = line.split()
            if len(fields) < 2:
                raise DistilError(
                    f"{path}:{number}: malformed CoNLL line {line!r}: expected 'token ... TAG' "
                    f"(whitespace-separated columns); fix or remove the line"
                )
            tokens_now.append(fields[token_column])
            tags_now.append(fields[tag_column])
    if tokens_now:
        sentences.append(tokens_now)
        tags.append(tags_now)
    return {"tokens": sentences, "tags": tags}
