"""`distil` console script: a thin Hydra entry point around pipeline.run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from distil.config import register_configs
from distil.errors import DistilError
from distil.run_dir import register_run_dir_resolver

CONF_DIR = Path(__file__).resolve().parent / "conf"  # inside the package: wheel installs work
register_configs()
register_run_dir_resolver()

# Cells of a sweep that failed: the sweep goes on, and `main` exits non-zero at the end.
_failed_runs: list[str] = []


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _run(cfg: DictConfig) -> float | None:
    from distil import pipeline  # heavy imports (torch, transformers) only when running
    from distil.display import print_run
    from distil.overrides import replace_files_map
    from distil.sweep import dev_score, skip_finished_cell

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    replace_files_map(cfg, overrides)
    if (finished := skip_finished_cell(run_dir, overrides)) is not None:  # a re-run sweep's done cell
        return dev_score(finished)
    choices = {group: hydra_cfg.runtime.choices.get(group)
               for group in ("teacher", "student", "schedule", "dataset", "transfer_size")}
    # The user's name, not the borrowed option (`dataset=mrpc dataset.name=rte` is rte).
    choices["dataset"] = cfg.dataset.name
    choices["seed"] = cfg.seed
    try:
        metrics = pipeline.run(cfg, run_dir, choices, overrides)
    except DistilError as error:
        pipeline.write_json_atomic(run_dir / "metrics.json",
                                   {"status": f"failed: {error}", "choices": choices,
                                    "overrides": overrides})
        print(f"distil: error: {error}", file=sys.stderr)
        if hydra_cfg.mode != RunMode.MULTIRUN:
            sys.exit(2)
        _failed_runs.append(str(run_dir))
        return None
    print_run(metrics)
    print(f"metrics: {run_dir / 'metrics.json'}")
    return metrics["student"]["dev"][metrics["metric"]]  # sweepers optimise dev, never test


def predict_arguments(args: list[str]) -> list[str]:
    """`distil predict run_dir=R text="..." file=F` in distil-predict's argument form."""
    translated = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key == "run_dir":
            translated.insert(0, value)
        elif key == "file":
            translated += ["--file", value]
        else:  # text=... or a bare text
            translated.append(value if key == "text" else arg)
    return translated


def main() -> None:
    from distil.overrides import CONFIG_DIR_ENV, check_overrides, with_config_dir_env

    if sys.argv[1:2] == ["cache"]:
        from distil.cache_admin import main as cache

        sys.exit(cache(sys.argv[2:], prog="distil cache"))

    if sys.argv[1:2] == ["predict"]:
        from distil.predict import main as predict

        predict(predict_arguments(sys.argv[2:]))
        return

    _failed_runs.clear()  # one invocation's sweep failures only
    args = with_config_dir_env(sys.argv[1:], os.environ.get(CONFIG_DIR_ENV))
    problem = check_overrides(args, CONF_DIR)
    if problem:
        print(f"distil: error: {problem}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = args  # Hydra reads sys.argv: DISTIL_CONFIG_DIR is now a hydra.searchpath entry
    _run()
    if _failed_runs:
        print(f"distil: error: {len(_failed_runs)} sweep cell(s) failed (status in their metrics.json): "
              f"{', '.join(_failed_runs)}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
