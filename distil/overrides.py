"""Check command-line overrides before Hydra runs, so mistakes cost one clear line.

Hydra already rejects unknown group options; this adds the list of valid choices and
names the valid keys when a key is misspelt (OmegaConf's own error does not).
"""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep

from distil.config import Config


def group_options(conf_dir: Path, group: str) -> list[str]:
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def check_overrides(args: list[str], conf_dir: Path) -> str | None:
    """The first problem in the command-line overrides, or None."""
    candidates = [a for a in args if "=" in a and not a.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(candidates)
    except Exception:  # a grammar error: Hydra reports it in full
        return None
    groups = {p.name for p in conf_dir.iterdir() if p.is_dir()}
    for override in overrides:
        key = override.key_or_group
        if override.is_delete() or override.is_add() or key.startswith("hydra"):
            continue
        if key in groups:
            value = override.value()
            values = value.list if isinstance(value, ChoiceSweep) else [value]
            options = group_options(conf_dir, key)
            for option in values:
                if str(option) not in options:
                    return f"unknown {key} '{option}'; choose one of: {', '.join(options)}"
        else:
            problem = _check_key(key.split("."))
            if problem:
                return problem
    return None


def _check_key(parts: list[str]) -> str | None:
    node: typing.Any = Config
    for depth, part in enumerate(parts):
        origin = typing.get_origin(node)
        if origin in (list, list) or origin is dict:
            return None  # list items and free-form maps (e.g. stage losses) are not checked here
        if origin is typing.Union:  # Optional[X]
            node = next(a for a in typing.get_args(node) if a is not type(None))
        if not dataclasses.is_dataclass(node):
            return None
        hints = typing.get_type_hints(node)
        if part not in hints:
            where = ".".join(parts[:depth]) or "the top level"
            return (f"unknown key '{'.'.join(parts)}': {where} has no '{part}'; "
                    f"valid keys: {', '.join(hints)}")
        node = hints[part]
    return None
