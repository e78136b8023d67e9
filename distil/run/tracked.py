"""A run's experiment tracking (the tracking group; distil/common/tracking.py): the tracker it opens, and
what it logs once the run is done. The epochs are logged by the training loop itself."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

from distil.common import distributed
from distil.common.tracking import KINDS, Tracker, open_tracker
from distil.config.schema import Config
from distil.errors import check_choice

TENSORBOARD_DIR = "tensorboard"  # tracking=tensorboard with tracking.dir null: <run dir>/tensorboard


def run_tracker(cfg: Config, run_dir: Path) -> Tracker:
    """The run's tracker, the composed config logged to it. Rank 0's alone: every other rank of a
    torchrun run gets the no-op one (they train alike, and one record of the run is enough)."""
    settings = cfg.tracking
    check_choice("tracking.kind", settings.kind, KINDS)  # on every rank, so that all stop alike
    if settings.kind == "none" or not distributed.is_main():
        return Tracker()
    directory = settings.dir
    if directory is None:
        directory = run_dir / TENSORBOARD_DIR if settings.kind == "tensorboard" else Path(cfg.paths.outputs) / "mlruns"
    tracker = open_tracker(settings.kind, directory, settings.experiment, run_name(run_dir),
                           tags={"distil.run_dir": str(run_dir.resolve())})
    try:
        tracker.log_params(OmegaConf.to_container(cfg, resolve=True))
    except BaseException:
        tracker.close("failed")  # not yet under tracking.use, which closes it from here on
        raise
    return tracker


def run_name(run_dir: Path) -> str:
    """outputs/runs/<date>/<time> -> "<date>/<time>"; a sweep's cell: "<time>/<cell>"."""
    return "/".join(run_dir.parts[-2:])


def log_outcome(tracker: Tracker, metrics: dict, run_dir: Path) -> None:
    """A finished run's final scores (metrics.json's), and its saved student folder(s) as artifacts."""
    tracker.log_metrics(final_scores(metrics))
    for folder in sorted(run_dir.glob("student*")):  # student/, or student-<lang>/ per language (D0)
        if folder.is_dir():
            tracker.log_artifact(folder)


def final_scores(metrics: dict) -> dict[str, float]:
    """`<model>/<split>/<score>` of metrics.json's student and teacher on dev, test and every extra test
    split: each number of those records (a per-language breakdown is left to metrics.json)."""
    scores = {}
    for model in ("student", "teacher"):
        for split in ("dev", "test", *metrics.get("extra_tests", [])):
            for name, value in metrics[model].get(split, {}).items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    scores[f"{model}/{split}/{name}"] = float(value)
    return scores
