"""Pre-train a compact BERT by masked LM (+ next-sentence prediction) once, as a content-keyed artifact.

Turc et al. 2019 §3 step 1: the student is pre-trained on unlabeled LM data (D_LM) before it is
distilled (PD) or fine-tuned (PF). The artifact (outputs/cache/pretrained/<name>-<hash>/) holds the
encoder's weights over the teacher tokenizer's full wordpiece vocabulary, keyed by the student's
size, the tokenizer, the corpus's lines, every pre-training setting and the seed: every task and
run with those reuses it. Training saves a checkpoint in the build directory every
`checkpoint_every_seconds`; a killed pre-training resumes from it with the same batches.

The artifact's report (its manifest's info) holds the loss curve: the running training MLM loss
every LOG_EVERY steps, the MLM loss on a held-out slice of the corpus every `heldout_every` steps,
and the unigram level (corpus.unigram_loss) to read them against: a loss near it means the student
has learned the wordpieces' frequencies and little of the context. `distil pretrain` prints it.

It runs on the active runtime (distil.common.runtime): the model on its device, each batch copied
there once, the forward passes under its precision. Batches and their masks are drawn on the CPU,
so a run draws the same examples on any device; a precision other than fp32 changes the weights
and is part of the artifact's key (fp32 adds nothing: the keys from before devices).
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import BertConfig, BertForMaskedLM, BertForPreTraining, get_linear_schedule_with_warmup

from distil.common import distributed, tracking
from distil.common.progress import progress_bar
from distil.common.runtime import current, fetch, precision_key
from distil.config.schema import PretrainConfig, as_plain_dict
from distil.errors import DistilError, check_choice
from distil.pretrain.corpus import ExampleSampler, lines_digest, read_lines, tokenize, unigram_loss
from distil.pretrain.masking import IGNORE
from distil.store.artifacts import Artifact, ArtifactStore
from distil.training.checkpoint import Checkpoint, cuda_rng_states, rank_rng_states, restore_rng_states
from distil.training.loop import optimiser_step

log = logging.getLogger(__name__)

OBJECTIVES = ("mlm+nsp", "mlm")
CHECKPOINT = "pretrain-checkpoint.pt"
WEIGHTS = "model.safetensors"
LOG_EVERY = 100  # steps between the losses kept in the artifact's history
BERT_GRAD_CLIP = 1.0  # BERT's total-norm clip
LAYOUT_VERSION = 1
HELDOUT_SEED = 0  # the held-out slice's masks and next sentences: one draw, the same for every run seed
# report-only settings (PretrainConfig): no weight depends on them, so at their schema default they
# stay out of the artifact's key, which is then the key of every artifact built before they existed
REPORT_ONLY = ("heldout_sentences", "heldout_every")


def bert_config(layers: int, hidden: int, vocab_size: int, dropout: float, pad_id: int) -> BertConfig:
    """Turc et al. §5: L layers of width H, H/64 attention heads, a 4H feed-forward layer."""
    return BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
                      num_attention_heads=max(1, hidden // 64), intermediate_size=4 * hidden,
                      hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout,
                      max_position_embeddings=512, pad_token_id=pad_id)


def check_pretrain(cfg: PretrainConfig) -> None:
    check_choice("pretrain.objective", cfg.objective, OBJECTIVES)
    if cfg.mask_token_prob + cfg.random_token_prob > 1:
        raise DistilError(f"pretrain.mask_token_prob + pretrain.random_token_prob = "
                          f"{cfg.mask_token_prob + cfg.random_token_prob:g} is above 1; lower one of them")


def corpus_lines(cfg: PretrainConfig, data_dir: str, transfer_texts: list[str] | None) -> list[str]:
    """The corpus: a text file under paths.data_dir, or the task's transfer texts."""
    return corpus_split(cfg, data_dir, transfer_texts)[0]


def corpus_split(cfg: PretrainConfig, data_dir: str,
                 transfer_texts: list[str] | None) -> tuple[list[str], list[str]]:
    """(the lines trained on: the corpus's first max_sentences, the held-out lines: the
    heldout_sentences after them, fewer or none where the corpus ends first or max_sentences is null)."""
    heldout = cfg.heldout_sentences if cfg.max_sentences else 0
    if cfg.corpus == "transfer":
        lines = [text.strip() for text in transfer_texts or [] if text and text.strip()]
        if not lines:
            raise DistilError("pretrain.corpus=transfer, but this run's transfer set is empty; choose a "
                              "transfer_size above 0x or a text file (pretrain.corpus=<path under paths.data_dir>)")
    else:
        limit = cfg.max_sentences + heldout if cfg.max_sentences else None
        lines = read_lines("pretrain.corpus", cfg.corpus, data_dir, limit)
    if not cfg.max_sentences:
        return lines, []
    return lines[: cfg.max_sentences], lines[cfg.max_sentences: cfg.max_sentences + heldout]


def pretrain_spec(cfg: PretrainConfig, layers: int, hidden: int, tokenizer_identity: dict, digest: str,
                  seed: int, precision: str | None = None) -> dict:
    """The artifact's key. `precision` (None: the active runtime's) enters it only when it is not
    fp32, so every fp32 key is the one from before precisions; the device never does (a GPU and the
    CPU train the same model within float rounding)."""
    defaults = PretrainConfig()
    settings = {key: value for key, value in as_plain_dict(cfg).items()
                if key not in ("name", "description", "corpus", "max_sentences", "checkpoint_every_seconds")
                and not (key in REPORT_ONLY and value == getattr(defaults, key))}
    return {"layers": layers, "hidden": hidden, "tokenizer": tokenizer_identity, "corpus": digest,
            "settings": settings, "seed": seed, "layout": LAYOUT_VERSION,
            **precision_key(precision or current().precision)}


def ensure_pretrained(cfg: PretrainConfig, layers: int, hidden: int, tokenizer, tokenizer_identity: dict,
                      store: ArtifactStore, data_dir: str, seed: int,
                      transfer_texts: list[str] | None = None) -> Artifact:
    """The pre-trained encoder for an L x H student: built once, then read by every run."""
    check_pretrain(cfg)
    lines, heldout = corpus_split(cfg, data_dir, transfer_texts)
    digest = lines_digest(lines)
    describe = {"layers": layers, "hidden": hidden, "corpus": cfg.corpus, "sentences": len(lines),
                "steps": cfg.steps, "objective": cfg.objective}
    artifact = store.get_or_build(
        "pretrained", f"bert-L{layers}-H{hidden}", pretrain_spec(cfg, layers, hidden, tokenizer_identity, digest, seed),
        lambda out: pretrain(cfg, layers, hidden, tokenizer, lines, seed, out, heldout), describe=describe)
    if artifact.reused:
        log.info("reusing pre-trained student %s; not pre-training again", artifact.path)
    else:
        log.info("pre-trained student saved to %s", artifact.path)
    return artifact


def pretrain(cfg: PretrainConfig, layers: int, hidden: int, tokenizer, lines: list[str], seed: int,
             out: Path, heldout: list[str] | None = None) -> dict:
    """Train `cfg.steps` steps into `out` (resuming its checkpoint if one is there); the artifact's info.
    `heldout`: lines never trained on, whose masked-LM loss the history records every
    `cfg.heldout_every` steps (it draws nothing from the training's generators: the weights are
    the same with or without it).

    Not `training.fit`, by design: pre-training counts optimiser steps, not epochs (Turc et al. run a
    million, with a linear warm-up and decay over steps), draws every batch afresh from the corpus
    (there is no epoch to shuffle), has no dev score to stop on or select by (the last step is the
    model), and saves its state by the clock between steps. It shares fit's optimiser step
    (training.loop.optimiser_step).
    """
    nsp = cfg.objective == "mlm+nsp"
    sentences = tokenize(tokenizer, lines, cfg.max_length)
    sampler = ExampleSampler(sentences, tokenizer, cfg.max_length, nsp, cfg.mask_prob, cfg.mask_token_prob,
                             cfg.random_token_prob)
    heldout_batches = heldout_examples(cfg, tokenizer, heldout or [], nsp)
    runtime = current()
    scaler = runtime.grad_scaler()
    torch.manual_seed(seed)  # the weights are drawn on the CPU, the same on every device
    config = bert_config(layers, hidden, len(tokenizer), cfg.dropout, tokenizer.pad_token_id)
    model = (BertForPreTraining if nsp else BertForMaskedLM)(config).to(runtime.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_fraction * cfg.steps), cfg.steps)
    rng, generator = np.random.default_rng(seed), torch.Generator().manual_seed(seed)
    step, history, seconds = 0, [], 0.0
    checkpoint = out / CHECKPOINT
    # tensors, numbers, strings: never code; onto the CPU whichever device wrote it (load_state_dict
    # copies the weights to the model's device, and the optimiser's state to its parameters')
    if (state := Checkpoint(checkpoint).load()) is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if scaler.is_enabled() and state.get("scaler"):
            scaler.load_state_dict(state["scaler"])
        rng.bit_generator.state = state["numpy_rng"]
        generator.set_state(state["torch_rng"])
        # dropout draws from torch's global generator on the CPU, and from the CUDA ones on a GPU (those
        # restored only on a machine with as many GPUs; a checkpoint from before them has none)
        restore_rng_states({"torch_rng": state["dropout_rng"], "cuda_rng": state.get("cuda_rng"),
                            "rank_rng": state.get("rank_rng")})
        step, history, seconds = state["step"], state["history"], state["seconds"]
        log.info("resuming pre-training at step %d of %d from %s", step, cfg.steps, checkpoint)
    model.train()
    started, saved = time.perf_counter() - seconds, time.perf_counter()
    running = {"mlm": 0.0, "nsp": 0.0, "n": 0}
    with progress_bar() as progress:
        bar = progress.add_task(f"pre-training L{layers}/H{hidden} (masked LM)", total=cfg.steps, completed=step,
                                status="")
        while step < cfg.steps:
            # drawn whole on every process (one generator state); under torchrun each trains on its rows
            whole = sampler.batch(cfg.batch_size, rng, generator)
            rows, weight = distributed.my_part(np.arange(cfg.batch_size))
            batch = runtime.put(whole.select(rows) if distributed.active() else whole)
            loss, mlm_value, nsp_value = None, 0.0, 0.0
            if weight > 0:
                with runtime.autocast():
                    mlm_loss, nsp_loss = losses(model, batch, nsp)
                    loss = mlm_loss + (nsp_loss if nsp_loss is not None else 0.0)
                no_nsp = torch.zeros_like(mlm_loss)
                mlm_value, nsp_value = host_values(mlm_loss, nsp_loss if nsp_loss is not None else no_nsp)
            if distributed.active():  # the global batch's losses, on every process
                mlm_value, nsp_value = distributed.total(mlm_value * weight, nsp_value * weight)
            if not math.isfinite(mlm_value + nsp_value):  # stop before it reaches the weights
                raise DistilError(f"pre-training diverged at step {step + 1} (loss {mlm_value + nsp_value}); "
                                  f"lower pretrain.lr (now {cfg.lr:g})")
            optimiser_step(loss, optimizer, list(model.parameters()), BERT_GRAD_CLIP, scheduler, scaler, weight)
            step += 1
            running["mlm"] += mlm_value
            running["nsp"] += nsp_value
            running["n"] += 1
            progress.update(bar, advance=1, status=f"mlm loss {running['mlm'] / running['n']:.3f}")
            evaluate = bool(heldout_batches) and (step % cfg.heldout_every == 0 or step == cfg.steps)
            if step % LOG_EVERY == 0 or step == cfg.steps or evaluate:
                entry = {"step": step, "mlm_loss": running["mlm"] / running["n"]}
                if nsp:
                    entry["nsp_loss"] = running["nsp"] / running["n"]
                heldout_mlm = heldout_loss(model, heldout_batches) if evaluate and distributed.is_main() else None
                if heldout_mlm is not None:  # None: the slice drew no position to predict
                    entry["heldout_mlm_loss"] = heldout_mlm
                history.append(entry)
                tracking.current().log_epoch("pre-training", step, {k: v for k, v in entry.items() if k != "step"})
                log.info("pre-training step %d/%d: %s", step, cfg.steps,
                         ", ".join(f"{k} {v:.4f}" for k, v in entry.items() if k != "step"))
                running = {"mlm": 0.0, "nsp": 0.0, "n": 0}
            # rank 0's clock decides for every rank: saving gathers each rank's dropout state
            if step < cfg.steps and distributed.broadcast(time.perf_counter() - saved >= cfg.checkpoint_every_seconds):
                save_checkpoint(checkpoint, model, optimizer, scheduler, rng, generator, step, history,
                                time.perf_counter() - started, scaler)
                saved = time.perf_counter()
    # from the CPU: the artifact's bytes are the same whichever device trained it
    encoder = {name.removeprefix("bert."): tensor.detach().cpu().contiguous()
               for name, tensor in model.state_dict().items()
               if name.startswith("bert.") and not name.startswith("bert.pooler.")}
    if distributed.is_main():  # under torchrun: rank 0 writes the build directory
        save_file(encoder, out / WEIGHTS)
        (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2))
        checkpoint.unlink(missing_ok=True)  # complete: nothing to resume
    heldout_curve = [entry["heldout_mlm_loss"] for entry in history if "heldout_mlm_loss" in entry]
    return {"steps": step, "history": history, "sentences": len(sentences),
            "wordpieces": int(sentences.lengths().sum()), "seconds": round(time.perf_counter() - started, 1),
            "final_mlm_loss": history[-1]["mlm_loss"] if history else None,
            "final_heldout_mlm_loss": heldout_curve[-1] if heldout_curve else None,
            "heldout_sentences": len(heldout or []), "unigram_loss": unigram_loss(sentences)}


def heldout_examples(cfg: PretrainConfig, tokenizer, lines: list[str], nsp: bool) -> list:
    """The held-out slice as fixed batches: each line once as the first sentence, masked (and paired,
    with nsp: the line after it in the slice, or a random one of it) with HELDOUT_SEED, so every
    evaluation, every resumed build and every run seed read the same examples."""
    if not lines:
        return []
    sentences = tokenize(tokenizer, lines, cfg.max_length)
    sampler = ExampleSampler(sentences, tokenizer, cfg.max_length, nsp, cfg.mask_prob, cfg.mask_token_prob,
                             cfg.random_token_prob)
    rng, generator = np.random.default_rng(HELDOUT_SEED), torch.Generator().manual_seed(HELDOUT_SEED)
    order = np.arange(len(sentences))
    return [sampler.batch_at(order[start:start + cfg.batch_size], rng, generator)
            for start in range(0, len(order), cfg.batch_size)]


def heldout_loss(model, batches: list) -> float | None:
    """The masked-LM cross-entropy over every chosen position of the held-out batches (in eval mode:
    no dropout, so nothing is drawn from torch's generator and training continues as without it),
    under the run's precision, as training computes its loss. The batches stay on the CPU; each is
    copied to the device once and its summed loss copied back once."""
    runtime = current()
    model.eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for batch in batches:
            chosen = batch.labels != IGNORE
            if not chosen.any():  # counted on the CPU: no wait for the device
                continue
            batch = runtime.put(batch)
            with runtime.autocast():
                out = model.bert(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                 token_type_ids=batch.token_type_ids)
                on = batch.labels != IGNORE
                logits = model.cls.predictions(out.last_hidden_state[on])
                loss = torch.nn.functional.cross_entropy(logits, batch.labels[on], reduction="sum")
            total += float(fetch(loss))
            count += int(chosen.sum())
    model.train()
    return total / count if count else None


def host_values(*scalars: torch.Tensor) -> list[float]:
    """Scalar tensors as floats in one copy to the host: one wait for the device a step, not one each."""
    return fetch(torch.stack([scalar.detach().float() for scalar in scalars])).tolist()


def losses(model, batch, nsp: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The masked-LM cross-entropy over the chosen positions and, with nsp, the next-sentence one.
    The vocabulary head runs on the chosen positions alone (15% of them): over all of them it would
    cost a [batch x length x 30k] tensor a step, more than the encoder on a CPU."""
    out = model.bert(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                     token_type_ids=batch.token_type_ids)
    chosen = batch.labels != IGNORE
    logits = model.cls.predictions(out.last_hidden_state[chosen])
    # a batch of a few short lines can draw no position at all: nothing to predict, a zero loss
    mlm = (torch.nn.functional.cross_entropy(logits, batch.labels[chosen]) if chosen.any()
           else out.last_hidden_state.sum() * 0.0)
    if not nsp:
        return mlm, None
    return mlm, torch.nn.functional.cross_entropy(model.cls.seq_relationship(out.pooler_output),
                                                  batch.next_sentence_label)


def save_checkpoint(path: Path, model, optimizer, scheduler, rng, generator, step, history, seconds,
                    scaler: torch.amp.GradScaler | None = None) -> None:
    """`torch_rng` is the masking generator's state (always on the CPU), `dropout_rng` and `cuda_rng`
    the global ones dropout draws from; `scaler` fp16's loss scale (None when not in use)."""
    Checkpoint(path).save({
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
        "numpy_rng": rng.bit_generator.state, "torch_rng": generator.get_state(),
        "dropout_rng": torch.get_rng_state(), "cuda_rng": cuda_rng_states(), **rank_rng_states(),
        "scaler": scaler.state_dict() if scaler is not None and scaler.is_enabled() else None,
        "step": step, "history": history, "seconds": seconds})


def load_encoder(artifact_path: Path) -> tuple[dict[str, torch.Tensor], dict]:
    """(the encoder's weights by BertModel name, its BertConfig as a dict)."""
    from safetensors.torch import load_file

    return load_file(artifact_path / WEIGHTS), json.loads((artifact_path / "config.json").read_text())


def tokenizer_identity(tokenizer) -> dict:
    """What makes the tokenizer's ids: its wordpiece table, class and casing (the artifact key's part)."""
    from distil.students.pretrained import vocab_digest

    return {"vocab": vocab_digest(tokenizer), "class": type(tokenizer).__name__,
            "lower": getattr(tokenizer, "do_lower_case", None)}


def unigram_level(cfg: PretrainConfig, tokenizer, data_dir: str,
                  transfer_texts: list[str] | None = None) -> float | None:
    """corpus.unigram_loss of the lines this config trains on, for an artifact built before its
    report held it (a tokenization of the corpus: a minute for 400,000 lines, no training)."""
    return unigram_loss(tokenize(tokenizer, corpus_lines(cfg, data_dir, transfer_texts), cfg.max_length))


def pretrained_transformer(cfg: PretrainConfig, student_cfg, tokenizer, store: ArtifactStore, data_dir: str,
                           transfer_texts: list[str] | None = None) -> Artifact:
    """The masked-LM pre-trained encoder for this Transformer student's size: built once."""
    return ensure_pretrained(cfg, student_cfg.num_layers, student_cfg.hidden_size, tokenizer,
                             tokenizer_identity(tokenizer), store, data_dir, cfg.seed, transfer_texts)

