"""`distil [run] key=value ...`: the Hydra app, a thin entry point around pipeline.run (the default of
the `distil` command, distil/cli/main.py)."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import HydraException
from hydra.types import RunMode
from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from distil.common import distributed
from distil.common.atomic import write_json_atomic
from distil.common.diskspace import disk_full, disk_full_message
from distil.common.interrupt import Terminated, exit_on_interrupt
from distil.common.parent import stop_with_parent
from distil.config.compose import hydra_problem
from distil.config.run_dir import CREATED, register_run_dir_resolver, unwritable_outputs
from distil.config.schema import CONF_DIR, register_configs
from distil.errors import DistilError
from distil.run.sweep import FAILED_CELLS, INTERRUPTED_STATUS

register_configs()
register_run_dir_resolver()

# Ranks other than 0 of a torchrun run write no file in the run directory (no .hydra/, no distil.log):
# rank 0 writes them all, and the others print warnings and errors only.
QUIET_RANK = ("hydra.output_subdir=null", "hydra/job_logging=disabled")
# Launchers that run a sweep's cells as jobs of their own, and raise when a job dies without a result.
LAUNCHERS = ("submitit", "ray")
PEER_STOPPED = ("another process of this run stopped with an error (its line is above; torchrun's report "
                "names its rank)")
UNEXPECTED_EXIT = 1  # a bug (bad input exits 2): the traceback is in the run's log
# Space set aside in the run directory while it runs: on a disk that fills, letting it go makes room for the
# failed metrics.json (a few hundred bytes; 16 KiB covers a long override list and the disk's blocks).
RESERVE = ".metrics.json.reserve"
RESERVE_BYTES = 16 * 1024
# The student the dataset's task chose for this invocation (distil/config/task_student.py), if it chose one.
CHOSEN_FOR_TASK: dict[str, str] = {}
INTERRUPTED = ("distil: interrupted; rerun the same command to continue (finished teachers and cached targets "
               "are reused)")


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _run(cfg: DictConfig) -> float | None:
    from distil.config.overrides import replace_files_map
    from distil.run import pipeline  # heavy imports (torch, transformers) only when running
    from distil.run.display import print_run
    from distil.run.sweep import dev_score, skip_finished_cell

    hydra_cfg = HydraConfig.get()
    run_dir = Path(hydra_cfg.runtime.output_dir)
    overrides = list(hydra_cfg.overrides.task)
    replace_files_map(cfg, overrides)
    if (finished := skip_finished_cell(run_dir, overrides)) is not None:  # a re-run sweep's done cell
        return dev_score(finished)
    choices = {group: hydra_cfg.runtime.choices.get(group)
               for group in ("teacher", "student", "schedule", "dataset", "transfer_size", "augment")}
    # The user's name, not the borrowed option (`dataset=mrpc dataset.name=rte` is rte).
    choices["dataset"] = cfg.dataset.name
    choices["seed"] = cfg.seed
    if CHOSEN_FOR_TASK.get("student") == choices["student"]:
        from distil.config.task_student import note

        logging.getLogger(__name__).info(note(choices["student"]))
        choices["student_chosen_by"] = "task"  # not the user: the task's default student (metrics.json)

    def fail(reason: str, line: str, code: int) -> None:
        """metrics.json says why; a single run exits, a sweep records the cell and goes on. Under
        torchrun rank 0 writes metrics.json, and a rank whose error is its own also tells it."""
        if distributed.is_main():
            write_failed_metrics(run_dir, {"status": f"failed: {reason}", "choices": choices, "overrides": overrides})
            print(line, file=sys.stderr)
        else:
            distributed.before_reporting()
            print(line.replace("distil: error:", f"distil: error (rank {distributed.rank()}):", 1), file=sys.stderr)
        if hydra_cfg.mode != RunMode.MULTIRUN:
            sys.exit(code)  # in a sweep the cell is recorded and the others go on (SweepFailures)

    try:
        if distributed.is_main():
            reserve_space(run_dir)
        metrics = pipeline.run(cfg, run_dir, choices, overrides)
    except DistilError as error:
        return fail(str(error), f"distil: error: {error}", 2)
    except (KeyboardInterrupt, Terminated):
        if distributed.is_main():
            write_failed_metrics(run_dir, {"status": INTERRUPTED_STATUS, "choices": choices, "overrides": overrides})
        raise  # stops a sweep too: main prints the one line
    except Exception as error:
        if disk_full(error):  # not a bug: the disk (or quota) ran out, and the user can fix that
            reason = disk_full_message(error, run_dir)
            return fail(reason, f"distil: error: {reason}", 2)
        if distributed.peer_stopped(error):  # another rank's error, told by that rank
            if not distributed.is_main():
                sys.exit(2)
            return fail(PEER_STOPPED, f"distil: error: {PEER_STOPPED}", 2)
        # a bug, not bad input: one line here, the traceback in the run's log
        reason = f"unexpected {type(error).__name__}: {error}"
        return fail(reason, f"distil: error: {reason} (traceback in {log_traceback(run_dir)}); please report it",
                    UNEXPECTED_EXIT)
    finally:
        release_space(run_dir)
    try:
        if distributed.is_main():
            print_run(metrics)
            print(f"metrics: {run_dir / 'metrics.json'}")
    except BrokenPipeError:  # stdout piped to `head`: the run is done and its metrics.json written
        silence_stdout()
    return metrics["student"]["dev"][metrics["metric"]]  # sweepers optimise dev, never test


def reserve_space(run_dir: Path) -> None:
    """Set RESERVE_BYTES aside in the run directory, so that a run failing on a full disk can still say why
    (write_failed_metrics). A disk too full for it already gets nothing reserved: the run fails soon enough."""
    path = run_dir / RESERVE
    try:
        path.write_bytes(bytes(RESERVE_BYTES))
    except OSError:
        release_space(run_dir)


def release_space(run_dir: Path) -> None:
    with contextlib.suppress(OSError):
        (run_dir / RESERVE).unlink(missing_ok=True)


def write_failed_metrics(run_dir: Path, payload: dict) -> None:
    """metrics.json of a run that did not finish, on any disk that held its run directory: whole if it fits;
    on a full disk, whole again after the reserved space is let go; else its status alone, written in place
    of the file there (no second file). A disk with no room even for that leaves the one line on the terminal."""
    path = run_dir / "metrics.json"
    for attempt in ("whole", "after the reserve", "status alone"):
        try:
            if attempt == "status alone":
                path.write_text(json.dumps({"status": payload["status"]}))
            else:
                write_json_atomic(path, payload)
            return
        except OSError as error:
            if not disk_full(error):
                raise
            release_space(run_dir)
    with contextlib.suppress(OSError):
        path.unlink(missing_ok=True)  # never a torn metrics.json: absent says as much as "failed"


def log_traceback(run_dir: Path) -> Path:
    """The exception being handled, with its traceback, in the run's log file only (Hydra's job log,
    run_dir/distil.log): the terminal gets one line that points there."""
    record = logging.makeLogRecord({"name": __name__, "levelno": logging.ERROR, "levelname": "ERROR",
                                    "msg": "unexpected error", "exc_info": sys.exc_info()})
    files = [h for h in logging.getLogger().handlers if isinstance(h, logging.FileHandler)]
    for handler in files:
        handler.handle(record)
    if files:
        return Path(files[0].baseFilename)
    path = run_dir / "distil.log"  # no job logging configured (hydra/job_logging=none)
    with path.open("a") as log:
        traceback.print_exc(file=log)
    return path


def remove_empty_sweep_dirs() -> None:
    """A sweep whose cells do not compose fails before any cell runs: the sweep directory it created
    holds only Hydra's multirun.yaml, and goes (a directory holding a cell's output stays)."""
    for directory in CREATED:
        if directory.is_dir() and {p.name for p in directory.iterdir()} <= {"multirun.yaml"}:
            (directory / "multirun.yaml").unlink(missing_ok=True)
            directory.rmdir()
            with contextlib.suppress(OSError):  # the day's folder, unless another run holds something there
                directory.parent.rmdir()


def silence_stdout() -> None:
    """The reader of our stdout went away: send the rest of the output, and the flush at exit, nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main() -> None:
    """`distil [run] key=value ...` (sys.argv): every ending is one line on the terminal, never a traceback."""
    full_error = "HYDRA_FULL_ERROR" in os.environ  # the user asked for Hydra's own report
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises its errors, and they are written as one line here
    raise_exceptions, logging.raiseExceptions = logging.raiseExceptions, False  # a log line to a closed pipe is dropped
    CREATED.clear()  # this invocation's directories only
    try:
        with exit_on_interrupt(INTERRUPTED):
            stop_with_parent()  # a table's cell: interrupted (resumable) if the table dies, even by kill -9
            _main()
    except (HydraException, OmegaConfBaseException) as error:  # a value Hydra cannot compose or merge
        if full_error:
            raise
        remove_empty_sweep_dirs()
        print(f"distil: error: {hydra_problem(error, sys.argv[1:])}", file=sys.stderr)
        sys.exit(2)
    except BrokenPipeError:  # `distil --help | head`
        silence_stdout()
        sys.exit(141)
    except OSError as error:  # Hydra's own setup (an explicit hydra.run.dir, its log file): the run catches its own
        if full_error:
            raise
        if disk_full(error):
            fail_disk_full(error)
        print(f"distil: error: {unwritable_outputs(error)}", file=sys.stderr)
        sys.exit(2)
    finally:
        logging.raiseExceptions = raise_exceptions
        if not full_error:
            os.environ.pop("HYDRA_FULL_ERROR", None)


def fail_disk_full(error: OSError) -> None:
    """A disk that filled while Hydra set up the run directory (.hydra/, distil.log): the one line, and a
    failed metrics.json there if it holds one."""
    message = disk_full_message(error)
    if (run_dir := hydra_run_dir()) is not None:
        with contextlib.suppress(OSError):
            write_failed_metrics(run_dir, {"status": f"failed: {message}"})
    print(f"distil: error: {message}", file=sys.stderr)
    sys.exit(2)


def hydra_run_dir() -> Path | None:
    """The run directory Hydra made for this run, if it got that far."""
    try:
        run_dir = Path(HydraConfig.get().runtime.output_dir)
    except Exception:  # noqa: BLE001 - Hydra not set up, or not that far: no run directory
        return None
    return run_dir if run_dir.is_dir() else None


def _main() -> None:
    from distil.config.overrides import CONFIG_DIR_ENV, check_overrides, with_config_dir_env

    FAILED_CELLS.clear()  # one invocation's sweep failures only
    CHOSEN_FOR_TASK.clear()
    args = with_config_dir_env(sys.argv[1:], os.environ.get(CONFIG_DIR_ENV))
    problem = check_overrides(args, CONF_DIR)
    if problem:
        print(f"distil: error: {problem}", file=sys.stderr)
        sys.exit(2)
    several = distributed.launched()  # torchrun: torch is imported only then
    if several:
        try:
            distributed.init_from_env()  # the processes join before Hydra picks the run directory
        except DistilError as error:
            print(f"distil: error: {error}", file=sys.stderr)
            sys.exit(2)
        if not distributed.is_main():
            args = [*args, *QUIET_RANK]
    try:
        args = [*args, *task_default_student(args)]
    except DistilError as error:
        print(f"distil: error: {error}", file=sys.stderr)
        sys.exit(2)
    sys.argv[1:] = args  # Hydra reads sys.argv: DISTIL_CONFIG_DIR is now a hydra.searchpath entry
    try:
        _run()
    except Exception as error:
        if not type(error).__module__.startswith(LAUNCHERS):
            raise
        # a cell's job died before it wrote its metrics.json (killed, out of memory): the launcher raises
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        print(f"distil: error: a sweep cell's job ended without a result ({type(error).__name__}: {first}); "
              "its log is in the sweep directory's .submitit/ (or the launcher's own logs); rerun the same "
              "command into the same hydra.sweep.dir to run it again", file=sys.stderr)
        sys.exit(2)
    finally:
        if several:
            distributed.shutdown()
    if FAILED_CELLS:
        print(f"distil: error: {len(FAILED_CELLS)} sweep cell(s) failed (status in their metrics.json): "
              f"{', '.join(FAILED_CELLS)}", file=sys.stderr)
        sys.exit(2)


def task_default_student(args: list[str]) -> list[str]:
    """[`student=<the task's default>`] where the dataset's task has a default student that nothing chose
    (distil/config/task_student.py), else []: a sweep gets it when every cell would. Records the choice in
    CHOSEN_FOR_TASK. Arguments that do not compose add nothing: Hydra reports them as it composes."""
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
    from hydra._internal.utils import get_args_parser
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from distil.config.compose import task_student_for

    parsed, _ = get_args_parser().parse_known_args(args)
    if any(override.lstrip("+").partition("=")[0] == "student" for override in parsed.overrides):
        return []  # chosen on the command line: nothing to compose (a run starts ~0.15 s sooner)
    try:
        cells = (BasicSweeper.split_arguments(OverridesParser.create().parse_overrides(parsed.overrides), None)[0]
                 if parsed.multirun else [parsed.overrides])
        added = {tuple(task_student_for(cell)) for cell in cells}
    except (HydraException, OmegaConfBaseException, DistilError):
        return []
    if len(added) > 1:
        student = next(chosen for chosen in added if chosen)[0].partition("=")[2]
        raise DistilError(f"this sweep's cells default to different students ({student} for sentence-pair "
                          f"regression, the main config's student for the others); choose one for every cell "
                          f"with student=...")
    chosen = list(added.pop())
    if chosen:
        CHOSEN_FOR_TASK["student"] = chosen[0].partition("=")[2]
    return chosen
