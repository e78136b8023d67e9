"""run/plan.py: a run's decisions are made once, from the composed config, before any work."""

import json
import os

import pytest

from distil.errors import DistilError
from distil.run.plan import plan_run
from tests.test_cli import distil_in_process


@pytest.mark.parametrize("overrides,expected", [
    ([], {"batch_size": 12, "batch_size_from": "command line / preset", "with_hidden": False,
          "cached_layer": -1, "pairs_apart": False, "reads_words": False, "reads_pairs_apart": False,
          "peer": False, "family": "bilstm", "start": "own"}),
    (["trainer.batch_size=null", "schedule=joint"], {"batch_size": 64, "batch_size_from": "schedule"}),
    (["student=rnn"], {"reads_words": True}),
    (["schedule=d4.2"], {"with_hidden": True, "cached_layer": -1}),
    (["dataset=toy-ner", "student=bilstm-tagger"], {"cached_layer": None}),  # tagging caches no layer unless asked
    (["dataset=toy-pair", "student=siamese"], {"pairs_apart": True, "reads_pairs_apart": True}),
    (["student=transformer-tiny", "schedule=pd"], {"start": "pretrained", "family": "transformer"}),
    (["student=peer-tfidf"], {"peer": True, "family": "peer"}),
])
def test_the_plan_holds_each_decision(smoke_cfg, overrides, expected):
    plan = plan_run(smoke_cfg(*overrides))
    assert {key: getattr(plan, key) for key in expected} == expected
    assert plan.trainer.batch_size == plan.batch_size  # what every stage reads


def test_a_bad_pretraining_setting_fails_in_the_plan(smoke_cfg):
    with pytest.raises(DistilError, match="pretrain.mask_token_prob \\+ pretrain.random_token_prob = 1.2"):
        plan_run(smoke_cfg("student=transformer-tiny", "schedule=pd", "pretrain.mask_token_prob=0.7",
                           "pretrain.random_token_prob=0.5"))


def test_a_bad_pretraining_setting_stops_the_run_before_the_teacher(tmp_path, monkeypatch, capsys):
    """Before the plan, the masked-LM settings were first read after the teacher was fine-tuned."""
    code, _, err = distil_in_process(["debug=smoke", "student=transformer-tiny", "schedule=pd",
                                      "pretrain.objective=clm"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "pretrain.objective" in err.strip().splitlines()[-1]
    assert not (tmp_path / "outputs" / "cache" / "teachers").exists()


@pytest.mark.parametrize("offline", [True, False])
def test_hubs_go_offline_before_any_check_can_reach_them(smoke_cfg, monkeypatch, offline):
    """The checks load the teacher's config: with hub_offline a hub name fails at once instead of waiting
    on the network, so the plan sets the offline switches first."""
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    seen = {}
    monkeypatch.setattr("distil.run.plan.check_layer", lambda cfg: seen.setdefault("at_check", dict(os.environ)))
    plan_run(smoke_cfg(f"hub_offline={str(offline).lower()}", "schedule=d4.2"))
    assert seen["at_check"].get("HF_HUB_OFFLINE") == ("1" if offline else None)
    assert seen["at_check"].get("HF_DATASETS_OFFLINE") == ("1" if offline else None)


@pytest.mark.parametrize("cut, read", [("null", 64), (8, 8), (1000, 64)], ids=["none", "shorter", "longer"])
def test_a_dataset_cut_below_the_teachers_length_is_what_every_phase_reads(smoke_cfg, cut, read):
    """dataset.max_length cuts every example (the smoke teacher reads 64 wordpieces); a cut beyond the
    teacher's length changes nothing."""
    cfg = smoke_cfg(f"dataset.max_length={cut}")
    plan_run(cfg)
    assert cfg.teacher.max_length == read


def test_a_run_on_a_cut_dataset_saves_its_student_at_the_cut(tmp_path, monkeypatch, capsys):
    code, _, err = distil_in_process(["debug=smoke", "dataset.max_length=8"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    (run,) = (tmp_path / "outputs/runs").glob("*/*")
    assert json.loads((run / "student/config.json").read_text())["max_length"] == 8  # what serving cuts to
