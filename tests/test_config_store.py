"""The store of composed cell configs: read back only under the fingerprint of the files that composed them."""

from __future__ import annotations

import os

import pytest

from distil.tables import cells, config_store

OVERRIDES = ("debug=smoke", "schedule=hard")


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setenv(config_store.STORE_ENV, str(tmp_path / "store"))
    cells._result_config.cache_clear()
    yield tmp_path / "store"
    cells._result_config.cache_clear()


def counted(calls: list, value: dict):
    def compose() -> dict:
        calls.append(1)
        return value
    return compose


def test_a_stored_config_is_read_back_and_keys_the_cell_as_a_fresh_composition(store):
    fresh = cells.cell_key([*OVERRIDES, "seed=1"])
    (fingerprint,) = store.iterdir()
    (stored,) = fingerprint.iterdir()
    cells._result_config.cache_clear()
    calls = []
    read = config_store.stored(OVERRIDES, None, counted(calls, {}))
    assert not calls and read == cells._composed_result(OVERRIDES, None)
    cells._result_config.cache_clear()
    assert cells.cell_key([*OVERRIDES, "seed=1"]) == fresh and list(store.iterdir()) == [fingerprint]
    stored.write_text(stored.read_text()[:20])  # cut short: composed and written again
    assert config_store.stored(OVERRIDES, None, counted(calls, {"a": 1})) == {"a": 1} and calls == [1]
    assert config_store.stored(OVERRIDES, None, counted(calls, {})) == {"a": 1} and calls == [1]


def test_an_edited_config_file_is_composed_again(store, tmp_path):
    own = tmp_path / "conf" / "schedule"
    own.mkdir(parents=True)
    (own / "mine.yaml").write_text("defaults: [hard]\n")
    config_env = str(tmp_path / "conf")
    calls = []
    assert config_store.stored(OVERRIDES, config_env, counted(calls, {"v": 1})) == {"v": 1}
    assert config_store.stored(OVERRIDES, config_env, counted(calls, {"v": 2})) == {"v": 1}
    (own / "mine.yaml").write_text("defaults: [soft]\n")
    config_store._digest.cache_clear()  # a new command
    assert config_store.stored(OVERRIDES, config_env, counted(calls, {"v": 3})) == {"v": 3}
    assert len(calls) == 2 and len(list(store.iterdir())) == 2  # two fingerprints: before and after the edit


def test_a_store_that_cannot_be_written_only_costs_the_composition(tmp_path, monkeypatch):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    monkeypatch.setenv(config_store.STORE_ENV, str(blocked))
    calls = []
    assert config_store.stored(OVERRIDES, None, counted(calls, {"v": 1})) == {"v": 1}
    assert config_store.stored(OVERRIDES, None, counted(calls, {"v": 1})) == {"v": 1}
    assert len(calls) == 2 and blocked.read_text() == "not a directory"


def test_old_fingerprints_are_removed_and_nothing_else(store):
    store.mkdir()
    old = [store / f"{i:016x}" for i in range(config_store.KEPT_FINGERPRINTS + 1)]
    for age, path in enumerate(old):
        path.mkdir()
        os.utime(path, (1_000_000 + age, 1_000_000 + age))
    (store / "mine").mkdir()  # not a store's folder: kept
    config_store.stored(OVERRIDES, None, lambda: {})
    kept = sorted(p.name for p in store.iterdir())
    current = config_store._fingerprint(OVERRIDES, None)
    newest = [p.name for p in old[-(config_store.KEPT_FINGERPRINTS - 1):]]
    assert kept == sorted([*newest, current, "mine"])
