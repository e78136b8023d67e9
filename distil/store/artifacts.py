"""Content-addressed artifacts: built in a resumable temporary directory, renamed when complete.

An artifact lives at `<root>/<kind>/<name>-<hash>/` where the hash covers everything
that changes its bytes (the `spec`). `manifest.json` records the spec, a `describe` block
for humans (`distil cache list`), and a SHA-256 and size per file; its mtime is the last
time a run used the artifact.

A build runs in `<root>/tmp/<key>/` while holding an exclusive lock on
`<root>/locks/<key>.lock`: a second run that needs the same artifact waits and then reuses
it. A run that uses an artifact holds a shared lock on it until it ends, so `distil cache
prune` (which needs the exclusive lock) never deletes what a running job reads. The build
directory survives an interrupted build, so the next run resumes it (the
builder decides what in it is complete). An artifact whose files disagree with its
manifest is reported in one line; its intact files go back to the build directory and
only what is missing is rebuilt.

What a killed run (kill -9, SIGTERM, a crash) leaves in `<root>/tmp/`, per kind of directory;
every run removes at start (`remove_stale_builds`) what nothing would ever read again:
- `<key>/` of a teacher (fine-tuning checkpoint, finished learning rates) or of targets
  (finished shards; a `.partial` file is overwritten): kept, the next build of `<key>` resumes
  it. `distil cache prune --stale` deletes such directories on request.
- `<key>/` whose lock is free while `<kind>/<key>/` is complete and intact: removed, no build
  of `<key>` runs again, so nothing resumes it.
- `<key>/` whose lock is free and that is empty (a build that failed before saving anything, e.g. on a
  full disk): removed, there is nothing to resume.
- `<key>.<pid>/`, as versions before the lock named builds: removed once process <pid> is
  gone; this version never reads them.
A directory whose lock another run holds is never touched, nor is anything in tmp/ that is
not named like a build.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distil.common import distributed
from distil.errors import DistilError

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# A build directory's name: `<key>`, or `<key>.<pid>` as older versions named them (without a lock).
BUILD_DIR = re.compile(r"^(?P<key>.+-[0-9a-f]{16})(?:\.(?P<pid>\d+))?$")


def spec_hash(spec: dict[str, Any]) -> str:
    canonical = json.dumps({"format": FORMAT_VERSION, **spec}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# What writing to a cache this process may only read raises (a read-only mount, another user's cache).
READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)

# lock file -> the open file holding this process's shared lock on it. One table for the
# process, not per store: a sweep's cells each open a store on the same cache.
_READ_LOCKS: dict[Path, Any] = {}


def release_read_locks() -> None:
    """Drop every read lock this process holds (they also go when it exits)."""
    while _READ_LOCKS:
        _READ_LOCKS.popitem()[1].close()


@dataclass(frozen=True)
class Artifact:
    key: str
    path: Path
    reused: bool
    info: dict[str, Any]


class ArtifactStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def _lock_path(self, key: str) -> Path:
        return self.root / "locks" / f"{key}.lock"

    def _open_lock(self, key: str, mode: str):
        """`key`'s lock file, open in `mode` (created if need be). In a cache this process may only read,
        the file opened for reading (flock needs no write access), or None where there is none to open:
        a read-only cache is read without a lock, as nothing can prune it from here."""
        path = self._lock_path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            return path.open(mode)
        except OSError as error:
            if error.errno not in READ_ONLY:
                raise
        try:
            return path.open("r")
        except OSError:
            return None

    def _writable_lock(self, key: str, mode: str):
        """`key`'s lock file open for writing, or None in a cache this process may only read."""
        handle = self._open_lock(key, mode)
        if handle is not None and not handle.writable():
            handle.close()
            return None
        return handle

    def can_write(self, key: str) -> bool:
        """Whether this process may write `key` here (take its lock): False in a read-only cache."""
        handle = self._writable_lock(key, "a+")
        if handle is None:
            return False
        handle.close()
        return True

    def _hold_shared(self, key: str) -> None:
        """Keep a shared lock on `key` while this process may read it (released at exit)."""
        path = self._lock_path(key).resolve()
        if path not in _READ_LOCKS:
            handle = self._open_lock(key, "a")
            if handle is None:
                return
            fcntl.flock(handle, fcntl.LOCK_SH)
            if handle.writable() and not still_linked(handle, path):  # pruned while we waited: lock the new one
                handle.close()
                self._hold_shared(key)
                return
            _READ_LOCKS[path] = handle

    def _release_shared(self, key: str) -> None:
        handle = _READ_LOCKS.pop(self._lock_path(key).resolve(), None)
        if handle is not None:
            handle.close()  # closing the file drops its lock

    def key(self, name: str, spec: dict[str, Any]) -> str:
        return f"{name}-{spec_hash(spec)}"

    def find(self, kind: str, name: str, spec: dict[str, Any]) -> Artifact | None:
        """The intact artifact for `spec` if one was built, else None (nothing is built)."""
        final = self.root / kind / self.key(name, spec)
        if not final.exists() or self.verify(final) is not None:
            return None
        return self._reuse(final)

    def manifests(self, kind: str, name: str) -> Iterator[tuple[Path, dict[str, Any]]]:
        """Every built artifact of `kind` named `name` with its manifest, unverified: a caller
        checks the files it reads (`file_problem`)."""
        pattern = re.compile(rf"{re.escape(name)}-[0-9a-f]{{16}}")
        for manifest_path in sorted((self.root / kind).glob(f"{name}-*/{MANIFEST}")):
            if not pattern.fullmatch(manifest_path.parent.name):
                continue  # another name that starts like this one (minilm-l12 for minilm)
            try:
                yield manifest_path.parent, json.loads(manifest_path.read_text())
            except (OSError, json.JSONDecodeError):
                continue  # pruned meanwhile, or damaged: not a source

    def get_or_build(
        self,
        kind: str,
        name: str,
        spec: dict[str, Any],
        build: Callable[[Path], dict[str, Any]],
        describe: dict[str, Any] | None = None,
        assist: Callable[[Path], None] | None = None,
    ) -> Artifact:
        """Return the artifact for `spec`, building it with `build(build_dir) -> info` if needed.

        `build` may find files of an earlier interrupted build in `build_dir` and keep them. With
        `assist`, a process that finds another one building the artifact first calls
        `assist(build_dir)` to do part of that build beside it (the cache's shards, each claimed by one
        process), then waits for it as any other. Under torchrun every rank calls this alike and builds
        together (`_build_together`)."""
        if distributed.active():
            return self._build_together(kind, name, spec, build, describe)
        key = self.key(name, spec)
        final = self.root / kind / key
        if final.exists() and self.verify(final) is None and (reused := self._reuse(final)) is not None:
            return reused
        self._release_shared(key)  # our own read lock would block the rebuild
        helping = (lambda: assist(self.build_dir(key))) if assist is not None else None
        with self.lock(key, while_waiting=helping):
            problem = self.verify(final) if final.exists() else None
            built_meanwhile = final.exists() and problem is None  # by the run we waited for
            if not built_meanwhile:
                if problem is not None:
                    log.warning("cached %s %s is damaged (%s): rebuilding what is missing", kind, key, problem)
                    self._return_to_build(final, self.build_dir(key))
                info = self._build(kind, key, spec, build, describe, final)
        # Read locks are taken outside the exclusive one: a process holding both (on two open
        # files) would wait for itself.
        if built_meanwhile:
            # None: pruned between the build we waited for and our read lock; build it again
            return self._reuse(final) or self.get_or_build(kind, name, spec, build, describe)
        self._hold_shared(key)
        return Artifact(key, final, False, info)

    def _build_together(self, kind: str, name: str, spec: dict[str, Any], build: Callable[[Path], dict[str, Any]],
                        describe: dict[str, Any] | None) -> Artifact:
        """One artifact for every rank of a torchrun run: rank 0 takes the build lock and decides (reuse,
        or build), every rank then runs `build` into the one build directory (each doing its part:
        the cache's shards are claimed one process each, the rest is rank 0's to write), and rank 0
        seals it. No other rank touches the lock: one waiting on it would never reach the collectives
        rank 0 waits in."""
        key = self.key(name, spec)
        final, tmp = self.root / kind / key, self.build_dir(key)
        with contextlib.ExitStack() as held:
            decision = "reuse"
            if distributed.is_main():
                if not (final.exists() and self.verify(final) is None):
                    self._release_shared(key)
                    held.enter_context(self.lock(key))
                    problem = self.verify(final) if final.exists() else None
                    if not final.exists() or problem is not None:
                        if problem is not None:
                            log.warning("cached %s %s is damaged (%s): rebuilding what is missing", kind, key, problem)
                            self._return_to_build(final, tmp)
                        tmp.mkdir(parents=True, exist_ok=True)
                        decision = "build"
            if distributed.broadcast(decision) == "build":
                info = self._run_build(tmp, build)
                distributed.barrier()  # every rank's part is in the build directory
                if distributed.is_main():
                    self._seal(kind, key, spec, describe, final, tmp, info)
                info = distributed.broadcast(info)
        distributed.barrier()  # sealed, and rank 0's exclusive lock let go
        reused = self._reuse(final)
        if reused is None:
            raise DistilError(f"{kind} {key} was removed while this run built it; run the command again")
        return reused if decision == "reuse" else Artifact(key, final, False, info)

    def _run_build(self, tmp: Path, build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
        try:
            return build(tmp)
        except DistilError:
            if distributed.is_main():
                shutil.rmtree(tmp, ignore_errors=True)  # bad input: nothing worth resuming
            raise
        except BaseException:
            if distributed.is_main():
                with contextlib.suppress(OSError):
                    tmp.rmdir()  # only if empty: a build that failed before saving anything leaves nothing to resume
            raise

    def _build(self, kind: str, key: str, spec: dict[str, Any], build: Callable[[Path], dict[str, Any]],
               describe: dict[str, Any] | None, final: Path) -> dict[str, Any]:
        tmp = self.build_dir(key)
        tmp.mkdir(parents=True, exist_ok=True)
        info = self._run_build(tmp, build)
        self._seal(kind, key, spec, describe, final, tmp, info)
        return info

    def _seal(self, kind: str, key: str, spec: dict[str, Any], describe: dict[str, Any] | None, final: Path,
              tmp: Path, info: dict[str, Any]) -> None:
        """The manifest of a finished build, and the build directory renamed to the artifact."""
        files = {
            str(p.relative_to(tmp)): {"sha256": file_sha256(p), "bytes": p.stat().st_size}
            for p in sorted(tmp.rglob("*"))
            if p.is_file()
        }
        manifest = {"key": key, "kind": kind, "format": FORMAT_VERSION, "spec": spec,
                    "describe": describe or {}, "info": info, "files": files,
                    "created": time.strftime("%Y-%m-%dT%H:%M:%S")}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)  # atomic: readers see nothing or a complete artifact

    def build_dir(self, key: str) -> Path:
        return self.root / "tmp" / key

    @contextmanager
    def lock(self, key: str, while_waiting: Callable[[], None] | None = None) -> Iterator[None]:
        """Exclusive, across processes, for one key; released if the process dies. The holder
        writes its pid into the lock file, so a waiting run can say whom it waits for. A process
        that has to wait first runs `while_waiting()`, if given (help with the build it waits for). Raises
        DistilError in a cache this process may only read: whatever takes this lock writes there."""
        handle = self._writable_lock(key, "a+")
        if handle is None:
            raise DistilError(f"the cache {self.root} is read-only, and this run has to write {key} there; give "
                              f"paths.cache a writable directory (a copy of this one keeps what it holds) or make "
                              f"it writable")
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = lock_holder(handle)
                who = f"another run{f' (process {holder})' if holder else ''}"
                if while_waiting is not None:
                    log.info("%s is building %s: helping with it", who, key)
                    while_waiting()
                log.info("waiting for %s to build %s", who, key)
                fcntl.flock(handle, fcntl.LOCK_EX)
            relock = not still_linked(handle, self._lock_path(key))
            if not relock:
                handle.truncate(0)  # "a+" appends: the file holds our pid alone
                handle.write(str(os.getpid()))
                handle.flush()
                try:
                    yield
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        if relock:  # `distil cache prune --stale` removed the lock file we waited on: lock the one there now
            with self.lock(key):
                yield

    def remove_stale_builds(self) -> None:
        """Delete the build directories in tmp/ that no build will ever read (see the module
        docstring); a killed build that the next run of its key resumes stays."""
        tmp = self.root / "tmp"
        for path in sorted(tmp.iterdir()) if tmp.is_dir() else []:
            match = BUILD_DIR.match(path.name)
            if not path.is_dir() or not match:
                continue  # not a build directory of ours
            if match["pid"]:  # old-style, lock-free name: its process is the only sign of life
                pid = int(match["pid"])
                if not process_alive(pid):
                    self._remove_build(path, f"its run (process {pid}) is gone and this version cannot resume it")
                continue
            with self.try_lock(match["key"]) as ours:  # held: a run is building (or reading) it
                if ours and not any(path.iterdir()):
                    self._remove_build(path, "it is empty (its build failed before saving anything)")
                    continue
                complete = self._complete_artifact(match["key"]) if ours else None
                if complete is not None:
                    self._remove_build(path, f"{complete} is complete")

    def _complete_artifact(self, key: str) -> str | None:
        """`<kind>/<key>` if an intact artifact of `key` exists: its build directory is then never read."""
        for final in self.root.glob(f"*/{key}"):
            if final.parent.name not in ("tmp", "locks") and final.is_dir() and self.verify(final) is None:
                return f"{final.parent.name}/{key}"
        return None

    @staticmethod
    def _remove_build(path: Path, why: str) -> None:
        shutil.rmtree(path, ignore_errors=True)
        log.info("removed stale build directory %s: %s", path, why)

    @contextmanager
    def try_lock(self, key: str) -> Iterator[bool]:
        """True while we hold `key`'s exclusive lock, False if another run holds it (no waiting) or the
        cache is read-only (nothing in it may be removed from here)."""
        handle = self._writable_lock(key, "a")
        if handle is None:
            yield False
            return
        with handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            relock = not still_linked(handle, self._lock_path(key))
            if not relock:
                try:
                    yield True
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        if relock:  # its lock file was pruned between our open and our lock: try the one there now
            with self.try_lock(key) as ours:
                yield ours

    def _reuse(self, final: Path) -> Artifact | None:
        """The artifact, read-locked; None if `distil cache prune` deleted it while we waited for the lock."""
        self._hold_shared(final.name)
        manifest_path = final / MANIFEST
        try:
            manifest = json.loads(manifest_path.read_text())
        except FileNotFoundError:
            self._release_shared(final.name)
            return None
        with contextlib.suppress(OSError):  # a read-only cache keeps its times
            os.utime(manifest_path)  # last used: `distil cache prune --older-than` reads it
        return Artifact(manifest["key"], final, True, manifest.get("info", {}))

    @staticmethod
    def _return_to_build(final: Path, tmp: Path) -> None:
        """Damaged artifact -> build directory, keeping only the files that match the manifest (a
        file where the artifact's directory should be holds nothing to keep: it goes)."""
        shutil.rmtree(tmp, ignore_errors=True)
        if not final.is_dir():
            final.unlink()
            return
        damaged = set(ArtifactStore.damaged_files(final))
        tmp.parent.mkdir(parents=True, exist_ok=True)
        os.replace(final, tmp)
        for rel in damaged | {MANIFEST}:
            (tmp / rel).unlink(missing_ok=True)

    @staticmethod
    def damaged_files(path: Path) -> list[str]:
        """Files that are missing or differ from the manifest (every file, if it is unreadable or lists none)."""
        files = manifest_files(path)
        if not files:
            return [str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()]
        return [rel for rel, meta in files.items() if file_problem(path, rel, meta) is not None]

    @staticmethod
    def verify(path: Path) -> str | None:
        """None if every file matches the manifest, else what is wrong."""
        if not path.is_dir():
            return "a file where its directory should be"
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            return "no manifest"
        files = manifest_files(path)
        if files is None:
            return "unreadable manifest"
        if not files:
            return f"{MANIFEST} lists no files"
        return next((problem for rel, meta in files.items() if (problem := file_problem(path, rel, meta))), None)


def manifest_files(path: Path) -> dict | None:
    """The manifest's file list ({} when it lists none: no artifact is empty), None when unreadable."""
    try:
        files = json.loads((path / MANIFEST).read_text()).get("files")
    except (OSError, ValueError, AttributeError):
        return None
    return files if isinstance(files, dict) else None


def still_linked(handle, path: Path) -> bool:
    """Whether the open lock file `handle` (a file object or descriptor) is still the one at `path`. `distil
    cache prune --stale` unlinks a lock file nobody holds, holding its lock: a process that opened it just
    before, and waited, then holds a lock no other process can see, so it takes the lock of the file now at
    `path` instead."""
    try:
        return os.path.samestat(os.fstat(handle if isinstance(handle, int) else handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def lock_holder(handle) -> int | None:
    """The pid the last exclusive holder wrote into a lock file, if that process still runs."""
    handle.seek(0)
    text = handle.read().strip()
    return int(text) if text.isdigit() and int(text) != os.getpid() and process_alive(int(text)) else None


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def file_problem(artifact: Path, rel: str, meta: dict) -> str | None:
    """What is wrong with one file of an artifact against its manifest entry, or None."""
    file = artifact / rel
    try:
        expected_bytes, expected_sha = int(meta["bytes"]), str(meta["sha256"])
    except (TypeError, KeyError, ValueError):
        return f"unreadable {MANIFEST} (entry for {rel})"
    try:
        size = file.stat().st_size
        if not file.is_file():
            return f"missing {rel}"
        if size < expected_bytes:
            return f"{rel} is truncated ({size} of {expected_bytes} bytes)"
        if size > expected_bytes:
            return f"{rel} has {size} bytes, not {expected_bytes}"
        if file_sha256(file) != expected_sha:
            return f"checksum mismatch in {rel}"
    except FileNotFoundError:
        return f"missing {rel}"
    except OSError as error:
        return f"cannot read {rel} ({error.strerror})"
    return None
