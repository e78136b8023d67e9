"""How the console scripts other than the Hydra app `distil` begin and end.

A DistilError (a problem the user can fix) ends the command with one line on stderr,
`PROG: error: ...`, and exit code 2, never a traceback and never on stdout, where a pipe would take
it for output. The long commands (distil pretrain, distil-untuned, the benchmarks) also show their
INFO log lines: Hydra sets up `distil`'s, but nothing sets up theirs, and a two-hour build would say
nothing until it ended.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from distil.errors import DistilError


def console_script(name: str) -> str:
    """The script installed beside this interpreter (this checkout's), else the one on PATH."""
    import shutil
    from pathlib import Path

    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.is_file() else shutil.which(name)
    if found is None:
        raise DistilError(f"the {name} console script is not installed; run `pip install -e .` in the checkout")
    return found


@contextmanager
def console_command(prog: str, log_lines: bool = False) -> Iterator[None]:
    if log_lines:
        show_log_lines()
    try:
        yield
    except DistilError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def show_log_lines() -> None:
    """INFO lines, and with no terminal the progress heartbeat (distil.common.progress), go to stderr in a
    run's format (conf/config.yaml's job_logging)."""
    logging.basicConfig(level=logging.INFO, format="[%(asctime)s] %(message)s", datefmt="%H:%M:%S")
