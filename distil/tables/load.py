"""Table presets from YAML: `load_preset(name or path)` and `presets()` (every one we ship).

A preset is found by name in `distil/conf/table/` and in the `table/` directory of every
DISTIL_CONFIG_DIR entry (a user's own tables, searched first), or read from a path to its file.
Everything a typo can break is checked here, before any cell runs: one line says what and how to fix.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from distil.config.overrides import CONFIG_DIR_ENV
from distil.errors import DistilError, check_choice, unknown_choice
from distil.tables.preset import (
    BENCHES,
    COMPARES,
    FORMATS,
    KINDS,
    READS,
    RELATIONS,
    ROWS_FROM,
    SCALES,
    SETS,
    Axis,
    Finding,
    TablePreset,
)

PRESET_DIR = Path(__file__).resolve().parent.parent / "conf" / "table"
# a preset file's first line states what its cpu scale costs: the budget of `make tables` is the sum
CPU_ESTIMATE = re.compile(r"# cpu scale: (~\d+ minutes?(?: extra)?)")
AXES = ("rows", "columns")  # built here, not by OmegaConf: their overrides are a list or a per-scale map


def preset_dirs(group: str = "table", ours: Path = PRESET_DIR) -> list[Path]:
    """Where presets are looked up by name: the user's DISTIL_CONFIG_DIR `<group>/` folders first, then
    ours (`group`: table, or search for distil search's presets in `ours`)."""
    user = [Path(d) / group for d in os.environ.get(CONFIG_DIR_ENV, "").split(os.pathsep) if d]
    return [*user, ours]


def preset_files(group: str = "table", ours: Path = PRESET_DIR) -> dict[str, Path]:
    """name -> file of every preset found by name (an earlier directory wins)."""
    files: dict[str, Path] = {}
    for directory in reversed(preset_dirs(group, ours)):
        files.update({path.stem: path for path in directory.glob("*.yaml")})
    return dict(sorted(files.items()))


def presets() -> list[TablePreset]:
    return [load_preset(path) for path in preset_files().values()]


def load_preset(path_or_name: str | Path) -> TablePreset:
    path = preset_path(path_or_name)
    try:
        data = OmegaConf.to_container(OmegaConf.load(path))
    except (OSError, ValueError, yaml.YAMLError) as error:
        raise DistilError(f"table preset {path}: cannot read it ({_first_line(error)}); fix the file") from error
    if not isinstance(data, dict):
        raise DistilError(f"table preset {path}: expected a mapping of fields (name, paper, rows, ...); fix the file")
    preset = _structured(data, path)
    check_preset(preset, path)
    return preset


def cpu_estimate(path_or_name: str | Path) -> str | None:
    """What a preset's first line estimates for its cpu scale ("~25 minutes extra"), or None where it
    states nothing. A comment, not a field: the file says it once, for the reader and for `--status`."""
    with preset_path(path_or_name).open() as file:
        estimate = CPU_ESTIMATE.match(file.readline())
    return estimate.group(1) if estimate else None


def preset_path(path_or_name: str | Path) -> Path:
    path = Path(path_or_name)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise DistilError(f"table preset file {path} does not exist; give an existing file or a preset name")
        return path
    files = preset_files()
    if str(path_or_name) not in files:
        raise DistilError(unknown_choice("table preset", path_or_name, files or ["(none)"],
                                         more=" (distil table --list describes them)"))
    return files[str(path_or_name)]


def _structured(data: dict, path: Path) -> TablePreset:
    """The YAML merged into the TablePreset dataclass (unknown keys and wrong types are errors)."""
    data.setdefault("name", path.stem)
    axes = {axis: data.pop(axis, None) or [] for axis in AXES}
    try:
        preset = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TablePreset), data))
    except OmegaConfBaseException as error:
        where = f" (at {error.full_key})" if getattr(error, "full_key", None) else ""
        raise DistilError(f"table preset {path}: {_first_line(error)}{where}; fix the file") from error
    for axis, entries in axes.items():
        setattr(preset, axis, [_axis(entry, f"{path}: {axis}[{i}]") for i, entry in enumerate(entries)])
    return preset


def _axis(entry: Any, where: str) -> Axis:
    if not isinstance(entry, dict) or not isinstance(entry.get("label"), str) or set(entry) - AXIS_FIELDS:
        raise DistilError(f"table preset {where} must be {{label: <text>, overrides: [...]}} (a sweep's column may "
                          f"add value: <metrics.json path>, format: <format>); fix the file")
    if entry.get("format") is not None:
        check_choice("format", entry["format"], FORMATS, where=f"table preset {where}")
    check_choice("reads", entry.get("reads", "student"), READS, where=f"table preset {where}")
    overrides = entry.get("overrides") or []
    per_scale = overrides.values() if isinstance(overrides, dict) else [overrides]
    if isinstance(overrides, dict) and set(overrides) - set(SCALES):
        raise DistilError(f"table preset {where} has overrides for unknown scale(s) "
                          f"{', '.join(sorted(set(overrides) - set(SCALES)))}; choose from: {', '.join(SCALES)}")
    if not all(isinstance(values, list) and all(isinstance(v, str) for v in values) for values in per_scale):
        raise DistilError(f"table preset {where}: overrides must be a list of key=value strings, or "
                          f"{{cpu: [...], paper: [...]}}; fix the file")
    return Axis(label=entry["label"], overrides=overrides, value=entry.get("value"), format=entry.get("format"),
                reads=entry.get("reads", "student"))


def check_preset(preset: TablePreset, source: Path | str) -> None:
    """The choices a preset makes, and the sweep it describes, are ones the runner knows."""
    where = f"table preset {source}"
    check_choice("kind", preset.kind, KINDS, where=where)
    check_choice("format", preset.format, FORMATS, where=where)
    check_choice("rows_from", preset.rows_from, ROWS_FROM, where=where)
    check_choice("set", preset.set, SETS, where=where)
    check_choice("bench", preset.bench, tuple(BENCHES), where=where)
    check_choice("compare", preset.compare, COMPARES, where=where)
    if preset.compare is not None and preset.kind != "sweep":
        raise DistilError(f"{where}: compare ranks the runs of a sweep; a {preset.kind} table has none: remove it")
    for scale in preset.scales:
        check_choice("scale", scale, SCALES, where=where)
    if preset.name != Path(source).stem:
        raise DistilError(f"{where} says name: {preset.name}; a preset's name is its file name "
                          f"({Path(source).stem}): rename one of them")
    if preset.kind == "sweep":
        _check_sweep(preset, where)
    if preset.select is not None:
        _check_select(preset, where)
    _check_paper_values(preset, where)
    _check_cells(preset, where, "empty", preset.empty)  # a typo in `empty` would hide a number
    for i, finding in enumerate(preset.findings):
        _check_finding(preset, finding, f"{where}: findings[{i}]")


def _check_select(preset: TablePreset, where: str) -> None:
    """select: {over: [key=value, ...], by: student.dev.<metric>}: options, and the dev score to pick by."""
    select = preset.select
    over, by = select.get("over"), select.get("by")
    if preset.kind != "sweep" or set(select) != {"over", "by"} or not over or not isinstance(over, list):
        raise DistilError(f"{where}: select takes {{over: [key=value, ...], by: student.dev.<metric>}} in a sweep; "
                          f"fix the preset")
    if not all(isinstance(o, str) and "=" in o for o in over):
        raise DistilError(f"{where}: select.over lists overrides (key=value), got {over}; fix the preset")
    if not (isinstance(by, str) and by.split(".")[1:2] == ["dev"]):
        raise DistilError(f"{where}: select.by must be a dev score (e.g. student.dev.accuracy), not '{by}': "
                          f"test sets are only reported; fix the preset")


def _check_finding(preset: TablePreset, finding: Finding, where: str) -> None:
    """A finding names two rows or two columns of a sweep, reads them in groups the table has, and
    says what its scales lack in scales it has."""
    if preset.kind != "sweep":
        raise DistilError(f"{where}: a finding compares the runs of a sweep; a {preset.kind} table has none: remove it")
    check_choice("relation", finding.relation, RELATIONS, where=where)
    rows, columns = [r.label for r in preset.rows], [c.label for c in preset.columns]
    pair = {finding.better, finding.worse}
    if len(pair) != 2 or not (pair <= set(rows) or pair <= set(columns)):
        raise DistilError(f"{where}: better and worse must name two rows or two columns of the table "
                          f"(rows: {', '.join(rows)}; columns: {', '.join(columns) or 'none'}); fix the preset")
    groups = columns if pair <= set(rows) else rows
    unknown = [g for g in finding.groups or [] if g not in groups and not (preset.rows_from and pair <= set(columns))]
    if unknown:
        raise DistilError(f"{where}: groups names '{unknown[0]}', which is not one of {', '.join(groups)}; "
                          f"fix the preset")
    if finding.probe is not None and finding.probe not in preset_files():
        raise DistilError(f"{where}: probe names table '{finding.probe}', which is not a preset "
                          f"(distil table --list); fix the preset")
    for name, by_scale in (("not_comparable", finding.not_comparable), ("explanation", finding.explanation)):
        scales = [s for s in by_scale if s not in SCALES]
        if scales:
            raise DistilError(f"{where}: {name} names scale '{scales[0]}'; choose from: {', '.join(SCALES)}")
    if finding.margin < 0 or (finding.margin and finding.relation != ">="):
        raise DistilError(f"{where}: margin {finding.margin} is how far below `worse` still reaches it: "
                          f"0 or more, and only with relation: '>='; fix the preset")


AXIS_FIELDS = {"label", "overrides", "value", "format", "reads"}


def _check_sweep(preset: TablePreset, where: str) -> None:
    """A sweep runs something: a scale, seeds, and rows (or a run per column whose stages/languages are rows)."""
    if not preset.scales:
        raise DistilError(f"{where}: a sweep needs scales, e.g. scales: {{cpu: {{base: [...], seeds: [1]}}}}")
    if not preset.rows and preset.rows_from is None:
        raise DistilError(f"{where}: a sweep needs rows: [{{label: ..., overrides: [...]}}] (or rows_from)")
    if preset.rows_from is not None and any(c.value or c.format for c in preset.columns):
        raise DistilError(f"{where}: columns with their own value or format need one row per run; "
                          f"rows_from: {preset.rows_from} reads each run's {preset.rows_from} as rows")
    for name, scale in preset.scales.items():
        if not scale.seeds:
            raise DistilError(f"{where}: scale {name} has no seeds; give at least one, e.g. seeds: [1]")


def _check_paper_values(preset: TablePreset, where: str) -> None:
    """Every published number belongs to a row (and column) of ours, so none is silently dropped.
    Rows taken from the runs (rows_from) are only known once they have run."""
    _check_cells(preset, where, "paper_values", preset.paper_values, rows_known=preset.rows_from is None)


def _check_cells(preset: TablePreset, where: str, name: str, cells: dict, rows_known: bool = True) -> None:
    """`name` maps rows to a number or to columns: each row and column it names is one of the table's."""
    rows = [row.label for row in preset.rows]
    columns = [column.label for column in preset.columns]
    for row, value in cells.items():
        if rows_known and row not in rows:
            raise DistilError(f"{where}: {name} names row '{row}', which is not a row; rows are: {', '.join(rows)}")
        if isinstance(value, dict | list) and columns:
            unknown = [column for column in value if column not in columns]
            if unknown:
                raise DistilError(f"{where}: {name}[{row}] names column '{unknown[0]}', which is not a "
                                  f"column; columns are: {', '.join(columns)}")


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0].rstrip(".") if str(error).strip() else type(error).__name__
