"""Run and sweep directories that no two runs share, even when started in the same second.

`hydra.run.dir` (and the default `hydra.sweep.dir`) are `${distil_unique_dir:<time-stamped path>}`:
the resolver creates the directory with an atomic `mkdir`, and if another run made it first it
takes `<path>_2`, `<path>_3`, ... Names stay readable and sort by start time (`23-09-00` <
`23-09-00_2` < `23-09-01`). OmegaConf caches the value per config (as Hydra's own `now`), and
Hydra copies that cache into every sweep cell's config, so one run resolves to one directory.
A directory given explicitly (hydra.run.dir=..., hydra.sweep.dir=...) is used as it is: a
sweep re-run into its own directory is how an interrupted sweep resumes (distil/run/sweep.py).
Under torchrun rank 0 creates the directory and the other ranks take its name.
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import OmegaConf

from distil.errors import DistilError

RESOLVER = "distil_unique_dir"
# The directories this process created: a sweep that fails to compose its cells removes the one it
# made empty (cli/run.py), instead of leaving an empty multirun directory behind.
CREATED: list[Path] = []


def unique_dir(base: str) -> str:
    """Create and return `base`, or the first `base_<n>` no other run has created. Raises DistilError
    where it cannot be created (the outputs folder read-only, or a file)."""
    path = Path(base)
    candidate, n = path, 1
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                os.mkdir(candidate)  # atomic: of two runs racing for a name exactly one gets it
                CREATED.append(candidate)
                return str(candidate)
            except FileExistsError:
                n += 1
                candidate = path.with_name(f"{path.name}_{n}")
    except OSError as error:
        raise DistilError(unwritable_outputs(error)) from error


def unwritable_outputs(error: OSError) -> str:
    """The one line for a run or sweep directory that cannot be created."""
    where = error.filename or "the outputs folder"
    return (f"cannot create the run directory {where}: {error.strerror or error}; set paths.outputs or "
            f"DISTIL_OUTPUTS (or the hydra.run.dir / hydra.sweep.dir given) to a writable directory")


def one_dir_for_every_rank(base: str) -> str:
    """`unique_dir(base)` chosen by rank 0 and told to the others: one run over several processes
    (torchrun) is one run directory. Every rank resolves it once, at the same point of Hydra's start."""
    from distil.common import distributed

    return distributed.broadcast(unique_dir(base) if distributed.is_main() else None)


def register_run_dir_resolver() -> None:
    OmegaConf.register_new_resolver(RESOLVER, one_dir_for_every_rank, use_cache=True, replace=True)
