"""Check command-line overrides before Hydra runs, so mistakes cost one clear line.

Hydra already rejects unknown group options; this adds the list of valid choices and
names the valid keys when a key is misspelt (OmegaConf's own error does not). Options
come from every directory Hydra searches: the package's conf/, `hydra.searchpath=[...]`,
`--config-dir`/`-cd`, and DISTIL_CONFIG_DIR (which `with_config_dir_env` turns into a
search-path entry), so a user's own dataset, schedule or experiment YAML works by name.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import typing
from collections.abc import Iterable
from pathlib import Path

from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Override
from omegaconf import DictConfig

from distil.config.schema import Config
from distil.errors import did_you_mean, unknown_choice

CONFIG_DIR_ENV = "DISTIL_CONFIG_DIR"  # os.pathsep-separated directories of the user's own YAML
SEARCHPATH = "hydra.searchpath"
CONFIG_DIR_FLAGS = ("--config-dir", "-cd")
# Hydra's flags that take a value: that value is not an override.
VALUE_FLAGS = (*CONFIG_DIR_FLAGS, "--config-path", "-cp", "--config-name", "-cn", "--package", "-p",
               "--experimental-rerun")


def group_options(conf_dirs: Path | Iterable[Path], group: str) -> list[str]:
    dirs = [conf_dirs] if isinstance(conf_dirs, Path) else conf_dirs
    return sorted({p.stem for d in dirs for p in (d / group).glob("*.yaml")})


def with_config_dir_env(args: list[str], value: str | None) -> list[str]:
    """`args` with DISTIL_CONFIG_DIR's directories appended to hydra.searchpath.

    Hydra reads only the first hydra.searchpath override, so a user's own one is merged
    with these into a single override rather than added beside it.
    """
    extra = [f"file://{Path(d).resolve()}" for d in (value or "").split(os.pathsep) if d]
    if not extra:
        return args
    given, rest = [], []
    for arg in args:
        override = _parse(arg) if arg.startswith(SEARCHPATH) else None
        if override is not None and override.key_or_group == SEARCHPATH:
            given = list(override.value())
        else:
            rest.append(arg)
    entries = ", ".join("'" + entry.replace("'", "\\'") + "'" for entry in [*given, *extra])
    return [*rest, f"{SEARCHPATH}=[{entries}]"]


def config_dirs(args: list[str], conf_dir: Path) -> tuple[list[Path], str | None]:
    """(every config directory Hydra will search, the first problem with one of them or None)."""
    dirs, sources = [conf_dir], []
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag in CONFIG_DIR_FLAGS:
            value = value if eq else (args[i + 1] if i + 1 < len(args) else "")
            sources.append((value, flag))
    for override in _parse_all(_override_args(args)):
        if override.key_or_group == SEARCHPATH and isinstance(override.value(), list):
            sources += [(str(entry), SEARCHPATH) for entry in override.value()]
    for entry, origin in sources:
        directory = _search_dir(entry)
        if directory is None:
            continue  # another scheme (structured://): no files to list
        if not directory.is_dir():
            return dirs, f"config directory {entry} (from {origin}) does not exist"
        dirs.append(directory)
    return dirs, None


def check_overrides(args: list[str], conf_dir: Path) -> str | None:
    """The first problem in the command-line overrides, or None."""
    dirs, problem = config_dirs(args, conf_dir)
    if problem:
        return problem
    overrides = _parse_all(_override_args(args))
    # nested groups too: `teacher/finetune=tang` picks the teacher's fine-tuning recipe
    groups = {p.relative_to(d).as_posix() for d in dirs for p in d.rglob("*") if p.is_dir()}
    for override in overrides:
        key = override.key_or_group
        if override.is_delete() or key.startswith("hydra"):
            continue
        if key in groups:  # `dataset=x`, and presets added with `+experiment=x`
            value = override.value()
            values = value.list if isinstance(value, ChoiceSweep) else [value]
            options = group_options(dirs, key)
            for option in values:
                if str(option) not in options:
                    return unknown_choice(key, option, options)
        else:  # `+key=v` too: it may add to a free-form map (dataset.files, schedule.weights), not to the schema
            problem = check_key(key.split("."))
            if problem:
                return problem
    return None


def replace_files_map(cfg: DictConfig, overrides: list[str]) -> None:
    """A `dataset.files={...}` override replaces the chosen dataset's map instead of merging.

    Hydra merges it, so `dataset=mrpc dataset.files={train: a.tsv, test: b.tsv}` would
    silently keep mrpc's dev file; a user who writes the whole map means the whole map.
    """
    for override in _parse_all(overrides):
        if override.key_or_group == "dataset.files" and isinstance(override.value(), dict):
            cfg.dataset.files = override.value()


def _override_args(args: list[str]) -> list[str]:
    """The key=value arguments, without Hydra's flags and their values."""
    return [a for i, a in enumerate(args)
            if "=" in a and not a.startswith("-") and (i == 0 or args[i - 1] not in VALUE_FLAGS)]


def _parse(arg: str) -> Override | None:
    parsed = _parse_all([arg])
    return parsed[0] if parsed else None


def _parse_all(args: list[str]) -> list[Override]:
    try:
        return OverridesParser.create().parse_overrides(args)
    except Exception:  # a grammar error: Hydra reports it in full
        return []


def _search_dir(entry: str) -> Path | None:
    """The directory of a search-path entry: `file://dir`, `pkg://module`, or a bare path."""
    scheme, sep, rest = entry.partition("://")
    if not sep:
        return Path(entry)
    if scheme == "file":
        return Path(rest)
    if scheme == "pkg":
        try:
            spec = importlib.util.find_spec(rest.replace("/", "."))
        except ModuleNotFoundError:  # its parent package is missing
            spec = None
        locations = spec.submodule_search_locations if spec else None
        return Path(list(locations)[0]) if locations else Path(entry)  # Path(entry) is no directory
    return None


def check_key(parts: list[str]) -> str | None:
    """"unknown key ..." (with a did-you-mean and the valid keys) for a dotted key the schema lacks, else None."""
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
            return (f"unknown key '{'.'.join(parts)}': {where} has no '{part}'{did_you_mean(part, hints)}; "
                    f"valid keys: {', '.join(hints)}")
        node = hints[part]
    return None
