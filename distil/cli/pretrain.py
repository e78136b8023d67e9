"""`distil pretrain [key=value ...]`: build a student's task-independent start once, before any task.

    distil pretrain student=transformer-mini            # Turc et al.: masked-LM pre-training (pretrain group)
    distil pretrain student=sra                         # Wu et al.: task-agnostic SRA distillation (agnostic group)
    distil pretrain student=sra teacher=minilm agnostic.max_sentences=200000

Every later run that starts from it (schedule=pf, pd, pdf for a Transformer; wu-sra, wu-sra-kd for
SRA) finds the artifact by its content key and does not build it again. pretrain.corpus=transfer
reads the task's transfer set: give dataset=... then.
"""

from __future__ import annotations

import sys

from rich.console import Console

from distil.cli.parsing import Parser
from distil.common.console import console_command
from distil.errors import DistilError


def build(overrides: list[str]):
    """(artifact, what it is) for the student the overrides name."""
    from distil.config.compose import compose_run_config
    from distil.pretrain.mlm import pretrained_transformer
    from distil.pretrain.sra import agnostic_student
    from distil.run.data import load_splits
    from distil.store.artifacts import ArtifactStore
    from distil.students.pretrained import PRETRAINABLE
    from distil.teacher.load import load_tokenizer

    cfg = compose_run_config(overrides)
    store = ArtifactStore(cfg.paths.cache)
    kind = cfg.student.kind
    if kind not in PRETRAINABLE:
        raise DistilError(f"student '{cfg.student.name}' ({kind}) has no task-independent pre-training; give "
                          f"student=transformer-* (masked LM, Turc et al.) or student=sra (Wu et al.)")
    if kind == "sra":
        return agnostic_student(cfg.agnostic, cfg.teacher, cfg.student, cfg.hub_offline, store,
                                cfg.paths.data_dir), "task-agnostic SRA student (Wu et al.)"
    texts = None
    if cfg.pretrain.corpus == "transfer":
        _, data = load_splits(overrides)
        transfer = data.splits["transfer"]
        texts = [t for column in ("text", "text_pair") if column in transfer.column_names for t in transfer[column]]
    tokenizer = load_tokenizer(cfg.teacher, cfg.hub_offline)
    return (pretrained_transformer(cfg.pretrain, cfg.student, tokenizer, store, cfg.paths.data_dir, texts),
            f"masked-LM pre-trained L{cfg.student.num_layers}/H{cfg.student.hidden_size} (Turc et al.)")


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
        artifact, what = build(args)
    losses = {k: v for k, v in artifact.info.items() if k in ("final_mlm_loss", "final_loss", "validation_loss")}
    state = "reused" if artifact.reused else "built"
    Console().print(f"{what}: {state} {artifact.path}" + "".join(f", {k} {v:.4f}" for k, v in losses.items()
                                                                 if isinstance(v, float)))
    return 0
