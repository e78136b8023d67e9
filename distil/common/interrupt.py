"""Ctrl-C and SIGTERM end a command the same way: `finally` blocks and locks clean up, one line is
printed, and the exit code says which signal it was (130 or 143). Shared by every console script."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from distil.common import distributed


class Terminated(BaseException):
    """SIGTERM, raised in the main thread like Ctrl-C so `finally` blocks and locks clean up."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@contextmanager
def exit_on_interrupt(message: str) -> Iterator[None]:
    """SIGTERM raises Terminated inside the block (the previous handler is restored after it); Ctrl-C or
    SIGTERM prints `message` and exits 130 or 143. Off the main thread (tests calling main from a worker)
    no signal handler can be installed, so only Ctrl-C is caught."""
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if in_main_thread else None
    try:
        yield
    except (KeyboardInterrupt, Terminated) as interrupt:
        if distributed.rank_from_env() == 0:  # torchrun stops every rank: one of them tells it
            print(message, file=sys.stderr)
        sys.exit(143 if isinstance(interrupt, Terminated) else 130)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
