"""Every schedule runs end to end on the tiny teacher: distil's own pipeline, in process."""

import json

import pytest
from safetensors.torch import load_file

from distil.config.overrides import group_options
from distil.config.schema import CONF_DIR
from tests.test_cli import distil_in_process

SCHEDULES = group_options(CONF_DIR, "schedule")


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One cache for the module: the tiny teacher is fine-tuned once, its targets reused."""
    return tmp_path_factory.mktemp("cache")


def run(tmp_path, monkeypatch, capsys, cache, *args):
    code, out, err = distil_in_process(["debug=smoke", f"paths.cache={cache}", *args], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    return json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text()), out


def cached_tensors(cache, metrics) -> set[str]:
    return set(load_file(cache / "targets" / metrics["artifacts"]["targets"] / "dev-00000.safetensors"))


# schedules that start from a pre-trained Transformer: a tiny one, pre-trained for a few steps on the toy set
PRETRAINED = ["student=transformer-tiny", "pretrain.corpus=transfer", "pretrain.steps=10", "pretrain.batch_size=8"]


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.heavy
def test_schedule_runs_end_to_end(tmp_path, monkeypatch, capsys, shared_cache, schedule):
    extra = PRETRAINED if schedule in ("pf", "pd", "pdf") else []
    if schedule in ("wu-sra", "wu-sra-kd"):  # Wu's task-agnostic SRA student, distilled on a few lines
        corpus = tmp_path / "corpus.txt"
        corpus.write_text("\n".join(f"sentence number {i} of a small corpus" for i in range(50)))
        extra = ["student=sra", f"agnostic.corpus={corpus}", "agnostic.epochs=1", "agnostic.batch_size=16"]
    metrics, out = run(tmp_path, monkeypatch, capsys, shared_cache, f"schedule={schedule}", "trainer.epochs=1",
                       *extra)
    records = metrics["student"]["stages"]
    assert records and all({"name", "step", "dev", "test", "dev_loss"} <= set(r) for r in records)
    assert metrics["student"]["test"] == records[-1]["test"]
    if any(k.startswith("repr_") for r in records for k in r["losses"]):
        assert "hidden" in cached_tensors(shared_cache, metrics)  # the layer was cached for it
    assert "stage" in out and records[-1]["step"] in out  # the progression table was printed


@pytest.mark.parametrize("dataset,student,schedule", [
    ("toy-ner", "bilstm-tagger", "d4.2"),  # per-token teacher states, word starts only
    ("toy-pair", "siamese", "rl-llce"),
    ("toy", "sra", "sra"),
    ("toy", "transformer-tiny", "d3.2"),
])
@pytest.mark.heavy
def test_representation_schedules_on_every_task(tmp_path, monkeypatch, capsys, shared_cache, dataset, student,
                                                 schedule):
    metrics, _ = run(tmp_path, monkeypatch, capsys, shared_cache, f"schedule={schedule}", f"dataset={dataset}",
                     f"student={student}", "trainer.epochs=1")
    assert "hidden" in cached_tensors(shared_cache, metrics)
    steps = [r["step"] for r in metrics["student"]["stages"]]
    assert steps[-1] == "embeddings" or schedule == "sra"


def test_teacher_layer_out_of_range_fails_before_training(tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["debug=smoke", "schedule=d2", "teacher.layer=7"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "teacher.layer=7 is out of range" in err.strip().splitlines()[-1]
    assert not (tmp_path / "outputs" / "cache").exists()


def test_the_joint_schedule_runs_at_its_own_batch_size(tmp_path, monkeypatch, capsys, shared_cache):
    """The smoke preset sets trainer.batch_size; a user's run does not, and the balanced sampler's
    check must read the batch the run trains at (here the schedule's 64, Mukherjee & Awadallah 6.1)."""
    metrics, _ = run(tmp_path, monkeypatch, capsys, shared_cache, "schedule=joint", "trainer.batch_size=null",
                     "trainer.epochs=1")
    assert [record["batch_size_from"] for record in metrics["student"]["stages"]] == ["schedule"]
