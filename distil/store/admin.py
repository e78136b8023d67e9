"""What the artifact cache holds, whether its files are intact, and trimming it by age, size or damage:
the work of `distil cache list | verify | prune` (distil/cli/cache.py parses its arguments).

The layout read here is the one distil/store/artifacts.py writes:

    <root>/<kind>/<key>/manifest.json   a finished artifact; the manifest's mtime is its last use
    <root>/tmp/<key>/                   a build in progress, or what a killed build left (resumable)
    <root>/locks/<key>.lock             held (fcntl.flock) by whoever builds <key> (exclusive) or reads it (shared)

Nothing here imports torch: listing a cache must be instant.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from distil.common.diskspace import human_bytes
from distil.common.outputs_dir import outputs_dir
from distil.errors import DistilError
from distil.store.artifacts import BUILD_DIR, MANIFEST, file_problem, process_alive, still_linked

PROG = "distil-cache"
NOT_KINDS = {"tmp", "locks", "checkpoints", "configs"}  # every other directory under the root holds one artifact kind
KEY = re.compile(r"^(?P<name>.+)-[0-9a-f]{16}$")
KIND_ORDER = {"teachers": 0, "targets": 1}  # what is built first is listed first; other kinds follow
REBUILD_HINT = "the next run that needs it rebuilds it; or: distil cache prune --damaged"
DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
AGE_UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400), ("hour", 3600), ("minute", 60))

# ----------------------------------------------------------------------------- the cache on disk


@dataclass
class Artifact:
    kind: str
    key: str
    path: Path
    manifest: dict | None  # None when missing or unreadable: `manifest_problem` says which
    manifest_problem: str | None
    size: int
    last_used: float

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.key}"


@dataclass
class Build:
    key: str
    path: Path
    size: int
    modified: float
    running: bool
    resumable: bool  # False: an old-style `<key>.<pid>`, empty, or its artifact is complete (store.remove_stale_builds)
    empty: bool = False

    @property
    def label(self) -> str:
        return f"{self.path.parent.name}/{self.path.name}"  # tmp/<key>, or checkpoints/<hash>


def default_cache_dir() -> Path:
    # The same default as conf/paths: paths.cache = ${DISTIL_OUTPUTS or outputs}/cache, from cwd.
    return outputs_dir() / "cache"


def open_cache(root: Path) -> Path:
    if not root.is_dir():
        raise DistilError(f"no cache at {root}: run from the directory your runs ran in, or pass "
                          f"--cache-dir DIR (the runs' paths.cache, default outputs/cache)")
    if (root / "cache").is_dir() and not kinds_in(root):
        raise DistilError(f"{root} holds no artifacts but has a cache/ folder: pass --cache-dir {root / 'cache'}")
    return root


def kinds_in(root: Path) -> list[str]:
    kinds = [p.name for p in root.iterdir()
             if p.is_dir() and p.name not in NOT_KINDS and not p.name.startswith(".")
             and any(KEY.match(child.name) for child in p.iterdir())]
    return sorted(kinds, key=lambda kind: (KIND_ORDER.get(kind, len(KIND_ORDER)), kind))


def check_kind(root: Path, kind: str | None) -> None:
    if kind is not None and kind not in kinds_in(root):
        raise DistilError(f"no artifacts of kind '{kind}' in {root}; kinds here: "
                          f"{', '.join(kinds_in(root)) or 'none'}")


def disk_size(path: Path) -> int:
    total = 0
    for file in path.rglob("*"):
        try:
            if file.is_file():
                total += file.stat().st_size
        except OSError:  # removed while we walk: a build or a prune is at work
            pass
    return total


def find_artifacts(root: Path, kind: str | None = None) -> list[Artifact]:
    artifacts = []
    for kind_name in kinds_in(root):
        if kind is not None and kind_name != kind:
            continue
        for path in sorted((root / kind_name).iterdir()):
            if path.is_dir() and KEY.match(path.name):
                artifact = read_artifact(kind_name, path)
                if artifact is not None:
                    artifacts.append(artifact)
    return artifacts


def read_artifact(kind: str, path: Path) -> Artifact | None:
    """The artifact at `path`, or None if it vanished (a run took it back to rebuild it)."""
    manifest, problem = read_manifest(path)
    try:
        # The store touches the manifest on every reuse: its mtime is the artifact's last use.
        last_used = (path / MANIFEST if manifest else path).stat().st_mtime
    except FileNotFoundError:
        return None
    return Artifact(kind, path.name, path, manifest, problem, disk_size(path), last_used)


def read_manifest(path: Path) -> tuple[dict | None, str | None]:
    """(manifest, None), or (None, what is wrong with it)."""
    try:
        manifest = json.loads((path / MANIFEST).read_text())
    except FileNotFoundError:
        return None, f"no {MANIFEST}"
    except (OSError, ValueError):
        return None, f"unreadable {MANIFEST}"
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict):
        return None, f"unreadable {MANIFEST} (no file list)"
    return manifest, None


def find_builds(root: Path) -> list[Build]:
    tmp = root / "tmp"
    if not tmp.is_dir():
        return []
    builds = []
    for path in sorted(p for p in tmp.iterdir() if p.is_dir()):
        match = BUILD_DIR.match(path.name)
        key = match["key"] if match else path.name
        # An old-style `<key>.<pid>` directory has no lock: its process being alive is the sign.
        running = lock_is_held(root, key) or bool(match and match["pid"] and process_alive(int(match["pid"])))
        empty = is_empty(path)  # a build that failed before saving anything: nothing to resume
        resumable = bool(match and not match["pid"]) and not empty and not any(root.glob(f"*/{key}/{MANIFEST}"))
        builds.append(Build(key, path, disk_size(path), newest_mtime(path), running, resumable, empty))
    return builds


def find_checkpoints(root: Path) -> list[Build]:
    """A student's schedule checkpoints, `<root>/checkpoints/<hash>/` (distil/training/checkpoint.py), left by
    a failed or interrupted run: the next run of the same command resumes from one. Locked as `checkpoint-<hash>`
    while a run trains that student."""
    folder = root / "checkpoints"
    found = []
    for path in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        key = f"checkpoint-{path.name}"
        empty = is_empty(path)
        found.append(Build(key, path, disk_size(path), newest_mtime(path), lock_is_held(root, key), not empty, empty))
    return found


def is_empty(path: Path) -> bool:
    """Whether a directory holds nothing (False if it vanished meanwhile: there is nothing to say about it)."""
    try:
        return next(path.iterdir(), None) is None
    except OSError:
        return False


def newest_mtime(path: Path) -> float:
    """A resumed build writes new shards into an old directory: its newest file dates it."""
    times = [path.stat().st_mtime]
    for file in path.rglob("*"):
        try:
            times.append(file.stat().st_mtime)
        except OSError:
            pass
    return max(times)


# ----------------------------------------------------------------------------- build locks


@contextmanager
def build_lock(root: Path, key: str, create: bool = True) -> Iterator[bool]:
    """Yield True while we hold `key`'s build lock (a run that wants to build it waits for us),
    False if a run holds it. Without `create` (dry runs, listing) nothing is written: an absent
    lock file means nobody builds `key`. Lock files stay, as the store leaves them: unlinking one
    that another process has open would let two processes each believe they hold the lock."""
    path = root / "locks" / f"{key}.lock"
    if not create and not path.exists():
        yield True
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT if create else os.O_RDONLY, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            ours = not create or still_linked(fd, path)  # a lock file another prune removed is nobody's lock
        except BlockingIOError:
            ours = False
        yield ours
    finally:
        os.close(fd)  # releases the lock


def unused_locks(root: Path, gone: set[Path]) -> list[Path]:
    """Lock files of keys the cache holds nothing of (no artifact, build or checkpoint, `gone` aside): the
    store makes one per key it ever built, and without pruning locks/ grows by one file per key."""
    folder = root / "locks"
    if not folder.is_dir():
        return []
    present = set()
    for entry in root.iterdir():
        if entry.is_dir() and entry.name != "locks":
            prefix = "checkpoint-" if entry.name == "checkpoints" else ""  # a student's checkpoint lock
            present.update(f"{prefix}{child.name}" for child in entry.iterdir() if child not in gone)
    return [path for path in sorted(folder.glob("*.lock")) if path.stem not in present]


def remove_unused_lock(path: Path) -> bool:
    """Unlink a lock file while holding its lock, if nobody else holds it. A process that opened it just before
    finds, once it gets the lock, that the file is gone, and locks the new one (artifacts.still_linked)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not still_linked(fd, path):
            return False
        path.unlink()
        return True
    except OSError:  # held (BlockingIOError), or removed meanwhile
        return False
    finally:
        os.close(fd)


def prune_locks(root: Path, dry_run: bool, gone: set[Path]) -> None:
    """--stale: the lock files of keys with nothing left once `gone` is deleted, one line for them all."""
    unused = unused_locks(root, gone)
    removed = len(unused) if dry_run else sum(remove_unused_lock(path) for path in unused)
    if removed:
        print(f"{'would remove' if dry_run else 'removed'} {removed} unused lock file(s) in {root / 'locks'}")


def lock_is_held(root: Path, key: str) -> bool:
    with build_lock(root, key, create=False) as ours:
        return not ours


# ----------------------------------------------------------------------------- verification


def problems_in(artifact: Artifact) -> list[str]:
    """What differs between an artifact's files and its manifest; [] when intact.
    Files the manifest does not list are not part of the artifact and are ignored."""
    if artifact.manifest is None:
        return [artifact.manifest_problem or f"unreadable {MANIFEST}"]
    if not artifact.manifest["files"]:  # no artifact is empty: a list emptied by hand vouches for nothing
        return [f"{MANIFEST} lists no files"]
    return [problem for rel, meta in artifact.manifest["files"].items()
            if (problem := file_problem(artifact.path, rel, meta))]


def verdict(artifact: Artifact, problems: list[str]) -> str:
    if not problems:
        return f"ok  {artifact.label}"
    shown = "; ".join(problems[:3]) + (f"; and {len(problems) - 3} more" if len(problems) > 3 else "")
    return f"DAMAGED {artifact.label}: {shown} ({REBUILD_HINT})"


def select(artifacts: list[Artifact], names: list[str], root: Path) -> list[Artifact]:
    """The artifacts named by key, `kind/key`, or a prefix that picks out exactly one."""
    if not names:
        return artifacts
    chosen = []
    for name in names:
        matches = ([a for a in artifacts if name in (a.key, a.label)]
                   or [a for a in artifacts if a.key.startswith(name) or a.label.startswith(name)])
        if not matches:
            raise DistilError(f"no artifact '{name}' in {root}; `distil cache list` shows the keys")
        if len(matches) > 1:
            raise DistilError(f"'{name}' matches {len(matches)} artifacts "
                              f"({', '.join(a.label for a in matches[:3])}...); give more of the key")
        chosen += [m for m in matches if m not in chosen]
    return chosen


# ----------------------------------------------------------------------------- what an entry is


def facts(artifact: Artifact) -> dict:
    """The manifest's `describe` block, completed from the key and spec for artifacts
    written before the store recorded one."""
    described = dict(manifest_part(artifact, "describe"))
    spec = manifest_part(artifact, "spec")
    if "teacher" not in described:
        # A teacher's key is named after it; targets name their teacher's key in the spec.
        source = spec.get("teacher") if isinstance(spec.get("teacher"), str) else artifact.key
        match = KEY.match(source)
        described["teacher"] = match["name"] if match else source
    if "layers" not in described and "layer" in spec:
        described["layers"] = [] if spec["layer"] is None else [spec["layer"]]
    return described


def what_it_is(described: dict) -> str:
    parts = [f"teacher {described['teacher']}"] if described.get("teacher") else []
    parts += [str(described[name]) for name in ("dataset", "task") if described.get(name)]
    if "layers" in described:
        layers = described["layers"]
        parts.append(f"layers {', '.join(map(str, layers))}" if layers else "logits only")
    if described.get("hidden"):
        parts.append(str(described["hidden"]))  # e.g. "each sentence of a pair alone"
    examples = described.get("examples")
    if isinstance(examples, dict) and all(isinstance(n, int) for n in examples.values()):
        parts.append(f"{sum(examples.values()):,} examples")
    return ", ".join(parts)


def describe_entry(artifact: Artifact) -> str:
    """What an entry holds, or, for one without a readable manifest, that it holds nothing usable: an
    empty key directory, or a manifest that cannot be read, is no artifact a run would use."""
    if artifact.manifest is not None:
        return what_it_is(facts(artifact))
    if is_empty(artifact.path):
        return f"DAMAGED: empty directory, nothing cached ({REBUILD_HINT})"
    return f"DAMAGED: {artifact.manifest_problem} ({REBUILD_HINT})"


def teacher_of(artifact: Artifact) -> str | None:
    teacher = manifest_part(artifact, "spec").get("teacher")
    return teacher if isinstance(teacher, str) else None


def manifest_part(artifact: Artifact, name: str) -> dict:
    part = (artifact.manifest or {}).get(name)
    return part if isinstance(part, dict) else {}


# ----------------------------------------------------------------------------- units


def parse_duration(text: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a duration: use a number and a unit "
                                         f"(s, m, h, d, w), e.g. 30d, 12h, 2w")
    return float(match[1]) * DURATION_UNITS[match[2]]


def parse_size(text: str) -> int:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?", text.strip().lower())
    if not match:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size: use a number and a unit "
                                         f"(K, M, G, T; powers of 1024), e.g. 5G, 500M")
    return int(float(match[1]) * SIZE_UNITS[match[2]])


def ago(seconds: float) -> str:
    for unit, length in AGE_UNITS:
        count = int(seconds // length)
        # Days until two months: "45 days ago" says more than "1 month ago".
        if count >= (2 if unit == "month" else 1):
            return f"{count} {unit}{'s' if count > 1 else ''} ago"
    return "just now"


def when(timestamp: float, now: float) -> str:
    return f"{ago(now - timestamp)} ({datetime.fromtimestamp(timestamp):%Y-%m-%d %H:%M})"


def iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp).isoformat(timespec="seconds")


# ----------------------------------------------------------------------------- list


def list_cache(root: Path, args: argparse.Namespace) -> int:
    check_kind(root, args.kind)
    now = time.time()
    artifacts = find_artifacts(root, args.kind)
    builds = find_builds(root)
    problems = {a.label: problems_in(a) for a in artifacts} if args.verify else {}
    if args.json:
        print(json.dumps(cache_as_json(root, artifacts, builds, problems, args.verify), indent=2))
    else:
        print_cache(root, artifacts, builds, problems, args.verify, now)
    return 1 if any(problems.values()) else 0


def cache_as_json(root: Path, artifacts: list[Artifact], builds: list[Build],
                  problems: dict[str, list[str]], verified: bool) -> dict:
    rows = []
    for a in artifacts:
        row = {"kind": a.kind, "key": a.key, "path": str(a.path), "what": describe_entry(a),
               "describe": facts(a), "bytes": a.size, "last_used": iso(a.last_used)}
        if teacher_of(a):
            row["teacher_key"] = teacher_of(a)
        if a.manifest is None:  # damaged whether or not --verify was asked: nothing here can be used
            row["status"], row["problems"] = "damaged", problems_in(a)
        if verified:
            row["status"] = "damaged" if problems[a.label] else "ok"
            row["problems"] = problems[a.label]
        rows.append(row)
    return {"cache": str(root), "artifacts": rows,
            "builds": [{"key": b.key, "path": str(b.path), "bytes": b.size, "modified": iso(b.modified),
                        "state": "running" if b.running else "stale", "resumable": b.resumable} for b in builds],
            "total_bytes": sum(a.size for a in artifacts) + sum(b.size for b in builds)}


def print_cache(root: Path, artifacts: list[Artifact], builds: list[Build],
                problems: dict[str, list[str]], verified: bool, now: float) -> None:
    headers = ["kind", "key", "what", "size", "last used"] + (["status"] if verified else [])
    rows = []
    for a in artifacts:  # kinds in build order; within a kind, by key
        row = [a.kind, a.key, describe_entry(a), human_bytes(a.size), when(a.last_used, now)]
        if verified:
            row.append("DAMAGED: " + "; ".join(problems[a.label]) if problems[a.label] else "ok")
        rows.append(row)
    show_table(f"cache {root}", headers, rows, right={3}, total=totals(artifacts))
    if builds:
        build_rows = [[b.key, build_state(b), human_bytes(b.size), when(b.modified, now)] for b in builds]
        print()
        build_total = f"{len(builds)} build(s) in {root / 'tmp'}, {human_bytes(sum(b.size for b in builds))}"
        show_table(f"builds in {root / 'tmp'}", ["key", "state", "size", "last written"], build_rows,
                   right={2}, total=build_total)


def build_state(build: Build) -> str:
    if build.running:
        return "running (lock held)"
    if build.empty:
        return "stale: empty, a failed build saved nothing; the next run removes it, or prune --stale"
    if build.resumable:
        return "stale: the next run resumes it, or prune --stale"
    return "stale: nothing resumes it, the next run removes it, or prune --stale"


def totals(artifacts: list[Artifact]) -> str:
    if not artifacts:
        return "no artifacts"
    per_kind = {}
    for a in artifacts:
        count, size = per_kind.get(a.kind, (0, 0))
        per_kind[a.kind] = (count + 1, size + a.size)
    by_kind = "; ".join(f"{kind} {count}, {human_bytes(size)}" for kind, (count, size) in per_kind.items())
    return f"total: {len(artifacts)} artifact(s), {human_bytes(sum(a.size for a in artifacts))} ({by_kind})"


def show_table(title: str, headers: list[str], rows: list[list[str]], right: set[int], total: str) -> None:
    """A rich table on a terminal; aligned plain text (easy to grep and diff) otherwise."""
    from rich.console import Console

    console = Console()
    if console.is_terminal:
        from rich.table import Table

        table = Table(title=title, caption=total)
        for i, header in enumerate(headers):
            table.add_column(header, justify="right" if i in right else "left")
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    widths = [max(len(cell) for cell in column) for column in zip(headers, *rows, strict=True)]
    for row in [headers, *rows]:
        cells = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        print("  ".join(cells).rstrip())
    print(total)


# ----------------------------------------------------------------------------- verify


def verify_cache(root: Path, args: argparse.Namespace) -> int:
    check_kind(root, args.kind)
    artifacts = select(find_artifacts(root, args.kind), args.keys, root)
    damaged = 0
    for artifact in artifacts:
        problems = problems_in(artifact)
        damaged += bool(problems)
        print(verdict(artifact, problems), flush=True)  # hashing gigabytes takes a while: show progress
    print(f"{len(artifacts)} artifact(s) checked: {len(artifacts) - damaged} ok, {damaged} damaged",
          file=sys.stderr)
    return 1 if damaged else 0


# ----------------------------------------------------------------------------- prune


@dataclass
class Deletion:
    label: str
    key: str
    path: Path
    size: int
    reason: str


def prune_cache(root: Path, args: argparse.Namespace) -> int:
    if not (args.older_than is not None or args.max_size is not None or args.damaged or args.stale):
        raise DistilError("nothing to prune by: give --older-than, --max-size, --damaged and/or --stale "
                          "(add --dry-run to see what would go)")
    check_kind(root, args.kind)
    now = time.time()
    artifacts = find_artifacts(root, args.kind)
    plan = plan_artifacts(root, artifacts, args, now) + plan_builds(root, args, now)
    outcomes = []
    for deletion in plan:
        done = delete(root, deletion, args.dry_run)
        if done:
            report_dependants(deletion, artifacts, plan)
        outcomes.append((deletion, done))
    if args.stale:
        prune_locks(root, args.dry_run, {d.path for d, done in outcomes if done})
    deleted = [d for d, done in outcomes if done]
    freed = human_bytes(sum(d.size for d in deleted))
    skipped = sum(done is False for _, done in outcomes)
    failed = sum(done is None for _, done in outcomes)
    kept = f"; {skipped} in use, kept" if skipped else ""
    if not plan:
        print(f"nothing to prune; {totals(artifacts)}")
    elif args.dry_run:
        print(f"dry run: would delete {len(deleted)}, freeing {freed}{kept}; nothing was deleted")
    else:
        remaining = human_bytes(sum(a.size for a in find_artifacts(root, args.kind)))
        print(f"deleted {len(deleted)}, freed {freed}{kept}{f'; {failed} failed' if failed else ''}; "
              f"{args.kind or 'artifacts'} left: {remaining}")
    return 1 if failed else 0


def plan_artifacts(root: Path, artifacts: list[Artifact], args: argparse.Namespace, now: float) -> list[Deletion]:
    plan: dict[str, Deletion] = {}
    for a in artifacts:
        problems = problems_in(a) if args.damaged else []
        if problems:
            plan[a.label] = Deletion(a.label, a.key, a.path, a.size, f"damaged: {problems[0]}")
        elif args.older_than is not None and now - a.last_used > args.older_than:
            plan[a.label] = Deletion(a.label, a.key, a.path, a.size, f"last used {ago(now - a.last_used)}")
    if args.max_size is not None:
        kept = [a for a in artifacts if a.label not in plan]
        total = sum(a.size for a in kept)
        for a in sorted(kept, key=lambda a: a.last_used):  # least recently used first
            if total <= args.max_size:
                break
            if lock_is_held(root, a.key):  # being rebuilt or read by a run: it stays, try the next one
                continue
            plan[a.label] = Deletion(a.label, a.key, a.path, a.size, f"least recently used, {ago(now - a.last_used)}; "
                                     f"over the {human_bytes(args.max_size)} limit")
            total -= a.size
    return list(plan.values())


def plan_builds(root: Path, args: argparse.Namespace, now: float) -> list[Deletion]:
    """Stale build directories when asked for them. Their kind is unknown (a build has no manifest
    yet), so an age rule restricted to one --kind leaves them alone."""
    by_age = args.older_than is not None and args.kind is None
    if not (args.stale or by_age):
        return []
    # --stale also takes a failed or interrupted student's checkpoints (what failed runs leave, as builds in
    # tmp/ are); an age rule alone keeps them (a run that resumes from one may not have come back yet)
    builds = [(b, "stale build") for b in find_builds(root)]
    checkpoints = [(c, "stale checkpoint") for c in find_checkpoints(root)] if args.stale else []
    return [Deletion(b.label, b.key, b.path, b.size, f"{what}, last written {ago(now - b.modified)}")
            for b, what in builds + checkpoints
            if not b.running and (args.stale or now - b.modified > args.older_than)]


def delete(root: Path, deletion: Deletion, dry_run: bool) -> bool | None:
    """True if deleted (or would be), False if a run holds its lock, None if deleting failed."""
    with build_lock(root, deletion.key, create=not dry_run) as ours:
        if not ours:
            print(f"skipped {deletion.label}: a run is building or reading it (its lock is held)")
            return False
        if not dry_run:
            try:
                # Holding the lock, no run can be building this key. A prune killed half-way leaves
                # files that disagree with the manifest: the store then rebuilds, never uses them.
                shutil.rmtree(deletion.path)
            except FileNotFoundError:
                pass
            except OSError as error:
                print(f"{PROG}: error: could not delete {deletion.path}: {error.strerror}", file=sys.stderr)
                return None
    print(f"{'would delete' if dry_run else 'deleted'} {deletion.label}  {human_bytes(deletion.size)}  "
          f"({deletion.reason})")
    return True


def report_dependants(deletion: Deletion, artifacts: list[Artifact], plan: list[Deletion]) -> None:
    """Targets hold the teacher's outputs, so they stay usable without it: say so, delete nothing."""
    planned = {d.label for d in plan}
    for a in artifacts:
        if teacher_of(a) == deletion.key and a.label not in planned:
            print(f"  kept {a.label}: built from this teacher, still usable without it "
                  f"(a run that needs the teacher fine-tunes it again)")
