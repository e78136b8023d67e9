"""Content-addressed artifacts: reuse, new keys on new bytes, damage detection, no partials."""

import pytest

from distil.store import ArtifactStore


def writer(calls):
    def build(out):
        calls.append(out)
        (out / "data.bin").write_bytes(b"payload")
        return {"size": 7}
    return build


def test_built_once_then_reused(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    first = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    second = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    assert len(calls) == 1 and not first.reused and second.reused
    assert first.path == second.path and second.info == {"size": 7}


def test_a_different_spec_is_a_different_key(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    a = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    b = store.get_or_build("things", "x", {"seed": 2}, writer(calls))
    assert a.key != b.key and len(calls) == 2


def test_damaged_artifact_is_rebuilt(tmp_path):
    store, calls = ArtifactStore(tmp_path), []
    art = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    (art.path / "data.bin").write_bytes(b"tampered")
    assert store.verify(art.path) == "checksum mismatch in data.bin"
    again = store.get_or_build("things", "x", {"seed": 1}, writer(calls))
    assert not again.reused and len(calls) == 2
    assert (again.path / "data.bin").read_bytes() == b"payload"


def test_failed_build_leaves_nothing_behind(tmp_path):
    store = ArtifactStore(tmp_path)

    def broken(out):
        (out / "half.bin").write_bytes(b"half")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        store.get_or_build("things", "x", {"seed": 1}, broken)
    leftovers = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert leftovers == []
    assert not (tmp_path / "things").exists() or not any((tmp_path / "things").iterdir())
