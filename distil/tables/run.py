"""`distil table` (distil/cli/table.py): run the missing cells of paper tables, then write the tables.

    distil table xtremedistil-table3 [more names or preset files] [--scale cpu|paper]
    distil table --all               # every preset (`make tables`)
    distil table NAME --dry-run      # the cells, their keys, and which are done; runs nothing
    distil table --list              # the presets and their cell counts per scale
    distil table NAME --render-only  # write NAME's table from the cells done so far; run nothing
    distil table NAME --only SST-2   # run only the cells of that row or column first (repeatable)
    distil table NAME --seed 1       # run only seed 1's cells (repeatable)

Each cell runs as the real `distil` console script in a subprocess, one at a time, into
`<outputs>/cells/<key>/` (outputs: $DISTIL_OUTPUTS or ./outputs, as for `distil`), under the cell's
lock: several `distil table` workers on one outputs directory share a table's cells, each run once
(a worker skips a cell another is running). A cell whose metrics.json says `status: ok` is
skipped, so an interrupted table continues where it stopped (the killed cell resumes from the
student checkpoints `distil` keeps in its cache). A failed or crashed cell is recorded in its
metrics.json and the others go on; the table marks it with its error.
Writing a table copies its finished cells to the tracked results (distil.tables.ledger), so a fresh
clone finds them done too.
"""

from __future__ import annotations

import argparse  # run(args) reads the namespace distil/cli/table.py parses
import contextlib
import functools
import queue
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

from rich.console import Console
from rich.text import Text

from distil.common.atomic import write_json_atomic
from distil.common.console import console_script
from distil.common.outputs_dir import outputs_dir
from distil.common.parent import child_environment
from distil.common.provenance import package_digest, provenance
from distil.common.runtime import share_of_cores
from distil.errors import DistilError, did_you_mean
from distil.store.admin import build_lock
from distil.tables import ledger
from distil.tables.cells import (
    RECORDED_RECIPE,
    cell_dir,
    cell_specs,
    collect,
    expand,
    label,
    read_result,
    result_of,
    runs_of,
)
from distil.tables.load import cpu_estimate, load_preset, preset_files, presets
from distil.tables.preset import BENCH_COMMANDS, SCALES, Cell, TablePreset, bench_csv, bench_record

T = TypeVar("T")

console = Console(highlight=False, soft_wrap=True)  # one line per cell, also in logs
STOP_GRACE_SECONDS = 60  # a cell told to stop writes `failed: interrupted` and releases its locks first
INTERRUPT_GRACE_SECONDS = 5  # how long a cell may take to stop on the Ctrl-C the terminal sent it too
LOG_NAME = "distil-table.log"  # the cell's own output, beside Hydra's distil.log


def outputs_root() -> Path:
    return outputs_dir().resolve()


class CodeChanged(DistilError):
    """The distil package changed under a running command: stop it (a search too), not just this cell."""


@functools.cache
def code_at_start() -> str:
    """The package's digest when this command first asked (its start, or its first cell)."""
    return package_digest()


def check_code_unchanged() -> None:
    """Stop before a cell when the distil package changed under this command (a checkout, a pull, an
    edit): the cell's run would import the new code, yet its key, computed at the start, names the old
    one, so the new code's result would be recorded as the old code's. Run long tables from a fixed
    checkout (a git worktree) while editing elsewhere."""
    if package_digest() != code_at_start():
        raise CodeChanged("the distil package changed since this command started (a checkout, pull or edit): "
                          "a cell run now would be keyed by the old code; rerun the same command to go on "
                          "(finished cells are kept)")


class Stopping(BaseException):
    """Raised in a worker whose command is stopping, so no handler of errors (a search's failed trial)
    takes its interrupted cell for a failure: it is left as an interrupt leaves it, to resume."""


class Workers:
    """Several workers of one command running cells at once (`distil table --jobs`, `distil search --jobs`).
    An interrupt reaches the main thread alone (Ctrl-C, SIGTERM), and so does a worker's error once the
    main thread reads it (CodeChanged); the main thread would then wait for the workers, which would go on
    through the sweep. So on any of them every running cell is told to stop (it records `failed:
    interrupted`, resumable) and `stopping` keeps every worker from starting another."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._cells: set[subprocess.Popen] = set()
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def running(self, process: subprocess.Popen) -> Iterator[None]:
        with self._lock:
            self._cells.add(process)
        try:
            yield
        finally:
            with self._lock:
                self._cells.discard(process)

    def check(self) -> None:
        """Stop this worker (Stopping) when its command is stopping."""
        if self.stopping.is_set():
            raise Stopping()

    def run(self, jobs: int, work: Callable[[], T]) -> list[T]:
        """`work` in `jobs` threads; their results. On an interrupt or a worker's error: stop, then raise."""
        pool = ThreadPoolExecutor(max_workers=jobs)
        futures = [pool.submit(work) for _ in range(jobs)]
        try:
            return [future.result() for future in futures]
        except BaseException:
            self.stopping.set()
            with self._lock:
                cells = list(self._cells)
            stop(*cells)
            raise
        finally:
            pool.shutdown(wait=True)


def run_cell(cell: Cell, root: Path, extra: Sequence[str] = (),
             workers: Workers | None = None) -> tuple[str, str | None]:
    """Run one cell to its end; (how it ended, error or None). Its metrics.json always says why.
    `extra`: overrides that change no result (NOT_RESULT, e.g. trainer.threads), so not the key's.
    `workers`: the command's, when several run cells at once (their interrupt stops this one too).
    Refuses to start when the code changed since the command started (check_code_unchanged)."""
    check_code_unchanged()
    directory = cell_dir(root, cell.key)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "metrics.json").unlink(missing_ok=True)  # an earlier failure's: never read as this run's
    run_dir = str(directory).replace("'", "\\'")
    command = [console_script("distil"), *cell.overrides, *extra, f"hydra.run.dir='{run_dir}'"]
    with (directory / LOG_NAME).open("w") as log:
        # the cell stops (interrupted, resumable) if this process dies, even by kill -9
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=child_environment())
        try:
            with workers.running(process) if workers is not None else contextlib.nullcontext():
                code = process.wait()
        except BaseException:  # Ctrl-C or SIGTERM: let the cell record `failed: interrupted` first
            stop(process)
            raise
    metrics, error = read_result(directory / "metrics.json")
    if metrics is None:  # crashed (killed, out of memory) before writing its own
        error = (f"failed: distil exited with code {code} without writing metrics.json "
                 f"(its output: {directory / LOG_NAME})")
        write_json_atomic(directory / "metrics.json", {"status": error, "overrides": cell.overrides})
    return ("done" if error is None else error), error


def stop(*processes: subprocess.Popen) -> None:
    """The terminal's Ctrl-C reaches the cells too; those still running a moment later are told (with
    SIGTERM: a process started in the background ignores SIGINT, and `distil` handles both alike), then
    killed. All at once: each step waits for them together."""
    for send, grace in ((None, INTERRUPT_GRACE_SECONDS), (signal.SIGTERM, STOP_GRACE_SECONDS),
                        (signal.SIGKILL, STOP_GRACE_SECONDS)):
        alive = [process for process in processes if process.poll() is None]
        if not alive:
            return
        for process in alive if send is not None else ():
            process.send_signal(send)
        deadline = time.monotonic() + grace
        for process in alive:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                continue


def run_label(preset: TablePreset, cell: Cell) -> str:
    """How a run is named: its row, its column where the column changes the run, its seed."""
    axis = preset.column(cell.column)
    picks_only = axis is not None and axis.value and not any(axis.overrides_for(s) for s in SCALES)
    return label(cell.row, None if picks_only else cell.column, cell.seed)


def cell_lock(root: Path, key: str, create: bool = True):
    """A cell's run lock, `<outputs>/locks/cell-<key>.lock`: held by the `distil table` worker running
    it, so two workers on one table (in one outputs directory, on one host or a shared filesystem)
    never run the same cell; the other moves on to the next."""
    return build_lock(root, f"cell-{key}", create)


def run_sweep(preset: TablePreset, cells: list[Cell], root: Path, jobs: int = 1,
              threads: int | None = None) -> list[str]:
    """Run the cells not yet done, `jobs` at a time, skipping those another command is running; the
    failed cells' descriptions. Each cell gets `threads` torch threads (trainer.threads, which changes no
    result), by default its config's alone and with several jobs an equal share of the cores: the jobs
    are workers of this process, taking the cells in turn from one queue, so each cell is met (run, or
    said to be done) by one worker."""
    runs = runs_of(cells)
    pending = queue.SimpleQueue()
    for numbered in enumerate(runs, 1):
        pending.put(numbered)
    threads = threads or (share_of_cores(jobs) if jobs > 1 else None)
    extra = [f"trainer.threads={threads}"] if threads else []
    if jobs <= 1:
        return sweep_worker(preset, pending, len(runs), root, extra)
    workers = Workers()
    found = workers.run(jobs, lambda: sweep_worker(preset, pending, len(runs), root, extra, workers))
    return [failure for failures in found for failure in failures]


def sweep_worker(preset: TablePreset, pending: queue.SimpleQueue, total: int, root: Path,
                 extra: Sequence[str] = (), workers: Workers | None = None) -> list[str]:
    """One worker's share of a table's cells: it takes the next (number, cell) from `pending` until none is
    left, runs it unless it is done or another command holds it, and starts none once its command is
    stopping."""
    failed = []
    while workers is None or not workers.stopping.is_set():
        try:
            i, cell = pending.get_nowait()
        except queue.Empty:
            break
        name = f"cell {i}/{total} {preset.name} {run_label(preset, cell)}: "
        if result_of(root, cell.key).error is None:  # done, here, by another table or on another machine
            show(name, "skipped (done)", "dim")
            continue
        with cell_lock(root, cell.key) as ours:
            if not ours:
                show(name, "skipped (another worker is running it)", "yellow")
                continue
            if result_of(root, cell.key).error is None:  # finished by another worker since the check above
                show(name, "skipped (done by another worker)", "dim")
                continue
            show(name, "running", "blue")
            start = time.monotonic()
            ended, error = run_cell(cell, root, extra, workers)
        if error is None:
            show(name, f"done in {duration(time.monotonic() - start)}", "green")
        else:
            show(name, ended, "red")
            failed.append(f"{preset.name} {run_label(preset, cell)} ({cell_dir(root, cell.key)})")
    return failed


def run_bench(root: Path, bench: str = "bench", overrides: Sequence[str] = ()) -> list[str]:
    """A bench table reads outputs/tables/<bench>.csv: measure it if it is not there (nor recorded in
    results/bench/), or if it was measured with other overrides than the scale's base (wu-table5:
    distil-untuned with Table 1's student, so the task-agnostic student is the one its runs built, not
    a second one). A measurement is recorded with its provenance (distil.tables.ledger)."""
    out = root / "tables"
    csv = bench_csv(out, bench)
    restore_bench(csv)
    measured_with = bench_overrides(csv)
    if measured_with == list(overrides):
        show(f"{bench}: ", f"skipped (done: {csv})", "dim")
        return []
    again = "" if measured_with is None else f" (measured with [{' '.join(measured_with)}]; measuring again)"
    command = ["distil", *BENCH_COMMANDS[bench]]
    show(f"{bench}: ", f"running {' '.join([*command, *overrides])}{again}", "blue")
    code = subprocess.run([console_script("distil"), *command[1:], *overrides, "--out", str(out)]).returncode
    if code != 0:
        return [f"{' '.join(command)} exited with code {code}"]
    record = {**provenance([*command, *overrides]), "overrides": list(overrides)}
    write_json_atomic(bench_record(csv), {**record, "csv_sha256": ledger.file_digest(csv)})
    ledger.record_bench(csv, record)
    return []


def restore_bench(csv: Path) -> bool:
    """A bench csv this machine lacks, copied from its record in results/bench/ (with its provenance);
    whether it was."""
    saved = None if csv.is_file() else ledger.recorded_bench(csv.stem)
    if saved is None:
        return False
    csv.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(saved[0], csv)
    write_json_atomic(bench_record(csv), saved[1])
    show(f"{csv.stem}: ", f"read from {saved[0]} (measured {saved[1]['date']} on {saved[1]['machine']})", "dim")
    return True


def bench_overrides(csv: Path) -> list[str] | None:
    """The overrides a bench csv was measured with: those distil-table recorded beside it, or none
    (the command's defaults: `make bench` ran it) when it has no record or changed since; None
    without a csv."""
    if not csv.is_file():
        return None
    saved = ledger.current_record(csv, bench_record(csv))
    return saved["overrides"] if saved else []


def run_timing(preset: TablePreset, cells: list[Cell], root: Path) -> list[str]:
    """A table with `timing: true` times its finished students, and each distil student's ONNX and int8
    exports, against their teacher in one run (distil.tables.timing), once per teacher; a group already
    timed together is not timed again."""
    from distil.tables.timing import time_cells, timing_is_current

    groups: dict[str, dict[str, Cell]] = {}
    for cell in collect(cells, root):
        # a cell recorded on another machine keeps the timing recorded with it: its student is not here
        if cell.error is None and not cell.recorded:
            groups.setdefault(cell.metrics["artifacts"]["teacher"], {})[cell.key] = cell
    failed = []
    for teacher, group in groups.items():
        name = f"timing {preset.name} students of teacher {teacher}: "
        directories = {key: cell_dir(root, key) for key in group}
        if timing_is_current(directories):
            show(name, "skipped (done)", "dim")
            continue
        show(name, f"timing {len(group)} students, their ONNX and int8 exports (written once) and their teacher, "
             f"interleaved", "blue")
        try:
            time_cells(directories, next(iter(group.values())).overrides, root)
        except DistilError as error:
            show(name, f"failed: {error}", "red")
            failed.append(f"{name}{error}")
    return failed


def render(preset: TablePreset, cells: list[Cell], root: Path) -> None:
    """Write the table from the cells done so far, and record each finished cell in the tracked results
    (distil.tables.ledger), so a fresh clone finds it done."""
    from distil.tables.render import write_table  # pandas and matplotlib: only once a table is written

    collected = collect(cells, root)
    recorded = sum(ledger.record(cell.key, cell.metrics) for cell in runs_of(collected) if cell.error is None)
    if recorded:
        show(f"{preset.name}: ", f"{recorded} finished cell(s) recorded in {ledger.results_root() / 'cells'} "
             f"(commit them: a fresh clone then finds them done)", "dim")
    write_table(preset, collected, root / "tables")


def show(name: str, status: str, style: str) -> None:
    console.print(Text.assemble(name, (status, style)))


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 90 else f"{minutes // 60} h {minutes % 60} min"


def list_presets() -> None:
    for preset in presets():
        counts = ", ".join(f"{scale} {distinct_runs(preset, scale)} runs" for scale in SCALES)
        console.print(f"{preset.name}  ({preset.kind}; {counts})  {preset.paper}, {preset.table}: {preset.title}",
                      markup=False)


def distinct_runs(preset: TablePreset, scale: str) -> int:
    """The runs a preset's sweep makes: its table's positions (row x column x seed) less the columns
    that only read another field of the same run (a frontier table's accuracy, params, speed)."""
    return len({tuple(overrides) for *_, overrides in cell_specs(preset, scale)})


def dry_run(preset: TablePreset, cells: list[Cell], root: Path) -> None:
    runs = runs_of(cells)
    console.print(f"{preset.name}: {len(runs)} cells ({preset.kind})", markup=False)
    collected = collect(runs, root)
    for cell in collected:
        state = "done" if cell.error is None else cell.error
        if cell.error is not None:
            with cell_lock(root, cell.key, create=False) as free:
                state = state if free else "running (another worker)"
        console.print(f"  {cell.key}  {run_label(preset, cell)}: {state}  "
                      f"[{' '.join(cell.overrides)}]", markup=False)
    if runs and preset.kind == "sweep":
        done, minutes = finished(collected)
        # what the preset's "# cpu scale: ~N minutes" line should say, once every cell has run
        console.print(f"  {len(done)} of {len(runs)} cells done, {minutes:.1f} minutes measured (their metrics.json "
                      f"seconds, each cell's own teacher fine-tuning and caching included)", markup=False)


def finished(collected: list[Cell]) -> tuple[list[Cell], float]:
    """The finished cells and the minutes they took (their metrics.json seconds)."""
    done = [cell for cell in collected if cell.error is None]
    return done, sum(float(cell.metrics.get("seconds", 0)) for cell in done) / 60


def cost_outlook(estimate: str | None, done: int, cells: int, minutes: float) -> str:
    """What the whole table would take at the pace of its finished cells, beside what its preset's first
    line estimates: a stale estimate shows here, not after hours of `make tables`."""
    pace = f", ~{minutes / done * cells:.0f} for all {cells} at that pace" if 0 < done < cells else ""
    stated = f"; its preset estimates {estimate}" if estimate is not None else ""
    return pace + stated


def status(plan: list[tuple[TablePreset, str | Path, list[Cell]]], root: Path) -> None:
    """One line per sweep preset (cells done of all, how many are another machine's record, minutes
    measured, beside what its file's first line estimates), then the distinct cells of them all: a cell
    several tables name counts once there."""
    everything: dict[str, Cell] = {}
    for preset, source, cells in plan:
        if preset.kind != "sweep" or not cells:
            continue
        runs = collect(runs_of(cells), root)
        done, minutes = finished(runs)
        everything.update((cell.key, cell) for cell in runs)
        recorded = sum(cell.recorded for cell in done)
        outlook = cost_outlook(cpu_estimate(source), len(done), len(runs), minutes)
        console.print(f"{preset.name}: {len(done)} of {len(runs)} cells done ({recorded} from results/cells), "
                      f"{minutes:.0f} minutes measured{outlook}",
                      markup=False)
    done = sum(cell.error is None for cell in everything.values())
    console.print(f"all: {done} of {len(everything)} distinct cells done", markup=False)


def named_axes(preset: TablePreset, labels: list[str]) -> tuple[set[str], set[str]]:
    """The rows and the columns --only names; a label that is neither is an error (a typo would
    otherwise run nothing)."""
    rows, columns = [a.label for a in preset.rows], [a.label for a in preset.columns]
    for name in labels:
        if name not in rows + columns:
            raise DistilError(f"--only {name!r} is not a row or column of {preset.name}"
                              f"{did_you_mean(name, rows + columns)}; its rows: "
                              f"{', '.join(rows) or 'none'}; its columns: {', '.join(columns) or 'none'}")
    return set(rows) & set(labels), set(columns) & set(labels)


def only_cells(cells: list[Cell], rows: set[str], columns: set[str], seeds: set[int] = frozenset()) -> list[Cell]:
    """The cells --only names: those of the named rows, or of the named columns, or, when both rows
    and columns are named, the cells where they cross (`--only 'BiLSTM_SRA (Ours)' --only SST-2`);
    of those, the seeds --seed names (all without it)."""
    if seeds:
        cells = [c for c in cells if c.seed in seeds]
    if rows and columns:
        return [c for c in cells if c.row in rows and c.column in columns]
    return [c for c in cells if c.row in rows or c.column in columns] if rows or columns else cells


def check_seeds(seeds: set[int], plan: list) -> None:
    """A --seed no table asked for has seeds to run is a typo, not an empty run."""
    known = {cell.seed for _, _, cells, _ in plan for cell in cells}
    unknown = sorted(seeds - known)
    if unknown and known:
        raise DistilError(f"--seed {unknown[0]} is not a seed of these tables at this scale; their seeds: "
                          f"{', '.join(map(str, sorted(known)))}")


def run(args: argparse.Namespace) -> list[str]:
    """The failures of the tables asked for; every preset is loaded and expanded before any cell runs."""
    if args.list:
        list_presets()
        return []
    code_at_start()
    sources = list(preset_files().values()) if args.all else args.names
    loaded = [(load_preset(source), source) for source in sources]
    tables = [(preset, source) for preset, source in loaded if not args.all or preset.set == args.table_set]
    plan = [(preset, source, expand(preset, args.scale), named_axes(preset, args.only)) for preset, source in tables]
    seeds = set(getattr(args, "seeds", None) or [])
    check_seeds(seeds, plan)
    root = outputs_root()
    if args.status:
        status([(preset, source, only_cells(cells, rows, columns, seeds))
                for preset, source, cells, (rows, columns) in plan], root)
        return []
    failed: list[str] = []
    for preset, _, cells, (rows, columns) in plan:
        chosen = only_cells(cells, rows, columns, seeds)
        if args.dry_run:
            dry_run(preset, chosen, root)
            continue
        if preset.kind == "sweep" and not cells and not args.render_only:
            console.print(f"{preset.name}: no {args.scale}-scale sweep (scales: {', '.join(preset.scales)}); "
                          f"skipped", markup=False)
            continue
        if not args.render_only:  # else only what has run so far; the rest shows "not run"
            if preset.kind == "bench":
                scale = preset.scales.get(args.scale)
                failed += run_bench(root, preset.bench, [*RECORDED_RECIPE, *scale.base] if scale else [])
            failed += run_sweep(preset, chosen, root, getattr(args, "jobs", 1), getattr(args, "threads", None))
            failed += run_timing(preset, chosen, root) if preset.timing else []
        if measured(preset, root):
            render(preset, cells, root)
    return failed


def measured(preset: TablePreset, root: Path) -> bool:
    """Whether the table has something to write: a bench table needs its csv, measured on this machine
    and never recorded (without it, --render-only or a failed bench skips the table and goes on to the
    next; the README keeps the block of the machine that measured it)."""
    csv = bench_csv(root / "tables", preset.bench)
    if preset.kind != "bench" or csv.is_file() or restore_bench(csv):
        return True
    show(f"{preset.name}: ", f"skipped ({csv} not measured here: `distil table {preset.name}` measures it)",
         "yellow")
    return False
