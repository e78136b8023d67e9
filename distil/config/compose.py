"""The one composition outside Hydra's main: `distil`'s config from a list of overrides, without
running anything. Every command that needs a run's config (tables, data, pretrain, benches, the
papers' measurements) composes here, so a `DISTIL_CONFIG_DIR`, an unknown group or a typo in a
key reads the same everywhere."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from functools import lru_cache

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl  # Hydra 1.3's own override step
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from distil.common.libraries import quiet_libraries
from distil.config.overrides import CONFIG_DIR_ENV, check_overrides, replace_files_map, with_config_dir_env
from distil.config.schema import CONF_DIR, register_configs
from distil.errors import DistilError


class ComposeProblem(Exception):
    """Why overrides do not compose, without saying whose they are (the caller knows)."""


def compose_run_config(overrides: list[str]) -> DictConfig:
    """The config `distil` composes from these overrides, without running anything. Raises DistilError."""
    overrides = with_config_dir_env(overrides, os.environ.get(CONFIG_DIR_ENV))
    problem = check_overrides(overrides, CONF_DIR)
    if problem:
        raise DistilError(problem)
    cfg = copy.deepcopy(composed(tuple(overrides)))  # a copy of the shared composition: it is changed below
    replace_files_map(cfg, overrides)
    quiet_libraries()
    return cfg


def compose_overrides(overrides: Sequence[str], config_dirs: str | None) -> DictConfig:
    """Hydra's composition, in two steps as Hydra itself takes them: the defaults list (groups) is
    composed once per set of group choices, then the value overrides (`trainer.lr=...`) are
    applied to a copy with Hydra's own function. Configs that differ only in values (a learning rate
    picked on dev) share one composition: wu-table1's 48 cells compose 24 times (~0.2 s each; a copy
    ~0.01 s). Raises ComposeProblem."""
    args = with_config_dir_env(list(overrides), config_dirs)
    problem = check_overrides(args, CONF_DIR)
    if problem:
        raise ComposeProblem(problem)
    groups = [arg for arg in args if not _is_value_override(arg)]
    values = [arg for arg in args if _is_value_override(arg)]
    try:
        cfg = copy.deepcopy(composed(tuple(groups)))
        ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(values), cfg)
        return cfg
    except (HydraException, OmegaConfBaseException) as error:
        raise ComposeProblem(hydra_message(error)) from error


def _is_value_override(arg: str) -> bool:
    """`a.b=1`, `+a.b=1`, `~a.b`: a dotted key is a value, never a config group (groups nest with `/`);
    `hydra.*` settings (the search path) change the groups themselves."""
    key = arg.lstrip("+~").partition("=")[0]
    return "." in key and "@" not in key and "/" not in key and not key.startswith("hydra.")


@lru_cache(maxsize=256)
def composed(args: tuple[str, ...]) -> DictConfig:
    """Hydra's composition of the main config with these overrides, cached: shared by every caller,
    so copy it before changing it."""
    register_configs()  # the schema (base_config) and resolvers the YAML names
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(args))


def hydra_message(error: Exception) -> str:
    """Hydra's multi-line report (the error, then its cause's details) as one line: the unindented
    lines of the error and of its cause, without the `full_key:` / `object_type=` detail lines."""
    text = f"{error}\n{error.__cause__ or ''}"
    lines = [line.strip().rstrip(".") for line in text.splitlines() if line.strip() and not line[0].isspace()]
    return "; ".join(lines)
