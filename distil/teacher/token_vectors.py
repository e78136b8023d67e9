"""The teacher's output vector of each wordpiece on its own: what student.embedding_init=model2vec
reduces to a static student's embedding table.

As model2vec.distill does it (create_output_embeddings_from_model): every wordpiece w is run as the
three-token sequence [SEP] w [CLS] (their reversed order, "better on our benchmarks") and its vector
is the mean of the last layer's three outputs.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from distil.common.progress import progress_bar
from distil.common.runtime import current, fetch

BATCH = 1024  # three tokens each: a batch is a few MB of activations


@torch.inference_mode()
def token_output_vectors(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, ids: list[int],
                         batch_size: int = BATCH) -> torch.Tensor:
    """[len(ids), H] float32: the mean of the encoder's last layer over [SEP] id [CLS], per id."""
    encoder = model.base_model  # the task head (classifier) is not part of the token's vector
    first, last = tokenizer.sep_token_id, tokenizer.cls_token_id
    if first is None or last is None:
        first, last = tokenizer.eos_token_id, tokenizer.bos_token_id
    column = torch.tensor(ids, dtype=torch.long).unsqueeze(1)
    sequences = torch.cat([torch.full_like(column, first), column, torch.full_like(column, last)], dim=1)
    was_training = encoder.training
    encoder.eval()
    runtime = current()
    chunks = []
    with progress_bar() as progress:
        task = progress.add_task("teacher vectors of the student's wordpieces", total=len(ids), status="")
        for start in range(0, len(ids), batch_size):
            batch = runtime.put(sequences[start:start + batch_size])
            with runtime.autocast(runtime.cache_precision):  # kept, as the cached targets are: never bf16
                states = encoder(input_ids=batch, attention_mask=torch.ones_like(batch)).last_hidden_state
            chunks.append(fetch(states.float().mean(dim=1)))
            progress.update(task, advance=len(batch))
    encoder.train(was_training)
    return torch.cat(chunks) if chunks else torch.zeros(0, model.config.hidden_size)
