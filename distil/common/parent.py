"""A child process that stops when the process that started it dies, even by kill -9.

`distil table` runs each cell as a `distil` subprocess. Killed with -9, the table cannot stop its cell,
which would run on, orphaned, with no one to read its result. The table names itself in the cell's
environment; the cell watches its parent and, once it is gone, sends itself SIGTERM, which a run
handles as an interruption (`failed: interrupted` in metrics.json, resumable by the same command).
A watcher thread, not Linux's PR_SET_PDEATHSIG: subprocess's preexec_fn is unsafe where the table
starts cells from threads (`--jobs`), and the thread works on every platform.
"""

from __future__ import annotations

import os
import signal
import threading
import time

PARENT_ENV = "DISTIL_STOP_WITH_PARENT"  # the pid of the process whose death stops this one


def child_environment() -> dict[str, str]:
    """The environment of a child that should stop when this process dies."""
    return {**os.environ, PARENT_ENV: str(os.getpid())}


def stop_with_parent(poll_seconds: float = 1.0) -> None:
    """If started by such a parent, SIGTERM this process once that parent is gone. The variable is
    taken out of the environment, so this process's own children (torchrun ranks, workers) are not
    watched against the wrong parent."""
    expected = os.environ.pop(PARENT_ENV, None)
    if expected is None or not expected.isdigit():
        return

    def watch() -> None:
        while os.getppid() == int(expected):
            time.sleep(poll_seconds)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="stop-with-parent", daemon=True).start()
