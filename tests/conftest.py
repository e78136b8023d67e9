"""Shared fixtures: everything offline, tiny, and written under pytest's tmp_path."""

from __future__ import annotations

import copy
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from distil.config.compose import composed
from distil.data.load import load_raw_splits
from distil.data.split import build_task_data
from distil.tables.config_store import STORE_ENV
from distil.tasks import make_task

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
if os.environ.get("PYTEST_XDIST_WORKER"):
    # one process per core (`make test`): a second torch thread in each would fight for the cores and
    # spin, several times slower; the console scripts the tests start inherit this
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)

REPO = Path(__file__).resolve().parent.parent


def load_script(name: str):
    """scripts/<name>.py as a module: the scripts are files, not a package the tests can import."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pytest_configure(config):
    """One store of composed cell configs (distil.tables.config_store) for the whole run, outside the
    checkout: set before the workers start, so they and the commands they run share it (each preset is
    composed once, by whichever worker meets it first, ~40 s of the suite's CPU)."""
    if not os.environ.get("PYTEST_XDIST_WORKER") and STORE_ENV not in os.environ:
        store = tempfile.mkdtemp(prefix="distil-configs-")
        os.environ[STORE_ENV] = store
        config.add_cleanup(lambda: (shutil.rmtree(store, ignore_errors=True), os.environ.pop(STORE_ENV, None)))


@pytest.fixture(autouse=True)
def results_under_tmp(tmp_path, monkeypatch):
    """The tracked record of finished table cells (distil.tables.ledger) is the checkout's results/:
    no test writes there."""
    monkeypatch.setenv("DISTIL_RESULTS", str(tmp_path / "results"))


def task_data_of(cfg, *args, **kwargs):
    """build_task_data, handed the dataset's own task (data sits below tasks and never makes one)."""
    return build_task_data(cfg, make_task(cfg), *args, **kwargs)


def raw_splits_of(cfg, *args, **kwargs):
    return load_raw_splits(cfg, make_task(cfg), *args, **kwargs)


def compose_config(*overrides: str):
    """A fresh copy of the composed config: a test may change it; composing costs ~0.2 s, copying ~0.01 s."""
    return copy.deepcopy(composed(overrides))


@pytest.fixture
def smoke_cfg(tmp_path):
    """The debug=smoke configuration with every output under tmp_path."""

    def make(*overrides: str):
        cfg = compose_config("debug=smoke", *overrides)
        cfg.paths.outputs = str(tmp_path / "outputs")  # set after composing, so every test shares the composition
        return cfg

    return make


@pytest.fixture
def toy_table(tmp_path):
    """Write a small tsv dataset into tmp_path and return (data_dir, write)."""

    def write(name: str, rows: list[tuple[str, str]], header: str = "text\tlabel") -> Path:
        path = tmp_path / "data" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join([header, *(f"{t}\t{label}" for t, label in rows)]) + "\n")
        return path

    return tmp_path / "data", write
