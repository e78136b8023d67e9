"""`distil pretrain [key=value ...]`: build a student's task-independent start once, before any task.

    distil pretrain student=transformer-mini            # Turc et al.: masked-LM pre-training (pretrain group)
    distil pretrain student=sra                         # Wu et al.: task-agnostic SRA distillation (agnostic group)
    distil pretrain student=sra teacher=minilm agnostic.max_sentences=200000
    distil pretrain student=transformer-mini runtime.device=cuda runtime.precision=bf16

Every later run that starts from it (schedule=pf, pd, pdf for a Transformer; wu-sra, wu-sra-kd for
SRA) finds the artifact by its content key and does not build it again. pretrain.corpus=transfer
reads the task's transfer set: give dataset=... then. For a Transformer it prints the masked-LM
loss curve (training and held-out loss by step) beside the unigram level, the loss of predicting
the corpus's wordpiece frequencies without context: choose a budget (pretrain=cpu-long,
pretrain.steps=...) where the held-out loss is well below it and has stopped falling much.
It runs on runtime.device (a GPU when there is one) in runtime.precision; a precision other than
fp32 builds an artifact of its own. On the CPU it takes trainer.threads threads, as a run does
(trainer.threads=1 beside another job on 2 cores).
"""

from __future__ import annotations

import logging
import sys

from rich.console import Console
from rich.table import Table

from distil.cli.parsing import Parser
from distil.common.console import console_command
from distil.errors import DistilError

log = logging.getLogger(__name__)

CURVE_ROWS = 20  # the printed curve's most rows (the manifest keeps every entry)
UNIGRAM_NOTE = ("the unigram level is the loss of predicting the corpus's wordpiece frequencies without context; "
                "choose a budget (pretrain.steps) where the held-out loss is well below it and has flattened "
                "(every entry: manifest.json, info.history)")


def build(overrides: list[str]):
    """(artifact, what it is, its report) for the student the overrides name, built on the run's
    runtime (runtime.device, runtime.precision), active for the whole build."""
    from distil.common.runtime import Runtime, use
    from distil.config.compose import compose_run_config
    from distil.run.pipeline import setup_runtime
    from distil.students.pretrained import PRETRAINABLE

    cfg = compose_run_config(overrides)
    if cfg.student.kind not in PRETRAINABLE:
        raise DistilError(f"student '{cfg.student.name}' ({cfg.student.kind}) has no task-independent pre-training; "
                          f"give student=transformer-* (masked LM, Turc et al.) or student=sra (Wu et al.)")
    runtime = Runtime.resolve(cfg.runtime.device, cfg.runtime.precision)
    # trainer.threads as a run takes it: a build left at torch's default would crowd a job beside it
    # (`distil pretrain ... trainer.threads=1` next to a `distil table --threads 1`). Each build seeds
    # itself from its own setting (agnostic.seed, pretrain.seed); the run seed changes nothing here.
    setup_runtime(cfg.trainer.threads, cfg.seed, runtime)
    log.info("distil pretrain on %s", runtime)  # what runs where
    with use(runtime):
        return _build(cfg, overrides)


def _build(cfg, overrides: list[str]):
    from distil.pretrain.mlm import pretrained_transformer, unigram_level
    from distil.pretrain.sra import agnostic_student
    from distil.run.data import load_splits
    from distil.store.artifacts import ArtifactStore
    from distil.teacher.load import load_tokenizer

    store = ArtifactStore(cfg.paths.cache)
    if cfg.student.kind == "sra":
        artifact = agnostic_student(cfg.agnostic, cfg.teacher, cfg.student, cfg.hub_offline, store, cfg.paths.data_dir)
        return artifact, "task-agnostic SRA student (Wu et al.)", dict(artifact.info)
    texts = None
    if cfg.pretrain.corpus == "transfer":
        _, data = load_splits(overrides)
        transfer = data.splits["transfer"]
        texts = [t for column in ("text", "text_pair") if column in transfer.column_names for t in transfer[column]]
    tokenizer = load_tokenizer(cfg.teacher, cfg.hub_offline)
    artifact = pretrained_transformer(cfg.pretrain, cfg.student, tokenizer, store, cfg.paths.data_dir, texts)
    report = dict(artifact.info)
    if report.get("unigram_loss") is None:  # built before reports held it: the corpus says it, no training
        report["unigram_loss"] = unigram_level(cfg.pretrain, tokenizer, cfg.paths.data_dir, texts)
    return artifact, f"masked-LM pre-trained L{cfg.student.num_layers}/H{cfg.student.hidden_size} (Turc et al.)", report


def curve_table(report: dict, limit: int = CURVE_ROWS) -> Table | None:
    """The masked-LM loss curve of a pre-training report (pretrain/mlm.py) as a table: the entries
    with a held-out loss (all entries where none has one), at most `limit` of them, evenly spaced,
    the last always; None for a report without a curve (an SRA student's)."""
    history = [entry for entry in report.get("history") or [] if "mlm_loss" in entry]
    if not history:
        return None
    shown = [entry for entry in history if entry.get("heldout_mlm_loss") is not None] or history
    if len(shown) > limit:
        picks = {round(i * (len(shown) - 1) / (limit - 1)) for i in range(limit)}
        shown = [entry for i, entry in enumerate(shown) if i in picks]
    unigram = report.get("unigram_loss")
    table = Table(title="masked-LM loss curve (nats)",
                  caption=f"unigram level {unigram:.3f}" if isinstance(unigram, float) else "unigram level: not known")
    for column in ("step", "training MLM loss", "held-out MLM loss", "held-out - unigram"):
        table.add_column(column, justify="right")
    for entry in shown:
        heldout = entry.get("heldout_mlm_loss")
        table.add_row(str(entry["step"]), f"{entry['mlm_loss']:.3f}",
                      f"{heldout:.3f}" if heldout is not None else "-",
                      f"{heldout - unigram:+.3f}" if heldout is not None and isinstance(unigram, float) else "-")
    return table


def main(argv: list[str] | None = None, prog: str = "distil pretrain") -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] in (["-h"], ["--help"]):
        first, rest = __doc__.split("\n\n", 1)
        what = first.split(": ", 1)[1]
        parser = Parser(prog, "distil pretrain", what[0].upper() + what[1:] + "\n\n" + rest.split("\n\n", 1)[1],
                        "examples:\n" + rest.split("\n\n", 1)[0], usage=f"{prog} [key=value ...]")
        parser.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, as a run takes them")
        parser.print_help()
        return 0
    with console_command(prog, log_lines=True):  # each epoch's losses, a resumed build, the heartbeat
        artifact, what, report = build(args)
    losses = {k: v for k, v in report.items()
              if k in ("final_mlm_loss", "final_heldout_mlm_loss", "unigram_loss", "final_loss", "validation_loss")}
    state = "reused" if artifact.reused else "built"
    console = Console()
    table = curve_table(report)
    if table is not None:
        console.print(table)
        console.print(UNIGRAM_NOTE, markup=False)
    console.print(f"{what}: {state} {artifact.path}" + "".join(f", {k} {v:.4f}" for k, v in losses.items()
                                                               if isinstance(v, float)), markup=False)
    return 0
