"""Content-addressed artifacts: built in a temporary directory, renamed when complete.

An artifact lives at `<root>/<kind>/<name>-<hash>/` where the hash covers everything
that changes its bytes (the `spec`). `manifest.json` records the spec and a SHA-256
per file; an artifact whose files disagree with its manifest is reported and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
MANIFEST = "manifest.json"


def spec_hash(spec: dict[str, Any]) -> str:
    canonical = json.dumps({"format": FORMAT_VERSION, **spec}, sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@dataclass(frozen=True)
class Artifact:
    key: str
    path: Path
    reused: bool
    info: dict[str, Any]


class ArtifactStore:
    def __init__(self, root: str | Path):
        self.root = Path(root)

    def find(self, kind: str, name: str, spec: dict[str, Any]) -> Artifact | None:
        """The intact artifact for `spec` if one was built, else None (nothing is built)."""
        key = f"{name}-{spec_hash(spec)}"
        final = self.root / kind / key
        if not final.exists() or self.verify(final) is not None:
            return None
        manifest = json.loads((final / MANIFEST).read_text())
        return Artifact(key, final, True, manifest.get("info", {}))

    def get_or_build(
        self,
        kind: str,
        name: str,
        spec: dict[str, Any],
        build: Callable[[Path], dict[str, Any]],
    ) -> Artifact:
        """Return the artifact for `spec`, building it with `build(tmp_dir) -> info` if needed."""
        key = f"{name}-{spec_hash(spec)}"
        final = self.root / kind / key
        if final.exists():
            problem = self.verify(final)
            if problem is None:
                manifest = json.loads((final / MANIFEST).read_text())
                return Artifact(key, final, True, manifest.get("info", {}))
            log.warning("artifact %s is damaged (%s); rebuilding it", final, problem)
            shutil.rmtree(final)

        tmp = self.root / "tmp" / f"{key}.{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            info = build(tmp)
            files = {
                str(p.relative_to(tmp)): {"sha256": file_sha256(p), "bytes": p.stat().st_size}
                for p in sorted(tmp.rglob("*"))
                if p.is_file()
            }
            manifest = {"key": key, "kind": kind, "format": FORMAT_VERSION, "spec": spec,
                        "info": info, "files": files}
            (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str))
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(tmp, final)  # atomic: readers see nothing or a complete artifact
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return Artifact(key, final, False, info)

    @staticmethod
    def verify(path: Path) -> str | None:
        """None if every file matches the manifest, else what is wrong."""
        manifest_path = path / MANIFEST
        if not manifest_path.is_file():
            return "no manifest"
        try:
            files = json.loads(manifest_path.read_text())["files"]
        except (json.JSONDecodeError, KeyError):
            return "unreadable manifest"
        for rel, meta in files.items():
            file = path / rel
            if not file.is_file():
                return f"missing {rel}"
            if file.stat().st_size != meta["bytes"] or file_sha256(file) != meta["sha256"]:
                return f"checksum mismatch in {rel}"
        return None
