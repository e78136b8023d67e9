"""Every option of every group composes into the typed schema; mistakes are caught."""

import pytest
from hydra.errors import ConfigCompositionException

from distil.config.overrides import check_overrides, group_options
from distil.config.schema import CONF_DIR
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


def test_a_nested_group_is_chosen_like_any_group():
    """`teacher/finetune=tang` (the README's fine-tuning recipes) is a group choice, not an unknown key."""
    assert check_overrides(["teacher/finetune=tang"], CONF_DIR) is None
    problem = check_overrides(["teacher/finetune=tangg"], CONF_DIR)
    assert problem == ("unknown teacher/finetune 'tangg' (did you mean 'tang'?); "
                       "choose one of: bert, minilm, tang, xtremedistil")


@pytest.mark.parametrize("overrides,size,rule", [
    # an explicit trainer.batch_size always wins: on the command line ...
    (["schedule=bilstm-soft", "trainer.batch_size=512"], 512, "command line / preset"),
    (["schedule=sra", "student=bilstm", "trainer.batch_size=7"], 7, "command line / preset"),
    # ... or from a preset: sst2-low keeps the README's sweeps at 32 whatever the schedule says
    (["+experiment=sst2-low", "schedule=bilstm-soft"], 32, "command line / preset"),
    (["+experiment=sst2-low", "schedule=d4.2"], 32, "command line / preset"),
    (["debug=smoke", "schedule=sra"], 12, "command line / preset"),
    # else the schedule's paper setting beats the student's
    (["schedule=bilstm-soft", "student=bilstm"], 50, "schedule"),  # Tang: SST-2
    # XtremeDistil's 512 and Wu's 1024 are for millions of transfer sentences: not imposed at CPU scale
    (["schedule=sra", "student=sra"], 32, "default"),
    (["schedule=d4.2", "student=bilstm"], 64, "student"),
    (["schedule=d4.2", "student=bilstm", "schedule.batch_size=512"], 512, "schedule"),  # XtremeDistil Table 10
    (["schedule=joint", "student=transformer"], 64, "schedule"),  # Mukherjee & Awadallah 6.1
    (["debug=smoke", "trainer.batch_size=null", "schedule=hard"], 64, "schedule"),
    # else the student's paper setting, else 32
    (["schedule=turc-kd", "student=bilstm"], 64, "student"),
    (["schedule=turc-kd", "student=transformer-mini"], 32, "default"),
    (["schedule=d1", "student=rnn"], 32, "default"),
])
def test_training_batch_size_follows_one_rule(overrides, size, rule):
    from distil.run.plan import training_batch_size

    assert training_batch_size(compose_config(*overrides)) == (size, rule)


@pytest.mark.parametrize("override,key", [("trainer.batch_size=0", "trainer.batch_size"),
                                          ("schedule.batch_size=-5", "schedule.batch_size"),
                                          ("student.batch_size=0", "student.batch_size")])
def test_a_batch_size_below_one_is_a_one_line_error(override, key):
    from distil.errors import DistilError
    from distil.run.plan import training_batch_size

    cfg = compose_config("schedule=turc-kd", "schedule.batch_size=null", override)
    with pytest.raises(DistilError, match=f"{key} must be a positive number of examples") as raised:
        training_batch_size(cfg)
    assert "\n" not in str(raised.value)
