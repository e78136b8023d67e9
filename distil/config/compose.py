"""The one composition outside Hydra's main: `distil`'s config from a list of overrides, without
running anything. Every command that needs a run's config (tables, data, pretrain, benches, the
papers' measurements) composes here, so a `DISTIL_CONFIG_DIR`, an unknown group or a typo in a
key reads the same everywhere."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Sequence
from functools import lru_cache

from hydra import compose, initialize_config_dir
from hydra._internal.config_loader_impl import ConfigLoaderImpl  # Hydra 1.3's own override step
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import DictConfig
from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

from distil.common.libraries import quiet_libraries
from distil.config.overrides import (
    CONFIG_DIR_ENV,
    check_key,
    check_overrides,
    config_dirs,
    replace_files_map,
    with_config_dir_env,
)
from distil.config.schema import CONF_DIR, check_config, register_configs
from distil.config.task_student import student_chosen, task_student
from distil.errors import DistilError, error_chain

OVERRIDE_FIX = "fix that override (distil --cfg job shows the composed config)"
FILE_FIX = "fix that file (distil --cfg job shows the composed config)"


class ComposeProblem(Exception):
    """Why overrides do not compose, without saying whose they are (the caller knows)."""


def compose_run_config(overrides: list[str]) -> DictConfig:
    """The config `distil` composes from these overrides, without running anything, every setting in
    its range (check_config): each command that composes a run's config checks what a run checks.
    Raises DistilError, one line as `distil` prints it."""
    overrides = with_config_dir_env(overrides, os.environ.get(CONFIG_DIR_ENV))
    problem = check_overrides(overrides, CONF_DIR)
    if problem:
        raise DistilError(problem)
    try:
        cfg = copy.deepcopy(composed(tuple(overrides)))  # a copy of the shared composition: it is changed below
        if chosen := task_student_override(cfg, overrides):
            overrides = [*overrides, *chosen]
            cfg = copy.deepcopy(composed(tuple(overrides)))
        replace_files_map(cfg, overrides)
        check_config(cfg)
    except (HydraException, OmegaConfBaseException) as error:
        raise DistilError(hydra_problem(error, overrides)) from error
    quiet_libraries()
    return cfg


def compose_overrides(overrides: Sequence[str], config_dirs: str | None) -> DictConfig:
    """The config `distil` composes from these overrides (composed: wu-table1's 48 cells compose
    their groups 24 times, ~0.2 s each; a copy ~0.01 s), checked as a run checks it. Raises
    ComposeProblem."""
    args = with_config_dir_env(list(overrides), config_dirs)
    problem = check_overrides(args, CONF_DIR)
    if problem:
        raise ComposeProblem(problem)
    try:
        cfg = _with_values(args)
        if chosen := task_student_override(cfg, args):
            cfg = _with_values([*args, *chosen])
        check_config(cfg)  # a cell out of range fails before any cell runs, as a run would
        return cfg
    except (HydraException, OmegaConfBaseException) as error:
        raise ComposeProblem(hydra_message(error)) from error
    except DistilError as error:
        raise ComposeProblem(str(error)) from error


def task_student_for(args: Sequence[str]) -> list[str]:
    """The overrides `distil` adds to `args` before Hydra composes them: [`student=<the task's default>`] or []
    (task_student_override). Raises what composing `args` raises."""
    return task_student_override(_with_values(args), args)


def task_student_override(cfg: DictConfig, args: Sequence[str]) -> list[str]:
    """[`student=<the task's default>`] for a config composed from `args` whose task has a default student
    that nothing in `args` chose; else []."""
    student = task_student(cfg.dataset)
    return [f"student={student}"] if student and not student_chosen(tuple(args)) else []


def _with_values(args: Sequence[str]) -> DictConfig:
    """A copy of the composition of `args` (composed), to change."""
    return copy.deepcopy(composed(tuple(args)))


def _is_value_override(arg: str) -> bool:
    """`a.b=1`, `+a.b=1`, `~a.b`: a dotted key is a value, never a config group (groups nest with `/`);
    `hydra.*` settings (the search path) change the groups themselves."""
    key = arg.lstrip("+~").partition("=")[0]
    return "." in key and "@" not in key and "/" not in key and not key.startswith("hydra.")


@lru_cache(maxsize=256)
def composed(args: tuple[str, ...]) -> DictConfig:
    """Hydra's composition of the main config with these overrides, cached: shared by every caller,
    so copy it before changing it. In two steps as Hydra itself takes them: the defaults list (the
    group overrides) is composed once per set of group choices, then the value overrides
    (`trainer.lr=...`) are applied to a copy with Hydra's own function. Configs that differ only in
    values (a learning rate picked on dev, a test's epochs) share one composition: the default
    suite composes 548 sets of groups where it asked for 857 configs."""
    groups = tuple(arg for arg in args if not _is_value_override(arg))
    values = [arg for arg in args if _is_value_override(arg)]
    if not values:
        return _composed_groups(groups)
    cfg = copy.deepcopy(_composed_groups(groups))
    ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(values), cfg)
    return cfg


@lru_cache(maxsize=256)
def _composed_groups(args: tuple[str, ...]) -> DictConfig:
    """Hydra's own composition (~0.2 s): the main config, its defaults list and these overrides."""
    register_configs()  # the schema (base_config) and resolvers the YAML names
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return compose(config_name="config", overrides=list(args))


def hydra_message(error: Exception) -> str:
    """Hydra's multi-line report (the error, then its cause's details) as one line: the unindented
    lines of the error and of its cause, without the `full_key:` / `object_type=` detail lines."""
    text = f"{error}\n{error.__cause__ or ''}"
    lines = [line.strip().rstrip(".") for line in text.splitlines() if line.strip() and not line[0].isspace()]
    return "; ".join(lines)


def hydra_problem(error: Exception, args: Sequence[str]) -> str:
    """The one line every command prints for a config Hydra cannot compose (after `distil: error: `):
    a DistilError raised inside the composition (a resolver's) as it is; a problem inside a config
    file (a user's own YAML) naming that file, with a did-you-mean for a misspelt key; else the
    override's problem."""
    own = _in_chain(error, DistilError)
    if own is not None:
        return str(own)
    text = str(error)
    where = re.match(r"In '([^']+)': (?:\w+ raised while composing config:)?\s*", text)
    if where is None or "override" in text.lower():
        return f"{hydra_message(error)}; {OVERRIDE_FIX}"
    missing = _in_chain(error, ConfigKeyError)
    problem = check_key(missing.full_key.split(".")) if missing is not None and missing.full_key else None
    if problem is None:
        inner = error.__class__(text[where.end():])
        inner.__cause__ = error.__cause__
        problem = hydra_message(inner)
    return f"{config_file(where.group(1), args)}: {problem}; {FILE_FIX}"


def config_file(name: str, args: Sequence[str]) -> str:
    """The YAML file Hydra names as `group/option` (the first of the searched directories holding it)."""
    dirs, _ = config_dirs(list(args), CONF_DIR)
    found = [directory / f"{name}.yaml" for directory in reversed(dirs) if (directory / f"{name}.yaml").is_file()]
    return str(found[0]) if found else f"{name}.yaml"


def _in_chain(error: BaseException | None, kind: type[BaseException]) -> BaseException | None:
    """The first exception of this kind among the error, its cause and their context."""
    return next((link for link in error_chain(error) if isinstance(link, kind)), None)
