"""Experiment tracking: what a run logs to TensorBoard or MLflow (`tracking=tensorboard|mlflow`; off by default).

A run opens one tracker for its whole length (`use`, in distil/run/pipeline.py); the code that trains
reads the active one (`current`) rather than a parameter threaded through every stage, as it reads the
runtime (distil/common/runtime.py). Outside a run (a test calling `fit`, `distil pretrain`), with
tracking=none, and on every rank but 0 (distil.common.distributed) the tracker is the no-op `Tracker`,
so the training loop logs unconditionally and costs nothing when nothing listens.

What a run logs:
- the composed config (`log_params`): MLflow's params, flattened (`teacher.finetune.lr`), and
  config.yaml as an artifact; TensorBoard's text tab;
- each epoch of every training stage (`log_epoch`): `<stage>/train_loss` and `<stage>/dev`, the
  epoch as the step;
- the final scores (`log_metrics`) and, on MLflow, the saved student folder (`log_artifact`).

Each backend's package is imported only when it is chosen: a run without tracking loads neither.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
import logging
import math
import os
import re
import time
from collections.abc import Iterator, Mapping
from numbers import Real
from pathlib import Path
from typing import Any

from distil.errors import DistilError, check_choice

log = logging.getLogger(__name__)

KINDS = ("none", "tensorboard", "mlflow")
# the PyPI package that provides each backend (`make install` installs both: the `tracking` extra)
PACKAGES = {"tensorboard": "tensorboard", "mlflow": "mlflow-skinny"}
MLFLOW_PARAM_LENGTH = 6000  # MLflow's longest param value; the whole config is in config.yaml beside them
MLFLOW_BATCH = 100  # MLflow's most params in one log_batch call


class Tracker:
    """Logs nothing: tracking=none, and every rank but 0. The backends below override what they log."""

    def log_params(self, params: Mapping[str, Any]) -> None:
        """The composed config, as nested plain data."""

    def log_epoch(self, stage: str, epoch: int, metrics: Mapping[str, Any]) -> None:
        """One epoch of a training stage: each metric as `<stage>/<name>`, the epoch as its step."""
        prefix = metric_name(stage)
        self.log_metrics({f"{prefix}/{name}": value for name, value in metrics.items()}, step=epoch)

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        """Numbers by name; what is not a number (None: no held-out loss that time) is left out."""

    def log_artifact(self, path: Path) -> None:
        """A file or folder kept with the run, under its own name."""

    def close(self, status: str = "finished") -> None:
        """The run is over: `status` finished, failed or killed."""


class TensorBoardTracker(Tracker):
    """Event files for TensorBoard in `directory` (torch's SummaryWriter): scalars and the config as text."""

    def __init__(self, directory: Path):
        tensorboard = backend("tensorboard", "torch.utils.tensorboard")
        self.directory = Path(directory)
        self.writer = tensorboard.SummaryWriter(log_dir=str(self.directory))

    def log_params(self, params: Mapping[str, Any]) -> None:
        # TensorBoard renders text as markdown: indented, the YAML reads as a code block
        self.writer.add_text("config", "\n".join(f"    {line}" for line in config_yaml(params).splitlines()))

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        for name, value in numbers(metrics).items():
            self.writer.add_scalar(name, value, step)

    def close(self, status: str = "finished") -> None:
        self.writer.close()


class MlflowTracker(Tracker):
    """One MLflow run in experiment `experiment` of the tracking store at `uri` (a local folder by
    default: MLflow's file store, no server), through MlflowClient (no global active run)."""

    def __init__(self, uri: str, experiment: str, run_name: str | None = None, tags: Mapping[str, str] | None = None):
        if uri.startswith("file:"):
            # MLflow 3 keeps its file store behind an opt-in (it would rather have a database); the file
            # store is what needs no server and no extra package, and it reads back as before
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        tracking = backend("mlflow", "mlflow.tracking")
        self.entities = importlib.import_module("mlflow.entities")
        self.client = tracking.MlflowClient(tracking_uri=uri)
        run = self.client.create_run(experiment_id(self.client, experiment), run_name=run_name, tags=dict(tags or {}))
        self.run_id = run.info.run_id

    def log_params(self, params: Mapping[str, Any]) -> None:
        Param = self.entities.Param
        flat = [Param(metric_name(key), str(value)[:MLFLOW_PARAM_LENGTH]) for key, value in flatten(params).items()]
        for start in range(0, len(flat), MLFLOW_BATCH):
            self.client.log_batch(self.run_id, params=flat[start:start + MLFLOW_BATCH])
        self.client.log_text(self.run_id, config_yaml(params), "config.yaml")

    def log_metrics(self, metrics: Mapping[str, Any], step: int = 0) -> None:
        now = int(time.time() * 1000)
        rows = [self.entities.Metric(metric_name(name), value, now, step) for name, value in numbers(metrics).items()]
        if rows:
            self.client.log_batch(self.run_id, metrics=rows)

    def log_artifact(self, path: Path) -> None:
        path = Path(path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), path.name)
        else:
            self.client.log_artifact(self.run_id, str(path))

    def close(self, status: str = "finished") -> None:
        self.client.set_terminated(self.run_id, status.upper())


def open_tracker(kind: str, directory: str | Path | None = None, experiment: str = "distil",
                 run_name: str | None = None, tags: Mapping[str, str] | None = None) -> Tracker:
    """A tracker of `kind` (none, tensorboard, mlflow) writing to `directory`: TensorBoard's event folder,
    or MLflow's store (a folder, or a tracking URI such as sqlite:///mlflow.db)."""
    check_choice("tracking.kind", kind, KINDS)
    if kind == "none":
        return Tracker()
    if directory is None:
        raise DistilError(f"tracking={kind} needs tracking.dir: the folder it writes to")
    if kind == "tensorboard":
        return TensorBoardTracker(Path(directory))
    return MlflowTracker(store_uri(str(directory)), experiment, run_name, tags)


def backend(kind: str, module: str) -> Any:
    """The backend's module, imported now (a run without tracking never loads it), or one clear line."""
    try:
        return importlib.import_module(module)
    except ImportError:  # torch.utils.tensorboard raises its own ImportError without tensorboard
        package = PACKAGES[kind]
        raise DistilError(f"tracking={kind} needs the {package} package, which is not installed: "
                          f"pip install {package} (make install includes it), or run with tracking=none") from None


def store_uri(directory: str) -> str:
    """MLflow's tracking URI: a URI as given, else the folder's file: URI (absolute, so it reads the same
    from any working directory)."""
    return directory if "://" in directory else Path(directory).resolve().as_uri()


def experiment_id(client: Any, name: str) -> str:
    """The id of MLflow experiment `name`, created if missing (by whichever run of a sweep comes first)."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    try:
        return client.create_experiment(name)
    except Exception:  # noqa: BLE001 - another run created it in between: read it back, or raise
        found = client.get_experiment_by_name(name)
        if found is None:
            raise
        return found.experiment_id


def metric_name(name: str) -> str:
    """`name` in the characters MLflow allows in a name (letters, digits, _ - . space : /): a stage's
    label "d1 S1 (ce+soft_ce)" becomes "d1 S1 ce-soft_ce". TensorBoard gets the same names."""
    name = re.sub(r"[()\[\]{}]", "", name)
    return re.sub(r"[^\w\-. :/]+", "-", name).strip()


def numbers(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The entries that are numbers, as floats (a teacher's dev score is a float subclass, numpy's scalars count)."""
    return {name: float(value) for name, value in metrics.items()
            if isinstance(value, Real) and not isinstance(value, bool)}


def flatten(params: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts and lists of dicts as dotted keys (`schedule.stages.0.losses.ce`); a list of plain
    values stays one value."""
    flat = {}
    for key, value in params.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, f"{name}."))
        elif isinstance(value, list | tuple) and any(isinstance(item, Mapping) for item in value):
            flat.update(flatten({str(i): item for i, item in enumerate(value)}, f"{name}."))
        else:
            flat[name] = value
    return flat


def config_yaml(params: Mapping[str, Any]) -> str:
    import yaml  # Hydra's own dependency

    return yaml.safe_dump(_plain(params), sort_keys=False)


def _plain(value: Any) -> Any:
    """`value` in YAML's safe types: a number that is not finite, or an object, as text."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value)):
        return value
    return str(value)


NONE = Tracker()
_active: contextvars.ContextVar[Tracker] = contextvars.ContextVar("distil_tracker", default=NONE)


def current() -> Tracker:
    """The tracker of the run going on now (the no-op one outside a run)."""
    return _active.get()


@contextlib.contextmanager
def use(tracker: Tracker) -> Iterator[Tracker]:
    """Make `tracker` the active one for a block (a run's whole length), and close it after, however the
    block ends: what was logged until a failure is kept, and the run is marked failed (or killed, on
    Ctrl-C or SIGTERM)."""
    token = _active.set(tracker)
    try:
        yield tracker
    except BaseException as error:
        _close_quietly(tracker, "failed" if isinstance(error, Exception) else "killed")
        raise
    else:
        tracker.close("finished")
    finally:
        _active.reset(token)


def _close_quietly(tracker: Tracker, status: str) -> None:
    """Close after a failure: a tracker that cannot close must not hide the error that ended the run."""
    try:
        tracker.close(status)
    except Exception as error:  # noqa: BLE001 - logged; the run's own error is the one raised
        log.warning("tracking: could not close the run as %s: %s", status, error)
