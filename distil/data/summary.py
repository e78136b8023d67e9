"""The splits a run would see, as the papers' tables show them (`distil data`, tables of kind data).

Classification and pairs follow Mukherjee & Awadallah Tables 3-4 (classes, labeled,
labeled per class, transfer, test, average words per document); tagging follows
XtremeDistil Table 1 (labels, train, test, unlabeled) with one row per language.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd

from distil.data.split import SPLITS, TaskData


def average_words(data: TaskData, split: str) -> float:
    ds = data.splits[split]
    if len(ds) == 0:
        return 0.0
    if data.task.inputs == "tokens":
        return sum(len(tokens) for tokens in ds["tokens"][:]) / len(ds)
    texts = ds["text"][:]
    words = sum(len(t.split()) for t in texts)
    if data.task.inputs == "pair":
        words += sum(len(t.split()) for t in ds["text_pair"][:])
    return words / len(ds)


def overview(data: TaskData, name: str) -> pd.DataFrame:
    sizes = data.summary()
    row = {"dataset": name, "task": data.task.name, "labels": data.num_labels, "labeled": sizes["labeled"]}
    if data.task.has_classes:
        counts = Counter(data.splits["labeled"]["label"][:])
        row["labeled/class"] = min(counts.values()) if len(set(counts.values())) == 1 else "varies"
    row.update({"transfer (unlabeled)": sizes["transfer"], "dev": sizes["dev"], "test": sizes["test"],
                **{split: sizes[split] for split in data.extra_tests},  # e.g. MNLI's test_mismatched
                "#W (labeled)": round(average_words(data, "labeled"), 1)})
    return pd.DataFrame([row])


def label_distribution(data: TaskData) -> pd.DataFrame:
    """Examples per class, entity spans per type, or score statistics: as the task describes its labels."""
    table = {split: data.task.label_summary(data.splits[split], data.label_names)
             for split in ("labeled", "dev", "test", *data.extra_tests)}
    frame = pd.DataFrame(table).fillna(0)
    frame.index.name = data.task.label_summary_title
    return frame.astype(int).sort_index() if (frame % 1 == 0).all().all() else frame.round(3)


def per_language(data: TaskData) -> pd.DataFrame:
    counts = {split: Counter(data.splits[split]["language"][:]) for split in SPLITS}  # one column read per split
    return pd.DataFrame([{"language": lang, **{split: counts[split][lang] for split in SPLITS}}
                         for lang in data.languages])
