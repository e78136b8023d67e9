"""Which of the pre-trained teacher's sentence vectors carries the task: a linear probe of [CLS] and of
the mean over its wordpieces, the two `agnostic.pooling` choices of Wu's task-agnostic stage (§3.1).

Wu distils BERT's [CLS]; the cpu teacher (all-MiniLM-L6-v2) is a sentence-transformer trained to give
its sentence vector as the mean. This reads both from the frozen, never fine-tuned teacher (the one
the task-agnostic stage distils, with its tokenizer and length), on the labeled set of Wu Table 1's
SST-2 cells (500 labels a class, each run seed's draw), and fits a logistic regression to each:
its C chosen on dev, test reported. The vectors are pooled by the code that makes the stage's targets
(distil.pretrain.sra.pooled_vectors).

    python scripts/teacher_pooling_probe.py            # -> results/probes/teacher-pooling.{csv,md}
    python scripts/teacher_pooling_probe.py teacher=bert-base hub_offline=false
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.linear_model import LogisticRegression

from distil.common.provenance import code_version, machine
from distil.config.compose import compose_run_config
from distil.data.cut import cut_all
from distil.data.split import build_task_data
from distil.errors import DistilError
from distil.pretrain.sra import POOLINGS, pooled_vectors
from distil.tasks import make_task
from distil.teacher.load import load_encoder, load_tokenizer

BASE = ["student=sra", "dataset=sst2", "dataset.split.labeled_per_class=500", "agnostic=cpu-long"]
SEEDS = (1, 2, 3)
CS = (0.1, 1.0, 10.0)  # logistic regression's inverse regularisation, chosen on dev
OUT = Path("results/probes")


def probe(overrides: list[str], seed: int, encoder, tokenizer) -> list[dict]:
    """One row per pooling: dev and test accuracy of the probe fitted on this seed's labeled draw."""
    cfg = compose_run_config([*BASE, *overrides, f"seed={seed}"])
    data = build_task_data(cfg.dataset, make_task(cfg.dataset), cfg.transfer_size, cfg.paths.data_dir, seed,
                           cfg.hub_offline)
    vectors, labels = {}, {}
    for split in ("labeled", "dev", "test"):
        texts = cut_all(list(data.splits[split]["text"]), cfg.agnostic.max_length)
        ids = tokenizer(texts, truncation=True, max_length=cfg.agnostic.max_length)["input_ids"]
        pooled = pooled_vectors(encoder, ids, tokenizer.pad_token_id, POOLINGS)
        vectors[split] = {pooling: values.numpy() for pooling, values in pooled.items()}
        labels[split] = np.asarray(data.splits[split]["label"])
    rows = []
    for pooling in POOLINGS:
        fits = [LogisticRegression(C=c, max_iter=5000).fit(vectors["labeled"][pooling], labels["labeled"]) for c in CS]
        dev = [fit.score(vectors["dev"][pooling], labels["dev"]) for fit in fits]
        best = int(np.argmax(dev))  # the first best C on dev
        rows.append({"seed": seed, "pooling": pooling, "C": CS[best], "dev": dev[best],
                     "test": fits[best].score(vectors["test"][pooling], labels["test"]),
                     "labeled": len(labels["labeled"])})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="distil overrides (default: the cpu teacher, minilm)")
    args = parser.parse_args(argv)
    cfg = compose_run_config([*BASE, *args.overrides])
    encoder, tokenizer = load_encoder(cfg.teacher, cfg.hub_offline), load_tokenizer(cfg.teacher, cfg.hub_offline)
    table = pd.DataFrame([row for seed in SEEDS for row in probe(args.overrides, seed, encoder, tokenizer)])
    summary = table.groupby("pooling")[["dev", "test"]].agg(["mean", "std"]).mul(100).round(2)
    summary.columns = [f"{split} {stat}" for split, stat in summary.columns]
    OUT.mkdir(parents=True, exist_ok=True)
    table.to_csv(OUT / "teacher-pooling.csv", index=False)
    command = " ".join(["python scripts/teacher_pooling_probe.py", *args.overrides])
    (OUT / "teacher-pooling.md").write_text(
        f"# The teacher's sentence vector under a linear probe ({cfg.teacher.name}, SST-2)\n\n"
        f"Logistic regression on the frozen, pre-trained teacher's vectors of each seed's {table.labeled[0]:,} "
        f"labeled sentences, C from {', '.join(map(str, CS))} chosen on dev; accuracy (%), mean and "
        f"standard deviation over seeds {', '.join(map(str, SEEDS))}.\n\n"
        f"{summary.to_markdown()}\n\nPer seed: teacher-pooling.csv. Made at {code_version()} on {machine()} "
        f"by `{command}`.\n")
    print(summary.to_string())
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except DistilError as problem:  # a bad override or missing data: one line, as `distil` says it
        sys.exit(f"teacher_pooling_probe: {problem}")
