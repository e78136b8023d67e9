"""Every command shares the run's guards: the schema's range checks and the one-line report of a config
Hydra cannot compose (distil, distil pretrain, distil data), and a teacher, a cache, an outputs folder,
a learning rate or a dataset that cannot serve a run ends in one line with its fix, exit 2, and
nothing half-written."""

from __future__ import annotations

import errno
import json
import logging
import re
import shutil
from pathlib import Path

import pytest
import torch

import distil.config.run_dir
from distil.errors import DistilError
from distil.store.artifacts import MANIFEST, ArtifactStore, release_read_locks
from distil.training.loop import fit
from tests.test_cli import cache_files, distil_in_process

DIR_FIX = ("give teacher.name_or_path a directory holding config.json (with its model_type), the weights "
           "(model.safetensors or pytorch_model.bin) and the tokenizer files, as save_pretrained writes them")


def one_line(args, tmp_path, monkeypatch, capsys, code=2) -> str:
    """`distil ARGS` in-process: its last stderr line, checked to be an error without a traceback."""
    exit_code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert "Traceback" not in err
    assert exit_code == code, err
    return err.strip().splitlines()[-1]


def written_files(outputs: Path) -> list[Path]:
    return [p for p in outputs.rglob("*") if p.is_file()] if outputs.exists() else []


def run_status(tmp_path: Path) -> str:
    (path,) = (tmp_path / "outputs").rglob("metrics.json")
    return json.loads(path.read_text())["status"]


# --- distil pretrain: the schema's range checks ---------------------------------------------------

@pytest.mark.parametrize("override,message", [
    ("pretrain.steps=0", "pretrain.steps=0 is out of range (allowed: >= 1); set pretrain.steps to a value >= 1"),
    ("pretrain.mask_prob=1.5",
     "pretrain.mask_prob=1.5 is out of range (allowed: in (0, 1)); set pretrain.mask_prob to a value in (0, 1)"),
    ("pretrain.max_length=4",
     "pretrain.max_length=4 is out of range (allowed: >= 8); set pretrain.max_length to a value >= 8"),
], ids=["pretrain.steps=0", "pretrain.mask_prob=1.5", "pretrain.max_length=4"])
def test_pretrain_checks_every_range_before_any_work(override, message, tmp_path, monkeypatch, capsys):
    args = ["pretrain", "debug=smoke", "student=transformer-mini", override]
    assert one_line(args, tmp_path, monkeypatch, capsys) == f"distil pretrain: error: {message}"
    assert cache_files(tmp_path / "outputs") == []


def test_a_table_cell_out_of_range_fails_when_composed_before_any_cell_runs():
    from distil.config.compose import ComposeProblem, compose_overrides

    with pytest.raises(ComposeProblem) as problem:
        compose_overrides(["debug=smoke", "trainer.lr=0"], None)
    assert str(problem.value) == "trainer.lr=0.0 is out of range (allowed: > 0); set trainer.lr to a value > 0"


# --- distil data: Hydra's errors in one line, as distil prints them ------------------------------

def test_data_reports_a_value_hydra_cannot_merge_in_one_line(tmp_path, monkeypatch, capsys):
    line = one_line(["data", "toy", "trainer.lr=abc"], tmp_path, monkeypatch, capsys)
    assert line == ("distil data: error: Error merging override trainer.lr=abc; Value 'abc' of type 'str' could not "
                    "be converted to Float; fix that override (distil --cfg job shows the composed config)")


def test_data_checks_ranges_too(tmp_path, monkeypatch, capsys):
    line = one_line(["data", "toy", "trainer.lr=0"], tmp_path, monkeypatch, capsys)
    assert line == "distil data: error: trainer.lr=0.0 is out of range (allowed: > 0); set trainer.lr to a value > 0"


def own_dataset_with_a_typo(tmp_path: Path) -> Path:
    """A user's dataset YAML (toy's) with `labels` misspelt `labls`."""
    conf = tmp_path / "myconf"
    (conf / "dataset").mkdir(parents=True)
    toy = (Path(distil.config.run_dir.__file__).parent.parent / "conf" / "dataset" / "toy.yaml").read_text()
    (conf / "dataset" / "mine.yaml").write_text(toy.replace("name: toy", "name: mine").replace("labels:", "labls:"))
    return conf


@pytest.mark.parametrize("command,prog", [(["debug=smoke", "dataset=mine"], "distil"),
                                          (["data", "mine"], "distil data")], ids=["distil", "distil-data"])
def test_a_typo_in_the_users_own_yaml_names_the_file_and_the_key_it_meant(command, prog, tmp_path, monkeypatch,
                                                                           capsys):
    conf = own_dataset_with_a_typo(tmp_path)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(conf))
    line = one_line(command, tmp_path, monkeypatch, capsys)
    assert line.startswith(f"{prog}: error: {conf.resolve() / 'dataset' / 'mine.yaml'}: unknown key 'dataset.labls': "
                           f"dataset has no 'labls' (did you mean 'labels'?); valid keys: name, description, task,")
    assert line.endswith("; fix that file (distil --cfg job shows the composed config)")
    assert written_files(tmp_path / "outputs") == []


# --- the outputs folder: its own problem, not "fix that override" --------------------------------

def test_an_outputs_folder_that_is_a_file_is_named_with_its_fix(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "outputs-file"
    blocker.write_text("")
    monkeypatch.setenv("DISTIL_OUTPUTS", str(blocker))
    line = one_line(["debug=smoke"], tmp_path, monkeypatch, capsys)
    assert line.startswith(f"distil: error: cannot create the run directory {blocker}/runs/")
    assert line.endswith(": Not a directory; set paths.outputs or DISTIL_OUTPUTS (or the hydra.run.dir / "
                         "hydra.sweep.dir given) to a writable directory")


def test_a_read_only_outputs_folder_is_named_with_its_fix(tmp_path, monkeypatch, capsys):
    read_only = tmp_path / "read-only"

    def refused(path, *args, **kwargs):  # what a read-only folder answers (root ignores chmod: simulated)
        raise PermissionError(errno.EACCES, "Permission denied", str(path))
    monkeypatch.setenv("DISTIL_OUTPUTS", str(read_only))
    monkeypatch.setattr(distil.config.run_dir.os, "mkdir", refused)
    line = one_line(["debug=smoke"], tmp_path, monkeypatch, capsys)
    assert line.startswith(f"distil: error: cannot create the run directory {read_only}/runs/")
    assert line.endswith(": Permission denied; set paths.outputs or DISTIL_OUTPUTS (or the hydra.run.dir / "
                         "hydra.sweep.dir given) to a writable directory")


def test_a_sweep_whose_cells_do_not_compose_leaves_no_empty_multirun_directory(tmp_path, monkeypatch, capsys):
    line = one_line(["-m", "debug=smoke", "trainer.epochs=1,abc"], tmp_path, monkeypatch, capsys)
    assert line == ("distil: error: Error merging override trainer.epochs=abc; Value 'abc' of type 'str' could not be "
                    "converted to Integer; fix that override (distil --cfg job shows the composed config)")
    multirun = tmp_path / "outputs" / "multirun"
    assert not multirun.exists() or list(multirun.iterdir()) == []


# --- teacher directories and positions ------------------------------------------------------------

def test_an_empty_teacher_directory_fails_before_any_work(tmp_path, monkeypatch, capsys):
    empty = tmp_path / "teacher"
    empty.mkdir()
    line = one_line(["debug=smoke", f"teacher.name_or_path={empty}"], tmp_path, monkeypatch, capsys)
    message = (f"teacher 'tiny': {empty} is not a model directory (it is empty); give teacher.name_or_path a directory "
               f"holding config.json (with its model_type), the weights (model.safetensors or pytorch_model.bin) and "
               f"the tokenizer files, as save_pretrained writes them")
    assert line == f"distil: error: {message}"
    assert run_status(tmp_path) == f"failed: {message}"
    assert cache_files(tmp_path / "outputs") == []


def test_a_teacher_directory_without_weights_fails_before_any_work(tmp_path, monkeypatch, capsys):
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.json").write_text('{"model_type": "bert"}')
    line = one_line(["debug=smoke", f"teacher.name_or_path={teacher}"], tmp_path, monkeypatch, capsys)
    assert line == (f"distil: error: teacher 'tiny': {teacher} holds no weights (none of model.safetensors, "
                    f"pytorch_model.bin, model.safetensors.index.json, pytorch_model.bin.index.json); {DIR_FIX}")


def test_garbage_teacher_weights_are_one_line_not_unexpected(tmp_path, monkeypatch, capsys):
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    (teacher / "config.json").write_text('{"model_type": "bert"}')
    (teacher / "model.safetensors").write_bytes(b"\xff" * 1000)
    line = one_line(["debug=smoke", f"teacher.name_or_path={teacher}"], tmp_path, monkeypatch, capsys)
    assert line.startswith(f"distil: error: teacher 'tiny': cannot load {teacher} (")
    assert line.endswith("); give teacher.name_or_path a directory holding config.json (with its model_type), the "
                         "weights (model.safetensors or pytorch_model.bin) and the tokenizer files, as save_pretrained "
                         "writes them") and "unexpected" not in line
    assert [p for p in cache_files(tmp_path / "outputs") if p.parent.name != "locks"] == []  # no half-built teacher


@pytest.mark.parametrize("length", [1000, 100000])
def test_a_teacher_max_length_beyond_its_positions_fails_before_any_work(length, tmp_path, monkeypatch, capsys):
    line = one_line(["debug=smoke", f"teacher.max_length={length}"], tmp_path, monkeypatch, capsys)
    assert line == (f"distil: error: teacher.max_length={length} is above the 256 positions teacher 'tiny' has; "
                    f"set teacher.max_length to at most 256")
    assert cache_files(tmp_path / "outputs") == []


def test_an_unreachable_hub_fails_at_once_in_one_line(smoke_cfg, monkeypatch):
    from distil.teacher import load

    monkeypatch.setattr(load, "hub_problem", lambda: "https://hub.invalid is not reachable (Name or service not known)")
    cfg = smoke_cfg("teacher.name_or_path=no-such-org/no-such-model").teacher
    with pytest.raises(DistilError) as error:
        load.load_tokenizer(cfg, hub_offline=False)
    assert str(error.value) == (
        "teacher 'tiny' (no-such-org/no-such-model) is not in the local hub cache and the model hub "
        "https://hub.invalid is not reachable (Name or service not known); set teacher.name_or_path=/path/to/a/local/"
        "copy (a directory with config.json, weights and tokenizer files), or run where the hub is reachable")


# --- the artifact cache -----------------------------------------------------------------------------

def build_one(calls: list[str]):
    def build(directory: Path) -> dict:
        calls.append("built")
        (directory / "weights.bin").write_bytes(b"weights")
        return {}
    return lambda store: store.get_or_build("teachers", "tiny", {"a": 1}, build)


def test_a_file_where_an_artifact_should_be_is_rebuilt(tmp_path, caplog):
    store, calls = ArtifactStore(tmp_path / "cache"), []
    get = build_one(calls)
    artifact = get(store)
    shutil.rmtree(artifact.path)
    artifact.path.write_text("not a directory")
    assert ArtifactStore.verify(artifact.path) == "a file where its directory should be"
    with caplog.at_level(logging.WARNING, logger="distil.store.artifacts"):
        rebuilt = get(ArtifactStore(tmp_path / "cache"))
    assert (f"cached teachers {artifact.key} is damaged (a file where its directory should be): rebuilding what is "
            f"missing") in caplog.text
    assert calls == ["built", "built"] and (rebuilt.path / "weights.bin").read_bytes() == b"weights"


def test_a_manifest_listing_no_files_is_damaged_for_runs_and_for_cache_verify(tmp_path, monkeypatch, capsys):
    store, calls = ArtifactStore(tmp_path / "cache"), []
    get = build_one(calls)
    artifact = get(store)
    manifest = json.loads((artifact.path / MANIFEST).read_text())
    (artifact.path / MANIFEST).write_text(json.dumps({**manifest, "files": {}}))
    assert ArtifactStore.verify(artifact.path) == "manifest.json lists no files"
    exit_code, out, _ = distil_in_process(["cache", "verify", "--cache-dir", str(tmp_path / "cache")], tmp_path,
                                          monkeypatch, capsys)
    assert exit_code == 1
    assert out.strip() == (f"DAMAGED teachers/{artifact.key}: manifest.json lists no files (the next run that "
                           f"needs it rebuilds it; or: distil cache prune --damaged)")
    get(store)
    assert calls == ["built", "built"]


def read_only(monkeypatch, root: Path) -> None:
    """The cache under `root` as a read-only mount answers (root ignores chmod: simulated)."""
    real_open, real_mkdir = Path.open, Path.mkdir

    def refuse_writes(path, mode="r", *args, **kwargs):
        if str(path).startswith(str(root)) and set(mode) & set("wax+"):
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_open(path, mode, *args, **kwargs)

    def refuse_mkdir(path, *args, **kwargs):
        if str(path).startswith(str(root)) and not path.is_dir():
            raise OSError(errno.EROFS, "Read-only file system", str(path))
        return real_mkdir(path, *args, **kwargs)

    def refuse_utime(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(Path, "open", refuse_writes)
    monkeypatch.setattr(Path, "mkdir", refuse_mkdir)
    monkeypatch.setattr("distil.store.artifacts.os.utime", refuse_utime)


def test_a_read_only_cache_serves_what_it_holds_and_says_what_it_cannot_write(tmp_path, monkeypatch):
    cache, calls = tmp_path / "cache", []
    get = build_one(calls)
    built = get(ArtifactStore(cache))
    release_read_locks()
    for lock in (cache / "locks").iterdir():
        lock.unlink()  # a cache copied without its lock files
    read_only(monkeypatch, cache)
    store = ArtifactStore(cache)
    store.remove_stale_builds()
    reused = get(store)
    assert reused.reused and reused.path == built.path and calls == ["built"]
    with pytest.raises(DistilError) as error:
        store.get_or_build("teachers", "tiny", {"a": 2}, lambda directory: {})
    key = store.key("tiny", {"a": 2})
    assert str(error.value) == (f"the cache {cache} is read-only, and this run has to write {key} there; give "
                                f"paths.cache a writable directory (a copy of this one keeps what it holds) or make "
                                f"it writable")


# --- a learning rate that diverges, a dataset with nothing to learn ---------------------------------

def test_a_loss_that_explodes_is_diverged_naming_the_learning_rate():
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
    losses = iter([1.5, 2.0, 3e9])

    def loss(batch):
        return model(torch.zeros(1, 2)).sum() * 0 + next(losses)
    with pytest.raises(DistilError) as error:
        fit(model, optimizer, lambda epoch: [0, 1, 2], loss, lambda: 0.0, epochs=1, patience=1,
            description="S1", lr_setting="trainer.lr (now 1e+10)")
    assert str(error.value) == ("S1 diverged at epoch 1, batch 3: its training loss grew to 3e+09 from 1.5 at its "
                                "first batch; lower trainer.lr (now 1e+10)")


def test_an_absurd_student_learning_rate_fails_as_diverged(tmp_path, monkeypatch, capsys):
    line = one_line(["debug=smoke", "trainer.lr=1e10", "trainer.epochs=1", "teacher.finetune.epochs=1"],
                    tmp_path, monkeypatch, capsys)
    pattern = (r"distil: error: d1 S1 \(ce\+logit_mse\) diverged at epoch 1, batch \d+: its training loss grew to "
               r"[0-9.e+]+ from [0-9.]+ at its first batch; lower trainer.lr \(now 1e\+10\)")
    assert re.fullmatch(pattern, line), line
    assert run_status(tmp_path) == f"failed: {line.removeprefix('distil: error: ')}"


def test_a_dataset_of_one_class_is_refused(tmp_path, monkeypatch, capsys):
    data = tmp_path / "one-class"
    data.mkdir()
    rows = "text\tlabel\n" + "".join(f"a good film, number {i}\tpos\n" for i in range(40))
    for split in ("train", "dev", "test"):
        (data / f"{split}.tsv").write_text(rows)
    line = one_line(["debug=smoke", f"dataset.path={data}", "dataset.labels=null"], tmp_path, monkeypatch, capsys)
    message = ("dataset 'toy': every training example has the label 'pos': with one class there is nothing to "
               "learn; give training data with at least two classes")
    assert line == f"distil: error: {message}"
    assert run_status(tmp_path) == f"failed: {message}"
    assert cache_files(tmp_path / "outputs") == []


def test_a_student_trained_on_a_read_only_cache_is_checkpointed_elsewhere(tmp_path, monkeypatch):
    """A run that only reads the cache's teacher and targets still trains its student: the checkpoint,
    which the cache cannot hold, goes to a temporary directory."""
    from distil.training.checkpoint import schedule_checkpoint

    cache = tmp_path / "cache"
    cache.mkdir()
    read_only(monkeypatch, cache)
    with schedule_checkpoint(str(cache), {"recipe": 1}, 0.0, "part") as checkpoint:
        assert not str(checkpoint.directory).startswith(str(cache))
        assert checkpoint.directory.parent.is_dir()
    assert not checkpoint.directory.parent.exists()  # removed with the run's student
