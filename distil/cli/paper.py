"""`distil paper tang-table2 | turc-table1 | wu-table2 | wu-table5 | all`: a paper's measurements on
this machine, written to outputs/tables/ for its table preset (distil table NAME renders it).

The timing benches take --passes/--threads/--quick/--out as every bench does
(distil.bench.harness.add_bench_arguments), each with its own defaults.
"""

from __future__ import annotations

import sys
from pathlib import Path

from distil.cli.parsing import Command, Parser, data_dir_argument, run_each, run_group, run_guarded
from distil.common.console import console_command

PAPERS = {
    "tang-table2": "Tang et al. Table 2 (size, inference time) and augment=tang's cost -> bench_tang, bench_augment",
    "turc-table1": "Turc et al. Table 1: 24 compact BERTs' parameters and speed-ups -> bench_turc",
    "wu-table2": "Wu et al. Table 2: parameters and time on Quora pairs -> bench_wu",
    "wu-table5": "Wu et al. Table 5: untuned sentence vectors on a pair task (trains; Hydra overrides) -> untuned",
    "all": "the four, one after the other",
}
EXAMPLES = """\
examples:
  distil paper tang-table2                         # -> outputs/tables/bench_tang.{md,csv}, bench_augment.{md,csv}
  distil paper turc-table1 --passes 3 --length 512 # -> outputs/tables/bench_turc.{md,csv}
  distil paper wu-table2 --pairs 128 --batch 64    # -> outputs/tables/bench_wu.{md,csv}
  distil paper wu-table5 teacher=minilm            # -> <paths.outputs>/tables/untuned.{md,csv}
  distil paper tang-table2 --quick --out /tmp/t    # small stand-ins, for a check
"""


def timed(parser: Parser, argv: list[str] | None, prog: str, bench, positive: tuple[str, ...]) -> int:
    """A paper's timing bench: these arguments must be positive, then it measures and writes its tables."""
    args = parser.parse_args(argv)
    if min(getattr(args, name) for name in positive) < 1:
        named = [f"--{name}" for name in positive]
        parser.error(f"{', '.join(named[:-1])} and {named[-1]} must be positive")
    with console_command(prog, log_lines=True):
        bench(args)
    return 0


def tang_table2(argv: list[str] | None = None, prog: str = "distil paper tang-table2") -> int:
    from distil.bench.harness import add_bench_arguments
    from distil.papers import tang_table2 as paper

    parser = Parser(prog, "distil paper tang-table2", paper.__doc__.split("\n\n")[0], EXAMPLES)
    data_dir_argument(parser, "sst2/", ", as paths.data_dir")
    parser.add_argument("--sentences", type=int, default=1024,
                        help="SST-2 training sentences timed for Table 2 (default 1024: 2 batches of 512)")
    parser.add_argument("--labeled", type=int, default=500,
                        help="sentences augmented for the augmentation cost (default 500)")
    add_bench_arguments(parser, passes=2, passes_help="interleaved passes for Table 2 (default 2)",
                        quick="a 2-layer BERT in place of BERT Large (same name and vocabulary), for tests",
                        out="directory for bench_tang.{md,csv} and bench_augment.{md,csv}")
    return timed(parser, argv, prog, paper.bench, ("sentences", "labeled", "passes", "threads"))


def turc_table1(argv: list[str] | None = None, prog: str = "distil paper turc-table1") -> int:
    from distil.bench.harness import add_bench_arguments
    from distil.papers import turc_table1 as paper

    parser = Parser(prog, "distil paper turc-table1", paper.__doc__.split("\n\n")[0], EXAMPLES)
    parser.add_argument("--length", type=int, default=512, help="wordpieces per example (default 512, the paper's)")
    add_bench_arguments(parser, passes=3, quick="16-wide stand-ins (same names and depths), for tests",
                        out="directory for bench_turc.{md,csv}")
    return timed(parser, argv, prog, paper.bench, ("passes", "length", "threads"))


def wu_table2(argv: list[str] | None = None, prog: str = "distil paper wu-table2") -> int:
    from distil.bench.harness import add_bench_arguments
    from distil.papers import wu_table2 as paper

    parser = Parser(prog, "distil paper wu-table2", paper.__doc__.split("\n\n")[0], EXAMPLES)
    data_dir_argument(parser, "quora-pairs/")
    parser.add_argument("--pairs", type=int, default=128, help="Quora pairs timed per pass (default 128)")
    parser.add_argument("--batch", type=int, default=64,
                        help=f"batch size (default 64; the paper's {paper.PAPER_BATCH} costs BERT Large minutes a "
                             f"batch)")
    add_bench_arguments(parser, passes=2, quick="2-layer, 32-wide BERTs (same names), for tests",
                        out="directory for bench_wu.{md,csv}")
    return timed(parser, argv, prog, paper.bench, ("pairs", "batch", "passes", "threads"))


def wu_table5(argv: list[str] | None = None, prog: str = "distil paper wu-table5") -> int:
    from distil.papers import wu_table5 as paper

    parser = Parser(prog, "distil paper wu-table5", paper.__doc__, EXAMPLES)
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="Hydra overrides of the run configuration (dataset=quora and student=sra come first)")
    parser.add_argument("--out", type=Path, help="directory for untuned.{md,csv} (default: <paths.outputs>/tables)")
    args = parser.parse_intermixed_args(sys.argv[1:] if argv is None else argv)
    with console_command(prog, log_lines=True):  # a teacher's fine-tuning and the agnostic build
        paper.write_table(args.overrides, args.out)
    return 0


def every(argv: list[str] | None = None, prog: str = "distil paper all") -> int:
    """Each paper with its own defaults, and what is given here; the first failure's exit code."""
    from distil.bench.harness import add_bench_arguments

    parser = Parser(prog, "distil paper all", PAPERS["all"] + " (each with its own defaults, but for the "
                                                              "options given here)", EXAMPLES)
    add_bench_arguments(parser, out="directory for every paper's tables (default: outputs/tables; wu-table5: "
                                    "<paths.outputs>/tables)",
                        quick="the timing benches' quick mode, for tests", passes_help="the timing benches' passes")
    parser.set_defaults(threads=None, out=None)
    args = parser.parse_args(argv)
    out = ["--out", str(args.out)] if args.out else []
    timing = [*(["--quick"] if args.quick else []), *(["--threads", str(args.threads)] if args.threads else []),
              *(["--passes", str(args.passes)] if args.passes else []), *out]
    return run_each([*timing_papers(timing), ("distil paper wu-table5", wu_table5, out)])


def timing_papers(argv: list[str]) -> list[tuple[str, Command, list[str]]]:
    """The papers' timing tables (no training), as `distil bench all` runs them too."""
    return [(f"distil paper {name}", command, argv)
            for name, command in (("tang-table2", tang_table2), ("turc-table1", turc_table1), ("wu-table2", wu_table2))]


COMMANDS = {"tang-table2": tang_table2, "turc-table1": turc_table1, "wu-table2": wu_table2, "wu-table5": wu_table5,
            "all": every}


def main(argv: list[str] | None = None, prog: str = "distil paper") -> int:
    return run_group(prog, "distil paper", __doc__.split("\n\n")[0], PAPERS, COMMANDS, EXAMPLES, argv, "paper")


def tang_alias() -> None:
    """`distil-bench-tang`, kept for one release."""
    sys.exit(run_guarded(tang_table2, None, "distil-bench-tang"))


def turc_alias() -> None:
    """`distil-bench-turc`, kept for one release."""
    sys.exit(run_guarded(turc_table1, None, "distil-bench-turc"))


def wu_alias() -> None:
    """`distil-bench-wu`, kept for one release."""
    sys.exit(run_guarded(wu_table2, None, "distil-bench-wu"))


def untuned_alias() -> None:
    """`distil-untuned`, kept for one release."""
    sys.exit(run_guarded(wu_table5, None, "distil-untuned"))
