"""Comparing two sentence vectors, for students that read a pair's sentences apart."""

from __future__ import annotations

import torch


def pair_features(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """[u, v, |u - v|, u * v]: the concatenate-compare of GLUE's BiLSTM baseline, as Wu et al. (2019)
    §3.2 write it ([H1, H2, |H1 - H2|, H1 ⊙ H2]). Tang et al.'s siamese student orders its own
    features (siamese.py)."""
    return torch.cat([u, v, (u - v).abs(), u * v], dim=-1)
