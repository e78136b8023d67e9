"""Pieces of one build shared among processes: torchrun's ranks, or independent runs on a shared
file system that build one artifact together (the teacher's cached shards, the corpus's sentence
vectors). Each piece is computed by the one process that claims it; a claim is an exclusive
`flock`, so it goes when its holder dies and the piece falls to the next process that asks."""

from __future__ import annotations

import fcntl
import shutil
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

Piece = TypeVar("Piece")


class ShardClaims:
    """Which process computes which piece of a build directory `out`: an exclusive lock per piece,
    in `<out>.claims/` beside it (not in it: the manifest lists every file of the build), released
    when its holder finishes or dies."""

    def __init__(self, out: Path):
        self.out = out
        self.directory = out.with_name(f"{out.name}.claims")

    def mine(self, pieces: Mapping[str, Piece], assisting: bool = False) -> Iterator[Piece]:
        """The pieces this process computes, of `pieces` (the file each is written to in `out` -> what
        the caller needs to compute it), each claimed while the caller computes it (the loop's body):
        first those no process holds; then, for the builder (not `assisting`), each one another held,
        once its holder lets go, so a piece whose holder died before writing it is computed here. A
        piece already in `out` is done."""
        for wait in (False,) if assisting else (False, True):
            for name, piece in pieces.items():
                with self.take(name, wait=wait) as claimed:
                    if claimed and not (self.out / name).is_file():
                        yield piece

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
