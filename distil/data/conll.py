"""CoNLL column format: one `token ... TAG` line per token, a blank line between sentences."""

from __future__ import annotations

from pathlib import Path

from distil.data.check_file import text_lines
from distil.errors import DistilError


def read_conll(path: Path, token_column: int = 0, tag_column: int = -1,
               where: str = "CoNLL file") -> dict[str, list]:
    """{"tokens": [[...]], "tags": [[...]]}; a malformed line is reported with file and line number, a
    binary or non-UTF-8 file as every reader reports it (check_file.text_lines). `where` starts the
    message of the latter (e.g. "dataset 'conll2003'")."""
    sentences, tags = [], []
    tokens_now, tags_now = [], []
    for number, line in enumerate(text_lines(path, where), start=1):
        line = line.rstrip("\r\n")
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
        if not -len(fields) <= tag_column < len(fields):
            raise DistilError(f"{path}:{number}: the line has {len(fields)} columns, so it has no column "
                              f"{tag_column} (dataset.conll_tag_column; 0 is the first, -1 the last); "
                              f"set dataset.conll_tag_column to the tag's column")
        tokens_now.append(fields[token_column])
        tags_now.append(fields[tag_column])
    if tokens_now:
        sentences.append(tokens_now)
        tags.append(tags_now)
    return {"tokens": sentences, "tags": tags}
