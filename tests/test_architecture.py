"""The folders are the architecture: an import only ever points down (README, Architecture).

Every import is read from the source (function-local ones too), nothing is imported. Layers, bottom
to top, each folder with its floor; a module may import its own folder or a lower floor only:

  ground   errors, common, config, store, training     know nothing of the papers' domain
  domain   data, tasks, then teacher, students, augment, then pretrain
  above    peers, serve (a saved student: needs no training code), then run (one run)
  wings    bench, then papers and tables, then search    sit on top; nothing below imports them
           (search: trials are tables' cells)
  cli      the `distil` command                          nothing imports it
           (and distil/__main__.py, `python -m distil`: an entry point like the console script)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "distil"

FLOORS = {
    "errors": 0, "common": 1, "config": 2, "store": 3, "training": 4,
    "data": 5, "tasks": 6, "teacher": 7, "students": 7, "augment": 7, "pretrain": 8,
    "peers": 9, "serve": 9, "run": 10,
    "bench": 11, "papers": 12, "tables": 12, "search": 13,
    "cli": 14,
}
GROUND = ("errors", "common", "config", "store", "training")
DOMAIN = ("data", "tasks", "teacher", "students", "augment", "pretrain")
# what serving a saved student must never load: the loops and everything that trains
TRAINING_CODE = ("distil.training.loop", "distil.training.checkpoint", "distil.run", "distil.pretrain",
                 "distil.augment", "distil.teacher.finetune", "distil.teacher.cache", "distil.peers.train")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """Every distil module `path` names in an import, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from distil.x import y`: y may be a module of package distil.x
            names |= {node.module, *(f"{node.module}.{alias.name}" for alias in node.names)}
    return {name for name in names if name == "distil" or name.startswith("distil.")}


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}
IMPORTS = {name: {target for target in imports_of(path) if target in MODULES} for name, path in MODULES.items()}


ENTRY_POINTS = {"distil.__main__": "cli"}  # `python -m distil` (and torchrun -m distil) is the command


def folder(module: str) -> str | None:
    """The top-level folder (or root module) a module belongs to; None for the package itself."""
    if module in ENTRY_POINTS:
        return ENTRY_POINTS[module]
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def edges():
    for source, targets in IMPORTS.items():
        for target in sorted(targets):
            yield source, target


def test_every_folder_has_a_floor():
    assert {folder(m) for m in MODULES} - {None} <= set(FLOORS), "give a new folder its floor in FLOORS"


def test_the_package_root_holds_only_folders_init_and_errors():
    loose = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]


def test_no_import_points_up():
    """Covers: the ground imports nothing above it, a domain folder imports no run, wing or cli,
    and nothing imports cli."""
    upward = [f"{source} -> {target}" for source, target in edges()
              if folder(source) and folder(target) and folder(source) != folder(target)
              and FLOORS[folder(target)] >= FLOORS[folder(source)]]
    assert upward == []


def test_nothing_outside_cli_imports_cli():
    assert [f"{s} -> {t}" for s, t in edges() if folder(t) == "cli" and folder(s) != "cli"] == []


@pytest.mark.parametrize("layer,allowed", [(GROUND, GROUND), (DOMAIN, GROUND + DOMAIN)])
def test_a_layer_imports_only_itself_and_below(layer, allowed):
    assert [f"{s} -> {t}" for s, t in edges() if folder(s) in layer and folder(t) not in allowed] == []


def test_data_is_handed_its_task():
    assert [f"{s} -> {t}" for s, t in edges() if folder(s) == "data" and folder(t) == "tasks"] == []


def closure(module: str) -> set[str]:
    seen, todo = set(), [module]
    while todo:
        for target in IMPORTS[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_serving_loads_no_training_code():
    serving = [m for m in MODULES if folder(m) == "serve"]
    loaded = {f"{m} -> {t}" for m in serving for t in closure(m) if t.startswith(TRAINING_CODE)}
    assert sorted(loaded) == []


# where the whole composed Config may go: the run plans from it and hands narrow values down
WHOLE_CONFIG = ("config", "run", "cli")


def test_the_whole_config_stays_in_the_run():
    """Below the run, a function takes a group (StudentConfig, ...) or plain values, never the whole
    Config: no module there imports it or annotates a parameter with it."""
    reached = []
    for name, path in MODULES.items():
        if folder(name) in WHOLE_CONFIG:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(alias.name == "Config" for alias in node.names):
                reached.append(f"{name} imports Config")
            if isinstance(node, ast.arg) and node.annotation is not None and ast.unparse(node.annotation) == "Config":
                reached.append(f"{name}: parameter {node.arg}")
    assert reached == []


def test_the_rules_catch_an_upward_import(tmp_path):
    """The reader itself: a function-local import of the run from the ground is seen."""
    source = tmp_path / "x.py"
    source.write_text("def f():\n    from distil.run.pipeline import run\n")
    assert "distil.run.pipeline" in imports_of(source)


def test_a_search_reads_cells_and_never_imports_a_run_directly():
    """distil/search drives runs only as table cells (distil.tables.run starts `distil` in a subprocess)."""
    assert [f"{s} -> {t}" for s, t in edges() if folder(s) == "search" and folder(t) == "run"] == []
