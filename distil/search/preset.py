"""A search preset as data: `distil/conf/search/<name>.yaml` (or a user's DISTIL_CONFIG_DIR `search/`).

    name: sst2                           # the file name without .yaml
    description: ...                     # one line: what the search is for
    base: [+experiment=sst2-low, teacher=minilm]   # every trial's overrides start with these
    seed: 1                              # every trial trains at this one seed: one run per trial, no
                                         # spread over seeds (a trial's score is one run's)
    reference: [student=bilstm]          # the student every latency is measured against (a cell too)
    trials: 40                           # how many trials end (finished or pruned) before the report
    sampler: tpe                         # tpe (multi-objective TPE) | nsga2 (NSGA-II), seeded with `seed`
    latency: single_ms                   # single_ms (one text per call) | batch32_ms (ms per text, 32 a call)
    limits: {max_latency_ms: 1.0, max_size_mb: 10.0}   # null: no limit; both checked before training
    threads: 2                           # torch / ONNX Runtime threads while timing
    frontier: frontier-sst2              # the hand-made frontier table of the same teacher the results page
                                         # compares the Pareto set with (optional; not part of the study)
    space:
      student:                           # family (a student YAML) -> its own parameters (define-by-run)
        static: {student.embedding_dim: [64, 128, 256], student.mlp_hidden_size: [0, 256]}
        transformer: {student.num_layers: [2, 4], student.hidden_size: [128, 256],
                      overrides: [trainer.lr=1.0e-4]}   # fixed overrides of that family, not searched
      schedule: [d1, soft]
      transfer_size: [20k]
      augment: [none, tang]
      backend: [eager, onnx, onnx-int8] # how the student is served: timed and scored in that form
    # a dimension left out is not searched: the base's (backend: eager)

Everything a typo can break is checked here, before any trial: one line says what and how to fix.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from distil.errors import DistilError, check_choice, unknown_choice
from distil.tables.load import preset_files

PRESET_DIR = Path(__file__).resolve().parent.parent / "conf" / "search"
SAMPLERS = ("tpe", "nsga2")
LATENCIES = ("single_ms", "batch32_ms")
# latency objective -> the timing field whose per-pass seconds it reads (distil.tables.timing: same texts for every
# model, so two models' per-pass seconds divide into a ratio)
TIMING_FIELDS = {"single_ms": "single_ms", "batch32_ms": "batch32_ex_per_s"}
BACKENDS = ("eager", "onnx", "onnx-int8")
DIMENSIONS = ("student", "schedule", "transfer_size", "augment", "backend")  # the space's keys, in suggest order
FIXED = "overrides"  # a family's fixed overrides inside its parameters
FIELDS = {"name", "description", "base", "seed", "reference", "trials", "sampler", "latency", "limits", "threads",
          "space", "frontier"}
# what changes no trial (its result, or whether it is pruned): not part of the study's name
NOT_STUDIED = ("trials", "frontier")
LIMITS = ("max_latency_ms", "max_size_mb")


@dataclass
class Family:
    """One student family of the space: its YAML (student=<name>), its searched parameters (override key
    -> choices) and its fixed overrides."""

    name: str
    params: dict[str, list]
    overrides: list[str] = field(default_factory=list)


@dataclass
class Space:
    """What a trial chooses. `student`: family -> {override key: choices, overrides: [fixed ones]}; the
    other dimensions are lists of choices, and one left empty is not searched (the base's)."""

    student: dict[str, dict[str, list]] = field(default_factory=dict)
    schedule: list[str] = field(default_factory=list)
    transfer_size: list[str] = field(default_factory=list)
    augment: list[str] = field(default_factory=list)
    backend: list[str] = field(default_factory=lambda: ["eager"])

    @property
    def families(self) -> list[Family]:
        return [Family(name, {k: v for k, v in params.items() if k != FIXED}, list(params.get(FIXED, [])))
                for name, params in self.student.items()]


@dataclass
class SearchPreset:
    """A search preset (distil/conf/search/<name>.yaml): the base every trial starts from, the one seed
    its runs train at, the reference student latencies are measured against, the space, the latency
    objective and the limits."""

    name: str
    description: str = ""
    base: list[str] = field(default_factory=list)
    seed: int = 1
    reference: list[str] = field(default_factory=list)
    trials: int = 20
    sampler: str = "tpe"
    latency: str = "single_ms"
    limits: dict[str, float | None] = field(default_factory=lambda: dict.fromkeys(LIMITS))
    threads: int = 2
    space: Space = field(default_factory=Space)
    frontier: str | None = None  # the table preset of the same teacher its results page compares with

    def digest(self) -> str:
        """What names its study: every field that changes a trial's result or whether it is pruned, not
        how many trials run (`--trials` extends a search), nor the table its results page compares with."""
        content = {k: v for k, v in asdict(self).items() if k not in NOT_STUDIED}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def study_name(self) -> str:
        return f"{self.name}-{self.digest()}"

    @property
    def families(self) -> list[Family]:
        return self.space.families


def median_ms(timing: dict, latency: str) -> float:
    """A timing row's (time_models', or a cell's timing.json) latency objective in ms per text."""
    return timing["single_ms"] if latency == "single_ms" else 1000 / timing["batch32_ex_per_s"]


def load_search(name_or_path: str, limits: dict[str, float | None] | None = None,
                trials: int | None = None) -> SearchPreset:
    """The preset by name or file, with the command line's limits and trial count over its own."""
    path = Path(name_or_path)
    if path.suffix not in (".yaml", ".yml"):
        files = preset_files("search", PRESET_DIR)
        if name_or_path not in files:
            raise DistilError(unknown_choice("search preset", name_or_path, files or ["(none)"],
                                             more=" (or give a preset file)"))
        path = files[name_or_path]
    elif not path.is_file():
        raise DistilError(f"search preset file {path} does not exist; give an existing file or a preset name")
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise DistilError(f"search preset {path}: cannot read it ({str(error).splitlines()[0]}); fix the file") \
            from error
    if not isinstance(data, dict):
        raise DistilError(f"search preset {path}: expected a mapping of fields ({', '.join(sorted(FIELDS))}); "
                          f"fix the file")
    data.setdefault("name", path.stem)
    preset = _structured(data, f"search preset {path}")
    preset.limits.update({key: value for key, value in (limits or {}).items() if value is not None})
    if trials is not None:
        preset.trials = trials
    return preset


def _structured(data: dict, where: str) -> SearchPreset:
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise DistilError(unknown_choice("field", unknown[0], sorted(FIELDS), where))
    space = _mapping(data.get("space"), f"{where}: space")
    if extra := sorted(set(space) - set(DIMENSIONS)):
        raise DistilError(unknown_choice("space dimension", extra[0], DIMENSIONS, where))
    limits = _mapping(data.get("limits") or {}, f"{where}: limits")
    if extra := sorted(set(limits) - set(LIMITS)):
        raise DistilError(unknown_choice("limit", extra[0], LIMITS, where))
    for key in LIMITS:
        check_limit(key, limits.get(key), where)
    preset = SearchPreset(
        name=str(data["name"]), description=str(data.get("description", "")),
        base=_strings(data.get("base", []), f"{where}: base"), seed=_count(data.get("seed", 1), "seed", where, 0),
        reference=_strings(data.get("reference"), f"{where}: reference"),
        trials=_count(data.get("trials", 20), "trials", where, 1), sampler=str(data.get("sampler", "tpe")),
        latency=str(data.get("latency", "single_ms")), limits={key: limits.get(key) for key in LIMITS},
        threads=_count(data.get("threads", 2), "threads", where, 1), frontier=_frontier(data.get("frontier"), where),
        space=Space(student=_families(space.get("student"), f"{where}: space.student"),
                    **{key: _choices(space[key], f"{where}: space.{key}") for key in DIMENSIONS[1:] if key in space}))
    check_choice("sampler", preset.sampler, SAMPLERS, where)
    check_choice("latency", preset.latency, LATENCIES, where)
    for backend in preset.space.backend:
        check_choice("backend", backend, BACKENDS, f"{where}: space.backend")
    if not preset.reference:
        raise DistilError(f"{where}: reference is empty; name the student every latency is measured against, "
                          f"e.g. reference: [student=bilstm]")
    return preset


def check_limit(key: str, value, where: str) -> None:
    """A limit is a positive number of milliseconds or megabytes, or null (no limit)."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise DistilError(f"{where}: {key} {value!r} is not a positive number; give one (e.g. {key}: 1.0) or null "
                          f"for no limit")


def _mapping(value, where: str) -> dict:
    if not isinstance(value, dict) or not value:
        raise DistilError(f"{where} must be a mapping; fix the file (see `distil search --help`)")
    return value


def _strings(value, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise DistilError(f"{where} must be a list of key=value overrides; fix the file")
    return list(value)


def _frontier(value, where: str) -> str | None:
    """A frontier table preset's name (frontier-*, as the results pages find them), checked before any trial:
    a typo found only by the results page would come after the search's hours."""
    if value is not None:
        check_choice("frontier table", value, [name for name in preset_files() if name.startswith("frontier-")], where,
                     more=" (or leave frontier out)")
    return value


def _count(value, key: str, where: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise DistilError(f"{where}: {key} {value!r} must be a whole number, {low} or more; fix the file")
    return value


def _choices(value, where: str) -> list:
    if not isinstance(value, list) or not value or not all(isinstance(v, (str, int, float)) for v in value):
        raise DistilError(f"{where} must be a non-empty list of choices; fix the file")
    return list(value)


def _families(value, where: str) -> dict[str, dict[str, list]]:
    families = {}
    for name, params in _mapping(value, where).items():
        params = dict(params or {})
        fixed = _strings(params.pop(FIXED, []), f"{where}.{name}.{FIXED}")
        families[str(name)] = {**{key: _choices(choices, f"{where}.{name}.{key}") for key, choices in params.items()},
                               **({FIXED: fixed} if fixed else {})}
    return families
