"""Wordpiece-encode texts with the teacher's tokenizer (students read the same ids)."""

from __future__ import annotations

import datasets


def encode(tokenizer, ds: datasets.Dataset, max_length: int) -> list[list[int]]:
    """Token ids per example, [CLS] ... [SEP], truncated to max_length."""
    if len(ds) == 0:
        return []
    encoded = ds.map(
        lambda batch: tokenizer(batch["text"], truncation=True, max_length=max_length),
        batched=True,
        batch_size=1000,
        remove_columns=ds.column_names,
    )
    return list(encoded["input_ids"])
