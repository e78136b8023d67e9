"""`distil bench students | cache | checkpoint | deploy | all`: size, speed and cost measured on this machine.

Every bench takes --passes/--threads/--quick/--out as distil.bench.harness.add_bench_arguments defines
them (each with its own defaults), and writes outputs/tables/<bench>.{md,csv}.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from distil.cli.parsing import Parser, data_dir_argument, run_each, run_group, run_guarded
from distil.common.console import console_command

BENCHES = {
    "students": "teacher-sized models vs the students: size and speed ratios -> bench.{md,csv}",
    "cache": "the teacher cache's speed and memory targets -> bench-cache.{md,csv}",
    "checkpoint": "what checkpointing costs a training stage -> bench_checkpoint.{md,csv}",
    "demo": "the default job (make demo) from a cold cache: wall time and phases -> bench-demo.{md,csv}",
    "table-jobs": "a table of 8 smoke cells with distil table --jobs 2 against --jobs 1, in turn: wall times and "
                  "their ratio -> bench-table-jobs.{md,csv}",
    "cache-workers": "2 worker processes (1 thread each) building one teacher cache against 1 worker with 2 "
                     "threads, in turn: wall times, ratio, byte identity, K-worker estimate -> "
                     "bench-cache-workers.{md,csv}",
    "deploy": "a run's student served by PyTorch, ONNX and int8 ONNX end to end, every family's export checked, "
              "the Python API's overhead -> bench-deploy.{md,csv}",
    "all": "students, cache, checkpoint and the papers' timing tables (distil paper tang-table2, turc-table1, "
           "wu-table2), one after the other: make bench",
}
EXAMPLES = """\
examples:
  distil bench students                      # -> outputs/tables/bench.{md,csv}
  distil bench students --quick --out /tmp/t # tiny teachers, a few batches: checks that it runs
  distil bench cache --only caching --only training --repeats 5
  distil bench checkpoint --epochs 3
  distil bench demo                          # on a quiet machine: the first run a newcomer sees, timed
  distil bench demo --against main runtime.device=cpu   # this code against main's, in turn, with the ratio
  distil bench demo --with tracking=mlflow   # the default job with and without tracking, in turn, with the ratio
  distil bench table-jobs                    # on a quiet machine: 8 cells, --jobs 2 against --jobs 1, 1 thread each
  distil bench table-jobs --real --rounds 1  # on a quiet machine: 2 real SST-2 cells, 2 threads against 2 x 1
  distil bench cache-workers                 # on a quiet machine: 2 workers x 1 thread against 1 worker x 2 threads
  distil bench deploy                        # on a quiet machine: the newest demo run (make demo), served 3 ways
  distil bench deploy outputs/runs/<date>/<time> --quick   # a smoke run, small sizes: checks that it runs
  distil bench all                           # make bench: the three benches and the papers' timing tables
"""


def students_parser(prog: str) -> Parser:
    from distil.bench.harness import add_bench_arguments
    from distil.bench.students import PASSES

    parser = Parser(prog, "distil bench students", "Measure teacher/student size and speed ratios in one run "
                                                   "(random weights, model time only).", EXAMPLES)
    add_bench_arguments(parser, out="directory for bench.md and bench.csv (default: outputs/tables)",
                        quick="tiny teachers and few batches (default 64 examples x 32 tokens), for tests",
                        passes_help=f"interleaved passes; each ratio is the median over them (default {PASSES}; 2 "
                                    "with --quick; capped at the number of batches)")
    parser.add_argument("--examples", type=int, default=None,
                        help="random examples timed (default 256; 64 with --quick)")
    parser.add_argument("--seq-len", type=int, default=None,
                        help="tokens per example (default 128; 32 with --quick)")
    return parser


def students(argv: list[str] | None = None, prog: str = "distil bench students") -> int:
    from distil.bench.students import bench, settle_args

    parser = students_parser(prog)
    args = parser.parse_args(argv)
    if problem := settle_args(args):
        parser.error(problem)
    with console_command(prog, log_lines=True):
        bench(args)
    record(args, "bench", prog, argv)
    return 0


def record(args: argparse.Namespace, stem: str, prog: str, argv: list[str] | None) -> None:
    """A full measurement goes to the tracked record (results/bench/, with its machine, code version and
    time), so the benchmarks page shows it on every clone; a --quick one checks that the bench runs and
    is not a measurement, and --no-record marks an experiment."""
    from distil.common.provenance import provenance
    from distil.tables.ledger import record_bench

    if not args.quick and args.record:
        record_bench(Path(args.out) / f"{stem}.csv", provenance([*prog.split(), *(sys.argv[1:] if argv is None
                                                                                 else argv)]))


CACHE_EPILOG = """\
the cache's speed and memory targets: caching >= 3.5x fixed padding and >= 1.2x unsorted dynamic
padding; training from shards <= 1.10x in memory; peak RSS < 2 GiB while caching and while training;
a 6-cell sweep runs the teacher once. Full sizes take about 25 minutes on 2 cores; --quick runs small
sizes in a few minutes.

examples:
  distil bench cache                          # everything, full sizes -> outputs/tables/bench-cache.{md,csv}
  distil bench cache --only caching --only training --repeats 5
  distil bench cache --quick                  # small sizes: checks that it runs, ratios not meaningful
"""


def cache_parser(prog: str) -> Parser:
    from distil.bench import cache as bench_cache
    from distil.bench.harness import add_bench_arguments

    description = bench_cache.__doc__.split("\n\n", 1)[1].rsplit("\n\nRatios", 1)[0]
    parser = Parser(prog, "distil bench cache", description, CACHE_EPILOG)
    parser.add_argument("--only", action="append", choices=bench_cache.MEASUREMENTS,
                        help="run this measurement only (repeatable; default: all four)")
    add_bench_arguments(parser, out="directory for bench-cache.md and bench-cache.csv (default: outputs/tables)",
                        quick="small sizes for a fast check (ratios not meaningful)", with_passes=False)
    data_dir_argument(parser, "sst2/ and wikipedia-sentences/", ", as paths.data_dir")
    parser.add_argument("--teacher", default="minilm", help="teacher config for 1 and 2, tokenizer for 3 "
                                                            "(default: minilm)")
    sizes = parser.add_argument_group("sizes (defaults: full / --quick)")
    sizes.add_argument("--sentences", type=int, help="1: SST-2 train sentences cached (4096 / 256)")
    sizes.add_argument("--repeats", type=int, help="1, 2: interleaved repetitions, median reported (3 / 1)")
    sizes.add_argument("--max-length", type=int, default=128, help="1: fixed padding width and truncation (128)")
    sizes.add_argument("--shard-size", type=int, default=4096, help="1, 2: examples per cache shard (4096)")
    sizes.add_argument("--labeled", type=int, help="2: SST-2 labeled examples, half per class (1000 / 200)")
    sizes.add_argument("--transfer", type=int, help="2: SST-2 transfer examples (20000 / 1000)")
    sizes.add_argument("--train-batches", type=int, help="2: batches trained per run (200 / 10)")
    sizes.add_argument("--big-sentences", type=int, help="3: Wikipedia sentences (100000 / 2000)")
    sizes.add_argument("--big-width", type=int, default=768, help="3: teacher hidden size (768)")
    sizes.add_argument("--big-layers", type=int, help=f"3: teacher layers run, of the {bench_cache.BERT_BASE_LAYERS} "
                                                        "held in memory (1 / 1)")
    sizes.add_argument("--big-train-batches", type=int, default=0, help="3: batches trained (0: one epoch)")
    sizes.add_argument("--corpus", type=Path, help=f"3: sentence file (default: <data-dir>/{bench_cache.WIKI})")
    parser.add_argument("--phase", choices=("cache", "train"), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    return parser


def cache_args(argv: list[str] | None, prog: str = "distil bench cache") -> argparse.Namespace:
    from distil.bench import cache as bench_cache

    parser = cache_parser(prog)
    args = parser.parse_args(argv)
    for key, value in (bench_cache.QUICK if args.quick else bench_cache.FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.only = list(dict.fromkeys(args.only or bench_cache.MEASUREMENTS))
    if args.corpus is None:
        args.corpus = args.data_dir / bench_cache.WIKI
    if min(args.sentences, args.repeats, args.labeled, args.transfer, args.train_batches, args.big_sentences,
           args.big_width, args.big_layers, args.threads, args.max_length, args.shard_size) < 1:
        parser.error("sizes, repeats and threads must be positive")
    return args


def cache(argv: list[str] | None = None, prog: str = "distil bench cache") -> int:
    """0, or 1 when a measurement failed (after the tables are written)."""
    from distil.bench import cache as bench_cache

    args = cache_args(argv, prog)
    if args.phase:
        return bench_cache.phase(args)
    code = bench_cache.bench(args, prog)
    if code == 0:
        record(args, "bench-cache", prog, argv)
    return code


def checkpoint(argv: list[str] | None = None, prog: str = "distil bench checkpoint") -> int:
    from distil.bench import checkpoint as bench_checkpoint
    from distil.bench.harness import add_bench_arguments

    parser = Parser(prog, "distil bench checkpoint", bench_checkpoint.__doc__.split("\n\n")[0], EXAMPLES)
    parser.add_argument("--epochs", type=int, default=3, help="epochs per stage step (default 3)")
    add_bench_arguments(parser, out="directory for bench_checkpoint.{md,csv} (default: outputs/tables)",
                        quick="tiny stages, for a test", with_passes=False, with_threads=False)
    args = parser.parse_args(argv)
    with console_command(prog):
        bench_checkpoint.bench(args.epochs, args.quick, args.out)
    record(args, "bench_checkpoint", prog, argv)
    return 0


def every(argv: list[str] | None = None, prog: str = "distil bench all") -> int:
    """Each bench with its own defaults, and what is given here; the first failure's exit code."""
    from distil.bench.harness import add_bench_arguments

    parser = Parser(prog, "distil bench all", BENCHES["all"] + " (each with its own defaults, but for the "
                                                                "options given here)", EXAMPLES)
    add_bench_arguments(parser, out="directory for every bench's tables (default: outputs/tables)",
                        quick="every bench's quick mode, for tests",
                        passes_help="interleaved passes of the timing benches")
    parser.set_defaults(threads=None, out=None)
    args = parser.parse_args(argv)
    shared = [*(["--quick"] if args.quick else []), *(["--out", str(args.out)] if args.out else [])]
    threads = ["--threads", str(args.threads)] if args.threads else []
    passes = ["--passes", str(args.passes)] if args.passes else []
    from distil.cli.paper import timing_papers

    return run_each([("distil bench students", students, [*shared, *threads, *passes]),
                     ("distil bench cache", cache, [*shared, *threads]),
                     ("distil bench checkpoint", checkpoint, shared),
                     *timing_papers([*shared, *threads, *passes])])


def demo(argv: list[str] | None = None, prog: str = "distil bench demo") -> int:
    """One cold run of the default job, beside the recorded rows of earlier code versions."""
    import pandas as pd

    from distil.bench import demo as bench_demo
    from distil.bench.harness import add_bench_arguments
    from distil.common.provenance import provenance
    from distil.tables.ledger import recorded_bench

    parser = Parser(prog, "distil bench demo", bench_demo.__doc__.split("\n\n")[0], EXAMPLES)
    add_bench_arguments(parser, out="directory for bench-demo.{md,csv} (default: outputs/tables)",
                        quick="the smoke run (debug=smoke) instead: checks that it runs, in seconds",
                        with_passes=False, with_threads=False)
    parser.add_argument("--against", metavar="REV",
                        help="also time git revision REV (a worktree), in turn with this code, and give the ratio")
    parser.add_argument("--with", dest="extra", action="append", metavar="KEY=VALUE",
                        help="also time this code with this override added (repeatable; e.g. tracking=mlflow), in "
                             "turn with the runs without it, and give the ratio")
    parser.add_argument("--rounds", type=int, default=2,
                        help="with --against or --with: runs of each version (default 2)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="overrides of this code's runs (e.g. runtime.device=cpu); --against runs its own default")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds {args.rounds}: give 1 or more")
    if args.against and args.extra:
        parser.error("--against and --with: give one of them (each times two variants in turn)")
    with console_command(prog):
        now = provenance([])
        overrides = [*(["debug=smoke"] if args.quick else []), *args.overrides]
        ratio = None
        if args.against:
            rows, wall_ratio = bench_demo.compare(overrides, now["code"], now["date"], args.against, args.rounds)
            ratio = (f"Code {now['code']}", rows[-1]["code"], wall_ratio)
        elif args.extra:
            rows, wall_ratio = bench_demo.compare_with(overrides, args.extra, now["code"], now["date"], args.rounds)
            ratio = (f"With `{' '.join(args.extra)}`", "without", wall_ratio)
        else:
            rows = [bench_demo.measure(overrides, now["code"], now["date"])]
        # a measurement replaces the record's rows of the same code and overrides, and keeps the others
        # (the before figures, other seeds)
        measured = {(row["code"], row["overrides"]) for row in rows}
        saved = None if args.quick else recorded_bench("bench-demo")
        recorded = [] if saved is None else pd.read_csv(saved[0]).fillna({"overrides": ""}).to_dict("records")
        earlier = [r for r in recorded if (r["code"], r["overrides"]) not in measured]
        print(bench_demo.write([*earlier, *rows], Path(args.out), ratio).to_string(index=False))
    record(args, "bench-demo", prog, argv)
    return 0


def table_jobs(argv: list[str] | None = None, prog: str = "distil bench table-jobs") -> int:
    """A small table run cold by `distil table --jobs N` and by `--jobs 1`, in turn, with the ratio."""
    from distil.bench import table_jobs as bench_table_jobs
    from distil.bench.harness import add_bench_arguments

    parser = Parser(prog, "distil bench table-jobs", bench_table_jobs.__doc__.split("\n\n")[0], EXAMPLES)
    add_bench_arguments(parser, out="directory for bench-table-jobs.{md,csv} (default: outputs/tables)",
                        quick="one round of 4 cells: checks that it runs, not a measurement", with_passes=False,
                        with_threads=False)
    parser.add_argument("--threads", type=int, default=None,
                        help="torch threads of each cell with --jobs 1 (default 1: what --jobs 2 gives on 2 cores; "
                             "with --real every core, as distil table gives a cell)")
    parser.add_argument("--real", action="store_true",
                        help="2 real cells (the BiLSTM under d1 and soft on SST-2 low resource, one epoch; ~2 "
                             "minutes each) on the teacher and targets cached in <outputs>/cache, not 8 smoke cells "
                             "from a cold cache -> bench-table-jobs-real.{md,csv}")
    parser.add_argument("--jobs", type=int, default=2, metavar="N",
                        help="time distil table --jobs N against --jobs 1 (default 2; each cell then gets "
                             "cores // N threads)")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each setting, in turn (default 2)")
    args = parser.parse_args(argv)
    if args.jobs < 2:
        parser.error(f"--jobs {args.jobs}: give 2 or more (it is timed against --jobs 1)")
    threads = args.threads if args.threads is not None else ((os.cpu_count() or 1) if args.real else 1)
    if args.rounds < 1 or threads < 1:
        parser.error("--rounds and --threads must be positive")
    rounds, table, cache = args.rounds, None, None
    if args.real:
        from distil.tables.run import outputs_root

        table, cache = bench_table_jobs.real_preset(threads), outputs_root() / "cache"
    if args.quick:
        rounds = 1
        table = table or bench_table_jobs.preset(threads, bench_table_jobs.SCHEDULES[:2])
    with console_command(prog):
        rows, speedup = bench_table_jobs.compare(args.jobs, threads, rounds, table, cache)
        print(bench_table_jobs.write(rows, Path(args.out), args.jobs, speedup, args.real).to_string(index=False))
        print(f"--jobs {args.jobs} against --jobs 1: {speedup:.2f}x as fast (median wall times)")
    record(args, bench_table_jobs.REAL_NAME if args.real else bench_table_jobs.NAME, prog, argv)
    return 0


def cache_workers(argv: list[str] | None = None, prog: str = "distil bench cache-workers") -> int:
    """Worker processes building one cache together against one worker, in turn; 1 if their bytes differ."""
    from distil.bench import cache_workers as bench_workers
    from distil.bench.harness import add_bench_arguments

    parser = Parser(prog, "distil bench cache-workers", bench_workers.HELP, EXAMPLES)
    add_bench_arguments(parser, out="directory for bench-cache-workers.{md,csv} (default: outputs/tables)",
                        quick="one round on debug=smoke's tiny teacher and toy data: checks that it runs and that "
                              "the bytes agree, not a measurement", with_passes=False, with_threads=False)
    parser.add_argument("--workers", type=int, default=2, metavar="N",
                        help="N workers with 1 thread each against 1 worker with N threads (default 2)")
    parser.add_argument("--rounds", type=int, default=None, help="builds of each variant, in turn (default 2; 1 "
                                                                 "with --quick)")
    parser.add_argument("--shard-size", type=int, default=None,
                        help=f"examples per cache shard (default {bench_workers.SHARD_SIZE}: several shards per "
                             f"worker; {bench_workers.QUICK_SHARD_SIZE} with --quick)")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                        help="overrides of the job whose targets are built (default: the default job)")
    args = parser.parse_args(argv)
    if args.workers < 2:
        parser.error(f"--workers {args.workers}: give 2 or more (they are timed against 1 worker)")
    rounds = (1 if args.quick else 2) if args.rounds is None else args.rounds
    shard_size = args.shard_size
    if shard_size is None:
        shard_size = bench_workers.QUICK_SHARD_SIZE if args.quick else bench_workers.SHARD_SIZE
    if min(rounds, shard_size) < 1:
        parser.error("--rounds and --shard-size must be positive")
    quick = ["debug=smoke"] if args.quick else []
    with console_command(prog, log_lines=True):
        builds = bench_workers.compare([*quick, *args.overrides], shard_size, args.workers, rounds)
        print(bench_workers.write(builds, Path(args.out)).to_string(index=False))
        print(bench_workers.ratio_text(builds))
    if not bench_workers.correct(builds):
        print(f"{prog}: error: the builds' shard files differ or a shard was computed twice (see "
              f"{Path(args.out) / bench_workers.NAME}.md)", file=sys.stderr)
        return 1
    record(args, bench_workers.NAME, prog, argv)
    return 0


def deploy(argv: list[str] | None = None, prog: str = "distil bench deploy") -> int:
    """A run's student served by each backend end to end, every family's export checked, the API's overhead."""
    from rich.console import Console

    from distil.bench import deploy as bench_deploy
    from distil.bench.harness import add_bench_arguments, rich_table
    from distil.common.provenance import provenance

    parser = Parser(prog, "distil bench deploy", bench_deploy.__doc__.split("\n\n")[0], EXAMPLES)
    parser.add_argument("run_dir", nargs="?", type=Path,
                        help="a run directory (or its student folder); default: the newest finished run of the "
                             "default job (make demo) under $DISTIL_OUTPUTS, else outputs")
    add_bench_arguments(parser, out="directory for bench-deploy.{md,csv} (default: outputs/tables)",
                        quick="small sizes, and the run's own student alone in the families check: checks that it "
                              "runs, not a measurement",
                        passes_help="interleaved passes; each ratio is the median over them (default 5; 2 with "
                                    "--quick)", with_threads=False)
    parser.add_argument("--threads", type=int, default=2, help="torch's and ONNX Runtime's threads (default 2)")
    parser.add_argument("--latency-texts", type=int, default=None,
                        help="test texts timed one at a time (default 256; 8 with --quick)")
    parser.add_argument("--texts", type=int, default=None,
                        help="texts the API and the bare loop serve, the test split repeated (default 10,000; 256 "
                             "with --quick)")
    args = parser.parse_args(argv)
    if problem := bench_deploy.settle_args(args):
        parser.error(problem)
    with console_command(prog):
        measured = bench_deploy.measure(args)
        md, targets = bench_deploy.write(measured, args, provenance([*prog.split(), *(sys.argv[1:] if argv is None
                                                                                      else argv)]))
        Console().print(rich_table(targets, "Targets"))
        print(f"wrote {md} and {md.with_suffix('.csv')}")
    record(args, bench_deploy.NAME, prog, argv)
    return 0


COMMANDS = {"students": students, "cache": cache, "checkpoint": checkpoint, "demo": demo, "table-jobs": table_jobs,
            "cache-workers": cache_workers, "deploy": deploy,
            "all": every}


def main(argv: list[str] | None = None, prog: str = "distil bench") -> int:
    return run_group(prog, "distil bench", __doc__.split("\n\n")[0], BENCHES, COMMANDS, EXAMPLES, argv, "bench")


def students_alias() -> None:
    """`distil-bench`, kept for one release."""
    sys.exit(run_guarded(students, None, "distil-bench"))


def cache_alias() -> None:
    """`distil-bench-cache`, kept for one release."""
    sys.exit(run_guarded(cache, None, "distil-bench-cache"))
