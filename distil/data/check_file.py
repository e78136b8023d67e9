"""The first problem in a tsv / csv / jsonl data file, as one line naming the file, the line and the fix.

The `datasets` builders fail on such files with a generic parser error (or, for a short row, read it
silently with empty cells), so every text data file is scanned once before it is handed to them.
`text_lines` is the encoding and binary check of every reader of text files: these, CoNLL files,
unlabeled files and the pre-training corpus.
"""

from __future__ import annotations

import csv
import gzip
import itertools
import json
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from distil.errors import DistilError

# What the builders are told (load.py passes the same options): a tsv keeps bare quotes as text
# (GLUE's sentences contain them), a csv follows the standard: a quoted field may hold commas.
CSV_DIALECTS = {"tsv": {"delimiter": "\t", "quoting": csv.QUOTE_NONE}, "csv": {"delimiter": ","}}
# Python's csv stops at a field over 131,072 characters, a guard against a runaway quote, not a bound of
# valid data: a document of a megabyte is one field. The builders (pandas) have no such limit, so the
# checks lift it while they read; 2**31 - 1 fits the C long it is stored in on every platform.
ANY_FIELD_SIZE = 2**31 - 1


def check_text_file(file: Path, fmt: str, where: str) -> None:
    """Raise a DistilError for a binary or non-UTF-8 file, a row with the wrong number of columns
    (tsv, csv) or a line that is not a JSON object with the first line's keys (jsonl)."""
    lines = text_lines(file, where)
    if fmt == "jsonl":
        _check_jsonl(lines, file, where)
    else:
        with fields_of_any_size():
            _check_columns(lines, fmt, file, where)


def read_csv_rows(file: Path, fmt: str) -> Iterator[list[str]]:
    """A tsv/csv file's rows as the builder reads them (blank lines skipped)."""
    opener = gzip.open if file.suffix == ".gz" else open
    with opener(file, "rt", encoding="utf-8", errors="replace", newline="") as handle, fields_of_any_size():
        yield from (row for row in csv.reader(handle, **CSV_DIALECTS[fmt]) if row)


def example_line(file: Path, fmt: str, header: bool, index: int) -> int:
    """The 1-based line of `file` where its example `index` (0-based, as the builder numbers them: the
    header and blank lines are no examples) begins, as an editor counts lines. Read again only when an
    example is reported: a row's line is worth nothing until then."""
    lines = text_lines(file, str(file))
    if fmt == "jsonl":
        starts = (number for number, line in enumerate(lines, start=1) if line.strip())
    else:
        starts = _row_starts(csv.reader(lines, **CSV_DIALECTS[fmt]))
        if header:
            next(starts, None)
    return next(itertools.islice(starts, index, None))


def _row_starts(reader) -> Iterator[int]:
    """The line each non-blank row of a csv reader begins on (a quoted field may span lines)."""
    with fields_of_any_size():
        end = 0
        for row in reader:
            if row:
                yield end + 1
            end = reader.line_num


@contextmanager
def fields_of_any_size() -> Iterator[None]:
    """Python's csv reads fields of any length inside (ANY_FIELD_SIZE); its limit is restored after."""
    previous = csv.field_size_limit(ANY_FIELD_SIZE)
    try:
        yield
    finally:
        csv.field_size_limit(previous)


def text_lines(file: Path, where: str, setting: str = "dataset.files", errors: str = "strict",
               lenient: str = "") -> Iterator[str]:
    """The lines of a UTF-8 text file (.gz too), newlines kept, read one at a time: the one encoding
    and binary check of every reader. A NUL byte (a binary file) or, with `errors` strict, bytes that
    are not UTF-8 raise a DistilError naming the file and the line; `setting` is the option that names
    the file, `lenient` the setting that would read such bytes instead (added to the fix). With
    `errors` replace, each byte that is not UTF-8 reads as U+FFFD."""
    opener = gzip.open if file.suffix == ".gz" else open
    try:
        with opener(file, "rb") as handle:
            yield from _decoded_lines(handle, file, where, setting, errors, lenient)
    except (gzip.BadGzipFile, EOFError, zlib.error) as error:  # a .gz name on other bytes, or a cut-off .gz
        cause = str(error) or "it ends early"
        raise DistilError(f"{where}: {file} is not a readable gzip file ({cause}); compress it again with gzip, "
                          f"or give the uncompressed file") from None


def read_document(file: Path, where: str, setting: str, errors: str = "strict", lenient: str = "") -> str:
    """A whole text file through text_lines' check, its newlines as Python's text mode reads them
    (\r\n and \r become \n): one document of a class-folder dataset."""
    text = "".join(text_lines(file, where, setting, errors, lenient))
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _decoded_lines(handle, file: Path, where: str, setting: str, errors: str, lenient: str) -> Iterator[str]:
    for number, raw in enumerate(handle, start=1):
        if b"\0" in raw:
            raise DistilError(f"{where}: {file} is not a text file (a NUL byte on line {number}); "
                              f"point {setting} at a UTF-8 text file")
        try:
            yield raw.decode("utf-8", errors=errors)
        except UnicodeDecodeError as error:
            raise DistilError(f"{where}: {file} line {number} is not UTF-8 (byte 0x{raw[error.start]:02x}); "
                              f"re-save the file as UTF-8, e.g. iconv -f latin1 -t utf-8"
                              f"{f', or {lenient}' if lenient else ''}") from None


def _check_columns(lines: Iterator[str], fmt: str, file: Path, where: str) -> None:
    reader = csv.reader(lines, **CSV_DIALECTS[fmt])
    expected = first_line = None
    for row in reader:
        if not row:  # blank line: the builder skips it
            continue
        if expected is None:
            expected, first_line = len(row), reader.line_num
        elif len(row) != expected:
            hint = ("a tab inside a text?" if fmt == "tsv"
                    else 'quote a field that holds a comma: "like, this"')
            raise DistilError(f"{where}: {file} line {reader.line_num} has {_columns(len(row))} where line "
                              f"{first_line} has {expected}; fix that line ({hint})")


def _columns(count: int) -> str:
    return f"{count} column{'' if count == 1 else 's'}"


def _check_jsonl(lines: Iterator[str], file: Path, where: str) -> None:
    keys = first_line = None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DistilError(f"{where}: {file} line {number} is not valid JSON ({error.msg} at column "
                              f"{error.colno}); fix that line: jsonl holds one JSON object per line") from None
        if not isinstance(row, dict):
            raise DistilError(f"{where}: {file} line {number} is not a JSON object; jsonl holds one "
                              f'object per line, e.g. {{"text": "...", "label": "..."}}')
        if keys is None:
            keys, first_line = set(row), number
        elif set(row) != keys:
            missing = ", ".join(sorted(keys - set(row))) or "none"
            extra = ", ".join(sorted(set(row) - keys)) or "none"
            raise DistilError(f"{where}: {file} line {number} has other keys than line {first_line} (missing: "
                              f"{missing}; extra: {extra}); give every line the same keys")
