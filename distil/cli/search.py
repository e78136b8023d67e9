"""`distil search PRESET`: the most accurate student under a latency and a size limit, on one cached teacher.

A multi-objective Optuna study over students (distil/search/), each trial a table cell; the Pareto set
and the best student within the limits are written to the search directory.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from distil.cli.parsing import Parser
from distil.common.console import console_command
from distil.common.interrupt import exit_on_interrupt

DESCRIPTION = """\
Search students distilled from one cached teacher for the most accurate one you can deploy under a
latency and a size limit. A preset (distil/conf/search/<name>.yaml, or a file) holds the base overrides,
the one seed every trial trains at, the reference student, the space, the objectives and the limits.

The space (each trial picks, define-by-run):
  student        a family (a student YAML: static, static-words, tang, bilstm, rnn, transformer, ...) and
                 that family's own sizes where the preset lists them (student.embedding_dim,
                 student.hidden_size, student.num_layers, student.mlp_hidden_size)
  schedule       d1, soft, ...          transfer_size  1k, 5k, 20k, ...
  augment        none | tang            backend        eager | onnx | onnx-int8 (how it is served)

Two objectives, one Optuna study (multi-objective TPE or NSGA-II, seeded): maximise the dev split's
selection metric (accuracy, F1, Pearson: the run's metric; for an ONNX backend the exported graph's own
dev score) and minimise latency in ms per text, end to end as the backend serves the student
(`latency: single_ms`, one text per call, or `batch32_ms`), timed with the frontier tables' harness
interleaved with the preset's reference student: a trial's latency is its median per-pass ratio to the
reference times the reference's median, measured once per search, so a busy machine biases no trial.

Limits (search presets' `limits`, or --max-latency-ms / --max-size-mb): before a trial trains, its
student is built untrained (same shapes, same speed), exported to its backend and timed; a trial
predicted over a limit is pruned without training. Size is the served weights file and vocabulary.

Each trial is a content-keyed table cell (outputs/cells/<key>/): every trial reads the one fine-tuned
teacher and its cached targets, a finished run is never trained again (a table or another search naming
it shares it), and only the Pareto set's test scores are read, after the search. The study is a SQLite
file in the search directory: rerun the same command to resume a killed search (trials its dead worker
left running are failed and queued again), and start several `distil search` on one directory (or
--jobs N) for parallel workers. Where the directory has no study yet, a recorded one
(results/search/<preset>/study.json, from --record) is loaded first: a search recorded as it goes
continues on a fresh clone or another machine. Cost: one run per distinct trial (SST-2 preset: 1-13 minutes each on 2
cores, see its first line), plus a few seconds to probe and time each.
"""

EXAMPLES = """\
examples:
  distil search toy                               # the toy fixtures: seconds a trial
  distil search sst2 --trials 40                  # make search-sst2
  distil search sst2 --max-latency-ms 0.5 --max-size-mb 5
  distil search sst2 --jobs 2                     # two trials at once (or a second `distil search sst2`)
  distil search my-search.yaml --out outputs/search/mine
  distil search sst2 --record                     # and record it in results/search/sst2 (make results: its page)

writes to the search directory (default outputs/search/<preset>): study.db, trials.csv, pareto.{md,csv,png},
best/ (the best student within the limits: `distil predict <dir>/best`, or Student.load); exit code 1
when no finished trial is within the limits (no best/). With --record, also results/search/<preset>/:
trials.csv, pareto.{csv,png} and search.json (command, machine, code version, date, wall time, trial
counts), which `make results` turns into docs/results/search.md
"""


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = None
    if value is None or not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil search", DESCRIPTION, EXAMPLES)
    parser.add_argument("preset", help="a search preset's name (distil/conf/search/) or file")
    parser.add_argument("--trials", type=int, metavar="N",
                        help="end the search once N trials have ended, finished or pruned (default: the preset's); "
                             "a larger N extends a finished search")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help="the search directory (default: <outputs>/search/<preset>)")
    parser.add_argument("--jobs", type=int, default=1, metavar="N",
                        help="run N trials at once in this process, each training on an equal share of the cores "
                             "(default 1); other `distil search` processes on the same directory join too")
    parser.add_argument("--max-latency-ms", type=positive, metavar="MS", help="the preset's limits.max_latency_ms")
    parser.add_argument("--max-size-mb", type=positive, metavar="MB", help="the preset's limits.max_size_mb")
    # a flag, not every search: results/ is the project's tracked record, and a search run to try a limit or
    # a few trials must not replace the preset's record (make search-sst2 passes it)
    parser.add_argument("--record", action="store_true",
                        help="record the finished search in results/search/<preset>/ for the results page "
                             "(make results); rerun with it to record a finished search: nothing trains again")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil search") -> int:
    started = time.monotonic()
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more")
    if args.trials is not None and args.trials < 1:
        parser.error(f"--trials {args.trials}: give 1 or more")
    with console_command(prog), exit_on_interrupt(f"{prog}: interrupted; rerun the same command to resume"):
        from distil.search.preset import load_search
        from distil.search.report import write_report
        from distil.search.study import add_wall, counts, run_search
        from distil.tables.run import outputs_root

        preset = load_search(args.preset, {"max_latency_ms": args.max_latency_ms,
                                           "max_size_mb": args.max_size_mb}, args.trials)
        root = outputs_root()
        search_dir = (args.out or root / "search" / preset.name).resolve()
        print(f"{prog}: study {preset.study_name} in {search_dir}, {preset.trials} trials", flush=True)
        from distil.search.record import record_dir
        from distil.search.saved_study import SAVED

        study, ctx = run_search(preset, search_dir, root, args.jobs, lambda line: print(line, flush=True),
                                saved=record_dir(preset.name) / SAVED)
        result = write_report(study, ctx)
        wall = time.monotonic() - started
        total, invocations = add_wall(study, wall)
        if args.record:
            from distil.search.record import record_search

            recorded = record_search(study, ctx, result["best"], {"wall_s": wall, "wall_s_total": total,
                                                                 "invocations": invocations},
                                     [prog, *(sys.argv[1:] if argv is None else argv)])
            print(f"{prog}: recorded in {recorded} (make results writes its page)")
        states = ", ".join(f"{n} {state}" for state, n in sorted(counts(study.get_trials(deepcopy=False)).items()))
        print(f"{prog}: trials: {states}; {result['pareto']} on the Pareto front: {search_dir / 'pareto.md'}")
        best = result["best"]
        if best is None:
            print(f"{prog}: no finished trial is within the limits {preset.limits}; best/ not written",
                  file=sys.stderr)
            return 1
        print(f"{prog}: best within the limits: trial {best['trial']} ({best['student']} {best['choices']}, "
              f"{best['backend']}): dev {best['metric']} {best['dev']:.4f}, {best['ms']:.3f} ms, "
              f"{best['size_mb']:.2f} MB -> {search_dir / 'best'}")
    return 0
