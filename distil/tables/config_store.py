"""The composed configs that key table cells, kept on disk between commands.

Composing a cell's config with Hydra costs ~0.2 s, and a table reads hundreds: `make results` composed
every preset's cells in each of its two commands (~30 s each), `distil table` on a large preset spent
seconds before its first cell. A composition is a pure function of its overrides, the YAML it reads
and the code that composes it, so it is stored under a fingerprint of all three: any change to a
config file, to distil's code or to Hydra's version makes a new fingerprint and the stored ones are
not read. Where the store cannot be read or written (a read-only outputs directory), the config is
composed as before: the store only ever saves time.

Where: $DISTIL_CONFIG_CACHE, else <outputs>/cache/configs ($DISTIL_OUTPUTS or ./outputs, as `distil`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import hydra
import omegaconf

import distil
from distil.common.atomic import write_atomic
from distil.common.outputs_dir import outputs_dir
from distil.config.overrides import config_dirs, with_config_dir_env
from distil.config.schema import CONF_DIR

STORE_ENV = "DISTIL_CONFIG_CACHE"
KEPT_FINGERPRINTS = 4  # older fingerprints' stores (an earlier checkout or edit) are removed past this many
FINGERPRINT_LENGTH = 16
FINGERPRINT = re.compile(f"[0-9a-f]{{{FINGERPRINT_LENGTH}}}")  # only a store's own folders are ever removed
PACKAGE_DIR = Path(distil.__file__).resolve().parent


def store_dir() -> Path:
    given = os.environ.get(STORE_ENV)
    return Path(given) if given else outputs_dir() / "cache" / "configs"


def stored(overrides: tuple[str, ...], config_env: str | None, compose: Callable[[], dict]) -> dict:
    """The config `compose()` returns for these overrides (and DISTIL_CONFIG_DIR value): read from the
    store when it holds it under the current fingerprint, else composed and written there."""
    fingerprint = _fingerprint(overrides, config_env)
    if fingerprint is None:
        return compose()
    name = hashlib.sha256(json.dumps(list(overrides)).encode()).hexdigest()[:32] + ".json"
    path = store_dir() / fingerprint / name
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):  # not stored yet, or a file cut short: composed again
        pass
    config = compose()
    _write(path, config)
    return config


def _fingerprint(overrides: tuple[str, ...], config_env: str | None) -> str | None:
    """A digest of the code and every config file these overrides compose from; None where some of
    it is not in files (a `structured://` search path) or a search directory is missing."""
    args = with_config_dir_env(list(overrides), config_env)
    if any("structured://" in arg for arg in args):
        return None
    dirs, problem = config_dirs(args, CONF_DIR)
    if problem:
        return None
    return _digest(tuple(str(directory.resolve()) for directory in dirs))


@lru_cache(maxsize=32)
def _digest(dirs: tuple[str, ...]) -> str:
    """Hydra's and OmegaConf's versions, distil's own source and every YAML file of `dirs`, read once
    per process (a command does not edit its configs while it composes them)."""
    digest = hashlib.sha256(f"hydra {hydra.__version__} omegaconf {omegaconf.__version__}".encode())
    for root, pattern in [(PACKAGE_DIR, "*.py"), *((Path(d), "*.yaml") for d in dirs)]:
        for path in sorted(root.rglob(pattern)):
            digest.update(f"\0{path.relative_to(root)}\0".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:FINGERPRINT_LENGTH]


def _write(path: Path, config: dict) -> None:
    """Best effort: a store that cannot be written costs the next command the composition, nothing else."""
    try:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True)
            _drop_old(path.parent)
        write_atomic(path, json.dumps(config, sort_keys=True))
    except OSError:
        pass


def _drop_old(current: Path) -> None:
    """Keep the newest KEPT_FINGERPRINTS stores: each edit of a config file starts a new one."""
    others = sorted((p for p in current.parent.iterdir()
                     if p.is_dir() and p != current and FINGERPRINT.fullmatch(p.name)),
                    key=lambda p: p.stat().st_mtime, reverse=True)
    for old in others[KEPT_FINGERPRINTS - 1:]:
        shutil.rmtree(old, ignore_errors=True)
