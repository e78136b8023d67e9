"""The search: an Optuna multi-objective study (dev score up, latency down) whose trials are table cells.

The study lives in `<search dir>/study.db` (SQLite), named by the preset and a hash of its content
(SearchPreset.study_name), so the same command resumes it and several `distil search` processes on one
directory are workers of one study: they share its trials through the database and each cell through
its lock (distil.tables.run.cell_lock), so a cell two trials name trains once. A trial left RUNNING by a
worker that died (killed, its machine rebooted) is marked failed when a worker starts or asks for the
next trial, and its choices are queued again: its cell, finished or half-trained, is reused.

A trial: pick the choices (distil.search.space); with a limit set, predict the student's size and
latency untrained (distil.search.probe) and prune the trial if it breaks one, before anything trains;
train its cell (distil.tables.run.run_cell, as `distil table` does); time it against the reference
(distil.search.latency) and read its dev score, the deployed form's own for an ONNX backend.
"""

from __future__ import annotations

import datetime
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from distil.common.libraries import offline_hubs, quiet_libraries
from distil.common.runtime import share_of_cores
from distil.config.overrides import CONFIG_DIR_ENV
from distil.errors import DistilError
from distil.search.latency import FORMS, Served, reference_ms, relative_ms, served
from distil.search.preset import SearchPreset
from distil.search.probe import predicted, probe_folder, record_prediction, task_data
from distil.search.saved_study import restore
from distil.search.space import Choice, cell_of, check_space, reference_cell, suggest
from distil.serve.student import SavedStudent
from distil.store.admin import build_lock
from distil.tables.cells import cell_dir, compose_cell, read_result
from distil.tables.preset import Cell
from distil.tables.run import CodeChanged, Workers, cell_lock, code_at_start, run_cell
from distil.tables.timing import Timed, deployed_scores, texts_of

STUDY_FILE = "study.db"
PROBES = "probes"
WORKER = "worker"  # a trial's user attribute: host:pid of the process running it
KILLED = "killed"  # set on a trial marked failed because its worker died: it does not count as ended
WAIT_SECONDS = 5  # how often a worker looks again at a cell another worker trains
START_GRACE_SECONDS = 60  # a RUNNING trial without a worker yet is one being asked for, until this old


@dataclass
class Context:
    """What every trial of one process reads: the reference student as timed, the dev split and texts."""

    preset: SearchPreset
    search_dir: Path
    root: Path  # the outputs directory holding cells/ and locks/
    reference: Timed
    reference_median: float
    task: object
    dev: object  # the dev split as read: scores an exported form
    test: object  # the test split: only the Pareto set's, after the search (distil.search.report)
    label_names: list[str]
    texts: list[str]
    saved_reference: SavedStudent
    extra: tuple[str, ...] = ()  # overrides that change no result (trainer.threads with --jobs)
    say: Callable[[str], None] = print
    # one timing at a time in a process: two trials timed at once would share the cores
    timing: threading.Lock = field(default_factory=threading.Lock)
    workers: Workers | None = None  # with --jobs: an interrupt stops every trial's cell, and no worker asks again


def open_study(preset: SearchPreset, search_dir: Path):
    """(study, storage): the preset's study in the search directory's SQLite file, created or loaded."""
    import warnings

    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    search_dir.mkdir(parents=True, exist_ok=True)
    storage = optuna.storages.RDBStorage(f"sqlite:///{(search_dir / STUDY_FILE).resolve()}")
    with warnings.catch_warnings():  # multivariate TPE over conditional parameters (group) is "experimental"
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = (optuna.samplers.NSGAIISampler(seed=preset.seed) if preset.sampler == "nsga2"
                   else optuna.samplers.TPESampler(seed=preset.seed, multivariate=True, group=True))
    study = optuna.create_study(storage=storage, study_name=preset.study_name, sampler=sampler,
                                directions=["maximize", "minimize"], load_if_exists=True)
    return study, storage


def ended(trials) -> int:
    """Trials that count towards --trials: finished, pruned, or failed on their own (not killed)."""
    from optuna.trial import TrialState

    return sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED)
               or (t.state == TrialState.FAIL and not t.user_attrs.get(KILLED)) for t in trials)


def running(trials) -> int:
    """Trials other workers are running (a queued one, WAITING, is the next ask's: not counted)."""
    from optuna.trial import TrialState

    return sum(t.state == TrialState.RUNNING for t in trials)


def this_worker() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def alive(worker: str | None, started: datetime.datetime | None) -> bool:
    """Whether a RUNNING trial's worker still runs; one on another host is taken to (it cannot be seen)."""
    if worker is None:  # between ask and its worker attribute: only a moment
        return started is not None and (datetime.datetime.now() - started).total_seconds() < START_GRACE_SECONDS
    host, _, pid = worker.rpartition(":")
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        return True
    return True


def release_dead(study, storage) -> list[int]:
    """Mark the trials of dead workers failed (killed: not counted) and queue their choices again."""
    from optuna.trial import TrialState

    released = []
    study_id = storage.get_study_id_from_name(study.study_name)
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if alive(trial.user_attrs.get(WORKER), trial.datetime_start):
            continue
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, trial.number)
        storage.set_trial_user_attr(trial_id, KILLED, True)
        storage.set_trial_state_values(trial_id, TrialState.FAIL)
        study.enqueue_trial(dict(trial.params), user_attrs={"retry_of": trial.number})
        released.append(trial.number)
    return released


def finished_here(root: Path, key: str) -> dict | None:
    """A cell's metrics when it finished in this outputs directory, else None. Not a table's tracked record
    of another machine's run (distil.tables.ledger): a trial serves and times the cell's student folder."""
    metrics, error = read_result(cell_dir(root, key) / "metrics.json")
    return metrics if error is None and (cell_dir(root, key) / "student").is_dir() else None


def ensure_cell(cell: Cell, root: Path, extra: tuple[str, ...] = (), workers: Workers | None = None) -> str | None:
    """Train the cell unless it finished here; wait while another worker trains it. Its error, or None."""
    while True:
        if finished_here(root, cell.key) is not None:
            return None
        with cell_lock(root, cell.key) as ours:
            if ours:
                if finished_here(root, cell.key) is not None:  # finished by another worker meanwhile
                    return None
                error = run_cell(cell, root, extra, workers)[1]
                if workers is not None:
                    workers.check()  # interrupted, not failed: the trial stays running, to be queued again
                return error
        time.sleep(WAIT_SECONDS)


def prepare(preset: SearchPreset, search_dir: Path, root: Path, jobs: int = 1,
            say: Callable[[str], None] = print) -> Context:
    """Check the space, train the reference cell, read the dev split, measure the reference's latency."""
    offline_hubs()
    quiet_libraries()
    check_space(preset)
    reference = reference_cell(preset)
    extra = (f"trainer.threads={share_of_cores(jobs)}",) if jobs > 1 else ()
    say(f"reference [{' '.join(preset.reference)}]: cell {reference.key}")
    error = ensure_cell(reference, root, extra)
    if error is not None:
        raise DistilError(f"the reference student's cell failed ({error}); see {cell_dir(root, reference.key)}")
    form = served(cell_dir(root, reference.key) / "student", "eager", preset.threads)
    cfg = compose_cell(reference.overrides, os.environ.get(CONFIG_DIR_ENV), f"search preset {preset.name}")
    cfg.paths.outputs = str(root)
    data = task_data(cfg)
    texts = texts_of(data.splits["dev"])
    median = reference_ms(search_dir / f"reference-{reference.key}-{preset.latency}-{preset.threads}.json",
                          form.timed, texts, preset.latency, preset.threads)
    say(f"reference latency: {median:.3f} ms per text ({preset.latency} on {len(texts)} dev texts, torch threads: "
        f"{preset.threads}); every trial's is its ratio to the reference times this")
    return Context(preset, search_dir, root, form.timed, median, data.task, data.splits["dev"], data.splits["test"],
                   data.label_names, texts, form.student.saved, extra, say)


def run_search(preset: SearchPreset, search_dir: Path, root: Path, jobs: int = 1,
               say: Callable[[str], None] = print, saved: Path | None = None) -> tuple[object, Context]:
    """Run trials until the study has `preset.trials` ended; (the study, the context its report reads).
    `saved`: a recorded study (distil.search.saved_study) loaded first where the directory has none."""
    code_at_start()
    ctx = prepare(preset, search_dir, root, jobs, say)
    study, storage = open_study(preset, search_dir)
    if saved is not None and (restored := restored_once(study, saved, search_dir)):
        say(f"resumed {restored} trial(s) of study {preset.study_name} from its record, {saved}")
    # a resumed search or another worker starts its sampler elsewhere: no repeat of the first choices
    if study.get_trials(deepcopy=False):
        study.sampler.reseed_rng()
    ask = threading.Lock()

    def worker() -> None:
        while ctx.workers is None or not ctx.workers.stopping.is_set():
            with ask:
                for number in release_dead(study, storage):
                    say(f"trial {number}: its worker died; marked failed, its choices queued again")
                trials = study.get_trials(deepcopy=False)
                if ended(trials) + running(trials) >= preset.trials:
                    return
                trial = study.ask()
                trial.set_user_attr(WORKER, this_worker())
                choice = suggest(trial, preset)
            run_trial(study, trial, choice, ctx)

    if jobs <= 1:
        worker()
    else:
        ctx.workers = Workers()
        ctx.workers.run(jobs, worker)
    return study, ctx


def restored_once(study, saved: Path, search_dir: Path) -> int:
    """Load the record into an empty study (distil.search.saved_study.restore) under the search
    directory's restore lock: workers started together on a new machine load it once, not each."""
    while True:
        with build_lock(search_dir, "restore") as ours:
            if ours:
                return restore(study, saved)  # it checks, under the lock, that the study is still empty
        time.sleep(1)


WALL, INVOCATIONS = "wall_seconds", "invocations"  # the study's own record of the time its commands took


def add_wall(study, seconds: float) -> tuple[float, int]:
    """Add one command's wall time to the study's (a resumed search adds each of its commands; parallel
    workers each add their own); (the total, how many commands it sums)."""
    total = study.user_attrs.get(WALL, 0.0) + seconds
    invocations = study.user_attrs.get(INVOCATIONS, 0) + 1
    study.set_user_attr(WALL, total)
    study.set_user_attr(INVOCATIONS, invocations)
    return total, invocations


def trial_seconds(trials) -> float:
    """The ended trials' own time, start to end; a killed one is left out (its end is when a later command
    found it dead, not when it stopped)."""
    return sum((t.datetime_complete - t.datetime_start).total_seconds() for t in trials
               if t.datetime_start is not None and t.datetime_complete is not None and not t.user_attrs.get(KILLED))


def counts(trials) -> dict[str, int]:
    by_state: dict[str, int] = {}
    for trial in trials:
        name = "killed" if trial.user_attrs.get(KILLED) else trial.state.name.lower()
        by_state[name] = by_state.get(name, 0) + 1
    return by_state


def run_trial(study, trial, choice: Choice, ctx: Context) -> None:
    """Predict, prune or train, time and score one trial, and tell the study. A trial whose probe, run or
    export fails is failed, and the search goes on."""
    from optuna.trial import TrialState

    preset = ctx.preset
    cell = cell_of(preset, choice.overrides, f"trial {trial.number}")
    name = f"trial {trial.number} [{' '.join(choice.overrides)} backend={choice.backend}]"
    trial.set_user_attr("cell", cell.key)
    trial.set_user_attr("overrides", list(choice.overrides))
    try:
        broken = over_limits(cell, choice, ctx, trial) if any(v is not None for v in preset.limits.values()) else None
        if broken:
            ctx.say(f"{name}: pruned before training ({broken})")
            trial.set_user_attr("pruned", broken)
            study.tell(trial, state=TrialState.PRUNED)
            return
        ctx.say(f"{name}: " + (f"cell {cell.key} done (reused)" if finished_here(ctx.root, cell.key) is not None
                               else f"training cell {cell.key}"))
        error = ensure_cell(cell, ctx.root, ctx.extra, ctx.workers)
        if error is not None:
            raise DistilError(f"its run failed: {error}")
        metrics = finished_here(ctx.root, cell.key)
        with ctx.timing:
            form = served(cell_dir(ctx.root, cell.key) / "student", choice.backend, preset.threads)
            ms, ratio = relative_ms(form.timed, ctx.reference, ctx.texts, preset.latency, ctx.reference_median,
                                    preset.threads)
            score = dev_score(metrics, form, ctx)
    except CodeChanged:
        raise  # every later trial would fail the same way: the command stops, the trial resumes next time
    except DistilError as error:
        ctx.say(f"{name}: failed ({error})")
        trial.set_user_attr("error", str(error))
        study.tell(trial, state=TrialState.FAIL)
        return
    size = form.size_mb()
    for key, value in {"dev": score, "ms": ms, "ratio": ratio, "size_mb": size, "metric": metrics["metric"],
                       "params": metrics["student"].get("params")}.items():
        trial.set_user_attr(key, value)
    ctx.say(f"{name}: dev {metrics['metric']} {score:.4f}, {ms:.3f} ms ({ratio:.2f}x the reference), {size:.2f} MB")
    study.tell(trial, [score, ms])


def dev_score(metrics: dict, form: Served, ctx: Context) -> float:
    """The dev split's selection metric of the student as served: the run's own for the eager student,
    the exported graph's (scored as the run scores) for an ONNX backend: int8 predicts differently."""
    metric = metrics["metric"]
    if form.backend == "eager":
        scores = metrics["student"]["dev"]
    else:
        scores = deployed_scores(form.student, ctx.task, ctx.dev, ctx.label_names)[FORMS[form.backend]]
    if metric not in scores:
        raise DistilError(f"the dev scores {sorted(scores)} lack the task's selection metric {metric!r}")
    return float(scores[metric])


def over_limits(cell: Cell, choice: Choice, ctx: Context, trial) -> str | None:
    """Which limit the untrained student breaks (None: none), from its size and latency as served."""
    preset = ctx.preset
    cfg = compose_cell(cell.overrides, os.environ.get(CONFIG_DIR_ENV), f"search preset {preset.name}")
    cfg.paths.outputs = str(ctx.root)
    with ctx.timing:
        folder = probe_folder(cfg, ctx.saved_reference, ctx.search_dir / PROBES)
        values = predicted(folder, choice.backend)
        if values is None:
            form = served(folder, choice.backend, preset.threads)
            ms, _ = relative_ms(form.timed, ctx.reference, ctx.texts, preset.latency, ctx.reference_median,
                                preset.threads)
            values = {"ms": ms, "size_mb": form.size_mb()}
            record_prediction(folder, choice.backend, values)
    trial.set_user_attr("predicted_ms", values["ms"])
    trial.set_user_attr("predicted_mb", values["size_mb"])
    broken = []
    if preset.limits["max_latency_ms"] is not None and values["ms"] > preset.limits["max_latency_ms"]:
        broken.append(f"predicted {values['ms']:.3f} ms > {preset.limits['max_latency_ms']} ms")
    if preset.limits["max_size_mb"] is not None and values["size_mb"] > preset.limits["max_size_mb"]:
        broken.append(f"predicted {values['size_mb']:.2f} MB > {preset.limits['max_size_mb']} MB")
    return "; ".join(broken) or None
