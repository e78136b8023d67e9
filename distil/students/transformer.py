"""Compact BERT students (Turc et al. 2019): L layers of width H, H/64 heads, 4H intermediate.

Built from `transformers` config classes with random weights over the trimmed wordpiece
vocabulary (or a pre-trained encoder's: students/pretrained.py); [CLS] feeds the sequence head,
every position feeds the tagging head. A pair reads as BERT reads it, [CLS] a [SEP] b [SEP],
with segment (token type) 0 up to the first [SEP] and 1 after it.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BertConfig, BertModel

from distil.config.schema import StudentConfig
from distil.tasks import Task


class TransformerStudent(nn.Module):
    INPUTS = ("text", "pair", "tokens")
    LINEAR_CLASSIFIER = True  # `classifier` is one nn.Linear over the state (a projection can go under it)
    NEEDS_SEP_ID = True  # segment ids of a pair start after the first [SEP] (in the student's vocabulary)

    def __init__(self, vocab_size: int, layers: int, hidden: int, num_labels: int, dropout: float,
                 per_token: bool, max_positions: int = 512, sep_id: int | None = None):
        super().__init__()
        config = BertConfig(
            vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
            hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
            max_position_embeddings=max_positions, pad_token_id=0,
        )
        self.bert = BertModel(config, add_pooling_layer=False)
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(hidden, num_labels)
        self.per_token = per_token
        self.representation_size = hidden
        self.sep_id = sep_id  # None: every position is segment 0 (single texts, tokens)

    @classmethod
    def from_config(cls, cfg: StudentConfig, vocab_size: int, num_labels: int, task: Task,
                    sep_id: int | None = None):
        return cls(vocab_size, cfg.num_layers, cfg.hidden_size, num_labels, cfg.dropout, task.per_token,
                   sep_id=sep_id if task.inputs == "pair" else None)

    def segments(self, ids: torch.Tensor) -> torch.Tensor | None:
        """BERT's token types: 0 for [CLS] a [SEP], 1 for b [SEP] (Devlin et al. 2018, §3 Fig. 2)."""
        if self.sep_id is None:
            return None
        seps = (ids == self.sep_id).long()
        return ((seps.cumsum(dim=1) - seps) > 0).long()

    def layer_groups(self) -> list[tuple[str, nn.Module]]:
        layers = self.bert.encoder.layer
        return [("classifier", self.classifier),
                *[(f"layer {i}", layers[i - 1]) for i in range(len(layers), 0, -1)],
                ("embeddings", self.bert.embeddings)]

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
        states = self.bert(input_ids=ids, attention_mask=mask, token_type_ids=self.segments(ids)).last_hidden_state
        if self.per_token:
            return {"states": states, "logits": self.classifier(self.dropout(states))}
        pooled = states[:, 0]
        return {"pooled": pooled, "logits": self.classifier(self.dropout(pooled))}
