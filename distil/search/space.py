"""The search space, define-by-run: a trial picks a student family, then that family's own parameters
(Optuna names them `<family>/<key>`, so each family's sizes are learnt apart), then the schedule,
transfer set, augmentation and serving backend. A trial's training choices become one table cell."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from distil.config.overrides import CONFIG_DIR_ENV
from distil.errors import DistilError
from distil.search.preset import DIMENSIONS, SearchPreset
from distil.tables.cells import RECORDED_RECIPE, cell_key, compose_cell
from distil.tables.preset import Cell

TRAINING = DIMENSIONS[1:-1]  # schedule, transfer_size, augment: overrides of the run; backend is how it serves


@dataclass(frozen=True)
class Choice:
    """What a trial tries: the overrides that train its student (base and seed left out) and its backend."""

    overrides: tuple[str, ...]
    backend: str

    @property
    def family(self) -> str:
        return self.overrides[0].partition("=")[2]


def suggest(trial, preset: SearchPreset) -> Choice:
    """The trial's choice, asked of Optuna one dimension at a time (a family's sizes only under it)."""
    family = next(f for f in preset.families
                  if f.name == trial.suggest_categorical("student", [f.name for f in preset.families]))
    overrides = [f"student={family.name}"]
    overrides += [f"{key}={trial.suggest_categorical(f'{family.name}/{key}', choices)}"
                  for key, choices in family.params.items()]
    overrides += family.overrides
    overrides += [f"{key}={trial.suggest_categorical(key, getattr(preset.space, key))}" for key in TRAINING
                  if getattr(preset.space, key)]
    return Choice(tuple(overrides), trial.suggest_categorical("backend", preset.space.backend))


def cell_of(preset: SearchPreset, overrides: tuple[str, ...] | list[str], row: str) -> Cell:
    """The table cell these overrides train: the recorded recipe, the base, them, the one seed; keyed by
    content, so a trial, a table and another search naming the same run share it."""
    full = [*RECORDED_RECIPE, *preset.base, *overrides, f"seed={preset.seed}"]
    return Cell(row=row, column=None, seed=preset.seed, overrides=full,
                key=cell_key(full, f"search preset {preset.name}, {row}"))


def reference_cell(preset: SearchPreset) -> Cell:
    return cell_of(preset, preset.reference, "reference")


def corners(preset: SearchPreset) -> Iterator[tuple[str, list[str]]]:
    """Every choice of the space once, the others at their first: composing these catches a bad value
    (an unknown schedule, a size the schema refuses) before any trial trains."""
    first = {key: getattr(preset.space, key)[0] for key in TRAINING if getattr(preset.space, key)}
    for family in preset.families:
        sizes = {key: choices[0] for key, choices in family.params.items()}
        variants = [("", sizes)] + [(f"{key}={value}", {**sizes, key: value})
                                    for key, choices in family.params.items() for value in choices[1:]]
        for _, params in variants:
            yield family.name, [f"student={family.name}", *(f"{k}={v}" for k, v in params.items()),
                                *family.overrides, *(f"{k}={v}" for k, v in first.items())]
    family = preset.families[0]
    head = [f"student={family.name}", *(f"{k}={c[0]}" for k, c in family.params.items()), *family.overrides]
    for key in TRAINING:
        for value in getattr(preset.space, key)[1:]:
            yield f"{key}={value}", [*head, *(f"{k}={value if k == key else v}" for k, v in first.items())]


def check_space(preset: SearchPreset) -> None:
    """Compose the reference and every corner of the space (cell_key raises one line on a bad one); every
    family must be a distil student (a peer, another tool's model, has no student folder to serve)."""
    reference_cell(preset)
    seen = set()
    for label, overrides in corners(preset):
        cell = cell_of(preset, overrides, f"space choice {label}")
        family = overrides[0].partition("=")[2]
        if family not in seen:
            seen.add(family)
            cfg = compose_cell(cell.overrides, os.environ.get(CONFIG_DIR_ENV), f"search preset {preset.name}")
            if cfg.student.kind == "peer":
                raise DistilError(f"search preset {preset.name}: space.student.{family} is a peer (another tool's "
                                  f"model, no distil student to export or serve); choose distil students")
