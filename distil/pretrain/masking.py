"""BERT's masked-LM corruption (Devlin et al. 2018, §3.1 "Task #1: Masked LM"; Turc et al. 2019 §5.1).

Of the wordpieces that are not special tokens or padding, each is chosen for prediction with
probability `mask_prob` (15%); a chosen one is replaced by [MASK] with probability
`mask_token_prob` (80%), by a random wordpiece with `random_token_prob` (10%), else kept (10%).
The model predicts the original wordpiece at the chosen positions only (labels -100 elsewhere,
which torch's cross-entropy ignores).
"""

from __future__ import annotations

import torch

IGNORE = -100  # torch.nn.functional.cross_entropy's ignore_index


def mask_tokens(ids: torch.Tensor, maskable: torch.Tensor, mask_id: int, vocab_size: int,
                generator: torch.Generator, mask_prob: float = 0.15, mask_token_prob: float = 0.8,
                random_token_prob: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    """(corrupted ids, labels) for a batch `ids` [B, T]; `maskable` [B, T] is False at special
    tokens and padding. Random replacements are drawn uniformly from the whole vocabulary, as BERT
    does (special tokens included: they are rare among 30k)."""
    if mask_token_prob + random_token_prob > 1:
        raise ValueError("mask_token_prob + random_token_prob must be at most 1")
    draw = torch.rand(ids.shape, generator=generator)
    chosen = maskable & (draw < mask_prob)
    labels = torch.where(chosen, ids, torch.full_like(ids, IGNORE))
    how = torch.rand(ids.shape, generator=generator)
    to_mask = chosen & (how < mask_token_prob)
    to_random = chosen & (how >= mask_token_prob) & (how < mask_token_prob + random_token_prob)
    corrupted = ids.clone()
    corrupted[to_mask] = mask_id
    random_ids = torch.randint(vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    corrupted[to_random] = random_ids[to_random]
    return corrupted, labels
