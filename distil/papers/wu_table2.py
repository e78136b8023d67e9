"""Wu et al. (2019) Table 2 on this machine: parameters without the embeddings and the inference
time of BERT Large, BERT Base, BiLSTM_KD and BiLSTM_SRA on Quora question pairs at batch 1024.

    distil paper wu-table2 [--data-dir ../shared/data] [--pairs 128] [--batch 64] [--passes 2] [--threads 2]

The paper times 100k QQP pairs on a P40 GPU at batch 1024. Here the first --pairs Quora pairs
(../shared/data/quora-pairs, the offline stand-in) run in batches of --batch (64: one batch of 1024
pairs through BERT Large takes a quarter of an hour on 2 cores) through each model with
random weights (the architecture sets the cost): the BERTs read the pair joined ([CLS] a [SEP] b
[SEP]), the students read each question apart (siamese). Passes are interleaved, the order reversed
every other pass; the seconds are scaled to 100,000 pairs and each model's ratio to BiLSTM_SRA is
the median of the per-pass ratios. Parameters leave out the word-embedding matrix, as Wu counts.
Writes outputs/tables/bench_wu.{md,csv}.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd
import torch
import transformers
from rich.console import Console
from transformers import BertConfig, BertForSequenceClassification

from distil.bench.harness import count_params, interleaved_seconds, pass_ratios, spread
from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown
from distil.common.progress import progress_bar
from distil.errors import DistilError
from distil.papers.tang_table2 import batches_of, minilm_tokenizer
from distil.serve.speed import torch_threads
from distil.students.siamese import SiameseBiLSTM
from distil.students.sra import SRAStudent

QUORA = Path("quora-pairs") / "quora_dev_balanced10k.tsv"
SCALE_TO = 100_000  # Wu §5.2: 100k QQP samples
PAPER_BATCH = 1024  # Wu §5.2
REFERENCE = "BiLSTM_SRA"


def read_pairs(data_dir: Path, count: int) -> tuple[list[str], list[str]]:
    path = data_dir / QUORA
    if not path.is_file():
        raise DistilError(f"{path} not found: give --data-dir the folder that holds quora-pairs/ (../shared/data here)")
    frame = pd.read_csv(path, sep="\t", quoting=3, keep_default_na=False).head(count)
    return frame["question1"].astype(str).tolist(), frame["question2"].astype(str).tolist()


def bert(layers: int, hidden: int, quick: bool) -> BertForSequenceClassification:
    width, depth = (32, 2) if quick else (hidden, layers)
    return BertForSequenceClassification(BertConfig(num_hidden_layers=depth, hidden_size=width,
                                                    num_attention_heads=max(1, width // 64),
                                                    intermediate_size=4 * width)).eval()


def models(vocab: int, quick: bool) -> dict[str, tuple[torch.nn.Module, str]]:
    """name -> (model, what it reads: "joined" pairs or pairs read "apart")."""
    return {
        "BERT Large": (bert(24, 1024, quick), "joined"),
        "BERT Base": (bert(12, 768, quick), "joined"),
        # Tang et al.'s siamese student (student=siamese): E300, 2 x 150, ReLU 200
        "BiLSTM_KD": (SiameseBiLSTM(vocab, 300, 150, 2, 0.0, 200).eval(), "apart"),
        # Wu's SRA student (student=sra): E300, 2 x 512, a 768-d sentence vector (BERT Base's), MLP 256
        "BiLSTM_SRA": (SRAStudent(vocab, 300, 512, 2, 0.0, 256, 768, pair=True).eval(), "apart"),
    }


def without_word_embeddings(model: torch.nn.Module) -> int:
    embedding = next(m for m in model.modules() if isinstance(m, torch.nn.Embedding))
    return count_params(model) - embedding.weight.numel()


def forward_of(model: torch.nn.Module, reads: str):
    """The model on its part of a timed item (joined ids, mask, then each sentence's ids and mask)."""
    if reads == "joined":
        return lambda joined, joined_mask, *_: model(input_ids=joined, attention_mask=joined_mask)
    return lambda _joined, _mask, a, a_mask, b, b_mask: model(a, a_mask, b, b_mask)


def table2(firsts: list[str], seconds: list[str], tok, passes: int, batch: int, quick: bool = False) -> pd.DataFrame:
    joined = batches_of(tok(firsts, seconds, truncation=True, max_length=128)["input_ids"], batch)
    apart = list(zip(batches_of(tok(firsts, truncation=True, max_length=64)["input_ids"], batch),
                     batches_of(tok(seconds, truncation=True, max_length=64)["input_ids"], batch), strict=True))
    items = [(*j, *a, *b) for j, (a, b) in zip(joined, apart, strict=True)]  # each model takes its part
    per_pass = [p for p in (items[k::passes] for k in range(passes)) if p]
    built = models(len(tok), quick)
    forwards = {name: forward_of(model, reads) for name, (model, reads) in built.items()}
    timed = interleaved_seconds(forwards, per_pass)
    rows = []
    for name, (model, _) in built.items():
        ratio = spread(pass_ratios(timed[REFERENCE], timed[name])) if name != REFERENCE else None
        total = sum(timed[name])
        rows.append({"model": name, "params_m": without_word_embeddings(model) / 1e6, "pairs_timed": len(firsts),
                     "seconds_timed": total, "seconds_100k": total * SCALE_TO / len(firsts),
                     # the paper's (x): how many times the reference's size and time
                     "params_x": without_word_embeddings(model) / without_word_embeddings(built[REFERENCE][0]),
                     "time_x": 1 / ratio.median if ratio else 1.0,
                     "time_x_min": 1 / ratio.max if ratio else 1.0, "time_x_max": 1 / ratio.min if ratio else 1.0,
                     "passes": len(per_pass)})
    return pd.DataFrame(rows)


def bench(args: argparse.Namespace) -> None:
    """`distil paper wu-table2` (distil/cli/paper.py parses the arguments): measure, print, write."""
    transformers.logging.set_verbosity_error()
    console = Console()
    firsts, seconds = read_pairs(args.data_dir, args.pairs * args.passes)
    with torch_threads(args.threads), progress_bar() as progress:
        progress.add_task("Wu Table 2: BERT Large, BERT Base and the BiLSTMs on Quora pairs", total=None,
                          status="")
        tok = minilm_tokenizer()
        frame = table2(firsts, seconds, tok, args.passes, args.batch, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    text = to_markdown(frame, index=False, floatfmt=".3f")
    write_atomic(args.out / "bench_wu.csv", frame.to_csv(index=False))
    write_atomic(args.out / "bench_wu.md", f"# Wu et al. Table 2 on this machine\n\n{args.threads} threads; "
                                           f"Quora pairs from {args.data_dir}, batch {args.batch}\n\n{text}\n")
    console.print(f"{text}\nwrote {args.out}/bench_wu.{{md,csv}}")
