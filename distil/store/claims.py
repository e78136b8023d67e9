"""Pieces of one build shared among processes: torchrun's ranks, or independent runs on a shared
file system that build one artifact together (the teacher's cached shards, the corpus's sentence
vectors). Each piece is computed by the one process that claims it; a claim is an exclusive
`flock`, so it goes when its holder dies and the piece falls to the next process that asks."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class ShardClaims:
    """Which process computes which piece of a build directory `out`: an exclusive lock per piece,
    in `<out>.claims/` beside it (not in it: the manifest lists every file of the build), released
    when its holder finishes or dies."""

    def __init__(self, out: Path):
        self.directory = out.with_name(f"{out.name}.claims")

    @contextmanager
    def take(self, name: str, wait: bool) -> Iterator[bool]:
        """True while this process holds `name`'s claim; False if another holds it (without `wait`)."""
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            handle = (self.directory / f"{name}.lock").open("a")
        except FileNotFoundError:  # removed by the builder that just finished: nothing left to claim
            yield False
            return
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True

    def remove(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)
