"""Files written whole or not at all: a reader (a table, a resumed sweep, a user's script) sees the
old file or the new one, never half of one, and a run killed mid-write leaves no torn file behind.
No torch here: distil-table and distil-report write with it before importing anything heavy."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # a temporary of its own: two processes writing the same file (parallel table workers) never write
    # into one temporary, so each renames a whole file
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".tmp")
    os.close(handle)
    tmp = Path(name)
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    except BaseException:
        # a full disk or an interrupt mid-write: the old file stays, and no empty or torn .tmp beside it
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, payload: dict) -> None:
    write_atomic(path, json.dumps(payload, indent=2, default=float))  # numpy and torch scalars as numbers
