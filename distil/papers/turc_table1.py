"""Turc et al. (2019) Table 1 on this machine: the 24 compact BERTs' parameters and their speed-up
over BERT Large (and BERT Base), one example of 512 wordpieces at a time, as the paper measures
(on a Cloud TPU there; on this CPU here).

    distil paper turc-table1 [--passes 3] [--threads 2] [--length 512]

Every model is BERT with random weights (the architecture sets the cost): L layers of width H, H/64
heads, a 4H feed-forward layer, BERT's 30,522 uncased wordpieces, its pooler and its pre-training
heads (the masked-LM transform and output bias, the next-sentence layer), which is how the paper
counts (4.4M for L=2/H=128, 110.1M for L=12/H=768); the encoder alone is timed. In each pass every
model runs the same input once, the order reversed every other pass; a speed-up is the median of
the per-pass ratios.
Writes outputs/tables/bench_turc.{md,csv}: one row per depth L (and BERT Base, BERT Large), a
column per width H for the parameters (millions) and for each speed-up.
"""

from __future__ import annotations

import argparse

import pandas as pd
import torch
import transformers
from rich.console import Console
from transformers import BertConfig, BertForPreTraining

from distil.bench.harness import count_params, interleaved_seconds, pass_ratios, spread
from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown
from distil.common.progress import progress_bar
from distil.serve.speed import torch_threads

LAYERS = (2, 4, 6, 8, 10, 12)
WIDTHS = (128, 256, 512, 768)
VOCAB = 30_522
REFERENCES = {"BERT Base": (12, 768), "BERT Large": (24, 1024)}


def bert(layers: int, hidden: int, quick: bool = False) -> BertForPreTraining:
    """Turc et al. §5: H/64 heads, 4H feed-forward, as pre-trained (MLM and next-sentence heads: the
    paper's counts include them, 4.4M for L=2/H=128). Quick (tests): a 16-wide stand-in of the same depth."""
    width = 16 if quick else hidden
    config = BertConfig(vocab_size=VOCAB, hidden_size=width, num_hidden_layers=layers,
                        num_attention_heads=max(1, width // 64), intermediate_size=4 * width)
    return BertForPreTraining(config).eval()


def table1(passes: int, length: int, quick: bool = False) -> pd.DataFrame:
    sizes = {f"L={layers}/H={hidden}": (layers, hidden) for layers in LAYERS for hidden in WIDTHS}
    sizes |= REFERENCES
    models = {name: bert(*size, quick=quick) for name, size in sizes.items()}
    generator = torch.Generator().manual_seed(0)
    inputs = [[(torch.randint(1000, VOCAB, (1, length), generator=generator), torch.ones(1, length, dtype=torch.long))]
              for _ in range(passes)]
    # timed as deployed: the encoder and pooler, without the pre-training heads
    forwards = {name: (lambda encoder: lambda ids, mask: encoder(input_ids=ids, attention_mask=mask))(model.bert)
                for name, model in models.items()}
    seconds = interleaved_seconds(forwards, inputs)
    rows = []
    for label, (layers, _) in [(f"L={layers}", (layers, None)) for layers in LAYERS] + [
            (name, size) for name, size in REFERENCES.items()]:
        row = {"model": label, "layers": layers}
        names = [f"L={layers}/H={hidden}" for hidden in WIDTHS] if label.startswith("L=") else [label]
        for name in names:
            suffix = f"_H{sizes[name][1]}" if label.startswith("L=") else ""
            for reference, key in (("BERT Large", "vs_large"), ("BERT Base", "vs_base")):
                ratio = spread(pass_ratios(seconds[reference], seconds[name]))
                row |= {f"speedup_{key}{suffix}": ratio.median, f"speedup_{key}{suffix}_min": ratio.min,
                        f"speedup_{key}{suffix}_max": ratio.max}
            row |= {f"params_m{suffix}": count_params(models[name]) / 1e6,
                    f"latency_ms{suffix}": 1000 * sorted(seconds[name])[len(seconds[name]) // 2]}
        rows.append(row)
    return pd.DataFrame(rows)


def bench(args: argparse.Namespace) -> None:
    """`distil paper turc-table1` (distil/cli/paper.py parses the arguments): measure, print, write."""
    transformers.logging.set_verbosity_error()
    with torch_threads(args.threads), progress_bar() as progress:
        progress.add_task("Turc Table 1: 24 compact BERTs against BERT Base and Large", total=None, status="")
        frame = table1(args.passes, args.length, args.quick)
    args.out.mkdir(parents=True, exist_ok=True)
    text = to_markdown(frame, index=False, floatfmt=".2f")
    header = (f"# Turc et al. Table 1 on this machine\n\n{args.threads} threads; batch 1, {args.length} wordpieces; "
              f"{args.passes} interleaved passes, speed-ups are medians of per-pass ratios\n\n")
    write_atomic(args.out / "bench_turc.csv", frame.to_csv(index=False))
    write_atomic(args.out / "bench_turc.md", header + text + "\n")
    Console().print(f"{text}\nwrote {args.out}/bench_turc.{{md,csv}}")
