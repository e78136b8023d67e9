"""Every option of every group composes into the typed schema; mistakes are caught."""

import pytest
from hydra.errors import ConfigCompositionException

from distil.cli import CONF_DIR
from distil.overrides import check_overrides, group_options
from tests.conftest import compose_config

GROUPS = ["teacher", "student", "schedule", "dataset", "transfer_size", "trainer", "paths", "debug"]


@pytest.mark.parametrize(
    "group,option", [(g, o) for g in GROUPS for o in group_options(CONF_DIR, g)]
)
def test_every_option_composes(group, option):
    cfg = compose_config(f"{group}={option}")
    if group not in ("debug",):
        node = cfg[group]
        if "name" in node:
            assert node.name == option


def test_schedules_are_lists_of_stages():
    for option in group_options(CONF_DIR, "schedule"):
        cfg = compose_config(f"schedule={option}")
        assert len(cfg.schedule.stages) >= 1
        for stage in cfg.schedule.stages:
            assert stage.losses and stage.data


def test_misspelt_key_is_rejected_by_the_schema():
    with pytest.raises(ConfigCompositionException):
        compose_config("teacher.lrr=1")


def test_unknown_option_lists_the_valid_ones():
    problem = check_overrides(["schedule=d9"], CONF_DIR)
    assert "unknown schedule 'd9'" in problem and "d0, d0-s, d1, d2" in problem


def test_unknown_option_inside_a_sweep_is_found():
    problem = check_overrides(["-m", "schedule=d0,nope"], CONF_DIR)
    assert "unknown schedule 'nope'" in problem


def test_misspelt_key_lists_the_valid_keys():
    problem = check_overrides(["teacher.finetune.lrr=1"], CONF_DIR)
    assert "teacher.finetune has no 'lrr'" in problem and "lr, batch_size" in problem


def test_valid_overrides_pass():
    assert check_overrides(["teacher=tiny", "trainer.lr=0.1", "seed=3", "hydra.verbose=true"],
                           CONF_DIR) is None
