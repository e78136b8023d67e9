"""A full disk, told as one line: recognising it in whatever a writer raised, and what to do about it.

Writers report a full disk in many ways: Python's OSError(ENOSPC), safetensors' and tokenizers' Rust
errors ("No space left on device (os error 28)"), torch.save's RuntimeError with the OSError as its
context. `disk_full` finds any of them; `disk_full_message` is the one line the commands print.
No torch here: every command's error path imports it.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from distil.common.outputs_dir import OUTPUTS_ENV  # a larger disk for the outputs is the usual fix
from distil.errors import error_chain

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
DISK_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "os error 28)", "os error 122)")


def disk_full(error: BaseException) -> bool:
    """Whether `error`, or any error it was raised from or while handling, is a full disk (or quota)."""
    return any((isinstance(link, OSError) and link.errno in DISK_FULL_ERRNOS)
               or any(text in str(link).lower() for text in DISK_FULL_TEXTS) for link in error_chain(error))


def written_path(error: BaseException) -> Path | None:
    """The file a disk-full OSError in `error`'s chain was writing, where it says."""
    return next((Path(os.fsdecode(link.filename)) for link in error_chain(error)
                 if isinstance(link, OSError) and link.filename), None)


def free_bytes(path: Path) -> int | None:
    """Free space on the disk that holds `path` (or its nearest existing parent); None if unknown."""
    path = Path(path).absolute()
    for candidate in (path, *path.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return None


def human_bytes(n: float) -> str:
    """Like `du -h`: 216B, 4.0K, 340M, 1.2G."""
    unit = "B"
    for bigger in "KMGT":
        if n < 1024:
            break
        n, unit = n / 1024, bigger
    return f"{n:.0f}{unit}" if unit == "B" or n >= 10 else f"{n:.1f}{unit}"


def disk_full_message(error: BaseException, where: Path | None = None) -> str:
    """`the disk is full ...; <fix>`: the file being written (or `where`) and the two ways out (free space,
    or the outputs on a larger disk). The space left is not told: what the failed write held is freed by then."""
    path = written_path(error) or where
    place = f" writing {path}" if path is not None else ""
    return (f"the disk is full{place}; free space there (distil cache prune --stale removes what failed "
            f"builds left), or put the outputs on a larger disk: {OUTPUTS_ENV}=/path/with/room distil ...")
