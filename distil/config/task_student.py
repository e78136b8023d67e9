"""The student a task gets when nobody chose one.

The main config's defaults list names one student for every task (bilstm), and Hydra cannot make a
default depend on a value such as dataset.task. On sentence-pair regression (STS-B-style scores) the
joined-pair BiLSTM reads `a [SEP] b` as one text, while the siamese student encodes the two texts
apart and compares them (Tang et al. Fig. 2), the better fit for a similarity score. So a run whose
dataset is pair regression, and whose student nothing chose, gets `student=siamese` added to its
overrides before Hydra composes it: the run directory's .hydra files, metrics.json's overrides and
a table cell's key all read the student the run trains. A student chosen anywhere wins: on the
command line, or by a config's `override /student: ...` (an experiment, the user's own YAML).
"""

from __future__ import annotations

from collections.abc import Sequence

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.types import RunMode

from distil.config.schema import CONF_DIR

PAIR_REGRESSION_STUDENT = "siamese"


def task_student(dataset_cfg) -> str | None:
    """The student the dataset's task defaults to, or None where the main config's default stands."""
    if dataset_cfg.task == "regression" and dataset_cfg.text_pair_column:
        return PAIR_REGRESSION_STUDENT
    return None


def student_chosen(overrides: Sequence[str]) -> bool:
    """Whether the overrides, or a config they select, choose the student group: Hydra's defaults list
    records every group a command-line override or a config's `override /<group>:` entry set."""
    def chosen() -> bool:
        defaults = GlobalHydra.instance().config_loader().compute_defaults_list("config", list(overrides), RunMode.RUN)
        return "student" in defaults.overrides.override_choices

    if GlobalHydra.instance().is_initialized():  # inside a composition already (compose.composed)
        return chosen()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        return chosen()


def note(student: str) -> str:
    """The line a run prints (and metrics.json keeps) when the task chose its student."""
    return (f"student={student}: the default student for sentence-pair regression (it reads the two texts "
            f"apart); choose another with student=...")
