"""Wu et al.'s task-agnostic stage counted in optimiser updates: `agnostic.steps` trains
exactly that many updates, cycling through the corpus as needed, so Table 4's corpus sizes compare at
one update count (Wu §5.4); null keeps `epochs` passes and every existing artifact key."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch
from omegaconf import OmegaConf
from transformers import BertConfig, BertModel, BertTokenizerFast

import distil.pretrain.sra as sra
from distil.config.schema import AgnosticConfig
from distil.errors import DistilError
from distil.store.artifacts import spec_hash

WORDS = "the a cat dog sat ran on in park mat sun rose hill bird sang tree rain fell town".split()
STUDENT = OmegaConf.create({"embedding_dim": 8, "hidden_size": 6, "dropout": 0.1, "mlp_hidden_size": 5, "num_layers": 1,
                           "embedding_init": "random"})


def toy_lines(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 9))) for _ in range(count)]


def toy_tokenizer(tmp_path) -> BertTokenizerFast:
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]))
    return BertTokenizerFast(vocab_file=str(vocab))


def toy_encoder(tokenizer) -> BertModel:
    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1,
                                num_attention_heads=1, intermediate_size=32)).eval()


def initial_rows(dim, vocab):
    return torch.randn(len(vocab), dim, generator=torch.Generator().manual_seed(0))


def agnostic(**settings) -> AgnosticConfig:
    return dataclasses.replace(AgnosticConfig(), batch_size=8, max_length=16, **settings)


class Killed(Exception):
    """The build's process dies here."""


def counting_updates(monkeypatch, fail_at: int | None = None) -> list[int]:
    """Counts the optimiser updates; with fail_at, the run is killed as that update starts."""
    calls: list[int] = []
    from distil.training.loop import optimiser_step as step

    def counted(*args, **kwargs):
        if fail_at is not None and len(calls) + 1 == fail_at:
            raise Killed
        calls.append(1)
        return step(*args, **kwargs)
    monkeypatch.setattr(sra, "optimiser_step", counted)
    return calls


def build(tmp_path, name, cfg, lines, held_out):
    tokenizer = toy_tokenizer(tmp_path)
    encoder = toy_encoder(tokenizer)
    out = tmp_path / name
    out.mkdir(exist_ok=True)
    info = sra.distil_agnostic(cfg, lambda: encoder, tokenizer, STUDENT, initial_rows, lines, held_out, out)
    return info, sra.load_agnostic(out)


def test_steps_trains_exactly_that_many_updates_cycling_through_the_corpus(tmp_path, monkeypatch):
    """40 lines at batch 8 are 5 updates a pass: 7 updates are one pass and two batches of a second;
    `epochs` is then unused. The losses are pinned (deterministic on CPU)."""
    lines, held_out = toy_lines(40), toy_lines(6, seed=1)
    updates = counting_updates(monkeypatch)
    info, _ = build(tmp_path, "seven", agnostic(steps=7, epochs=1), lines, held_out)
    assert len(updates) == 7 and info["steps"] == 7
    assert [h["steps"] for h in info["history"]] == [5, 7] and info["epochs"] == 2
    assert [round(h["loss"], 4) for h in info["history"]] == [0.3523, 0.2956]
    assert [round(h["validation_loss"], 4) for h in info["history"]] == [0.322, 0.2945]
    updates.clear()
    info, _ = build(tmp_path, "twelve", agnostic(steps=12, epochs=1), lines, held_out)
    assert len(updates) == 12 and [h["steps"] for h in info["history"]] == [5, 10, 12]


def test_null_steps_keeps_epochs_passes_and_a_whole_number_of_passes_is_the_same_student(tmp_path, monkeypatch):
    lines, held_out = toy_lines(40), toy_lines(6, seed=1)
    updates = counting_updates(monkeypatch)
    by_epochs, weights = build(tmp_path, "epochs", agnostic(epochs=2), lines, held_out)
    assert len(updates) == 10 and by_epochs["steps"] == 10
    by_steps, same = build(tmp_path, "steps", agnostic(steps=10, epochs=3), lines, held_out)
    assert by_steps["history"] == by_epochs["history"]
    assert all(torch.equal(weights[k], same[k]) for k in weights)


def test_a_build_killed_within_a_pass_resumes_there_with_the_same_result(tmp_path, monkeypatch):
    """A checkpoint within the pass (every CHECKPOINT_SECONDS; here after every update): the resumed
    build draws the pass's batches again, skips those done and ends with the uninterrupted weights."""
    lines, held_out = toy_lines(40), toy_lines(6, seed=1)
    cfg = agnostic(steps=7)
    whole, weights = build(tmp_path, "whole", cfg, lines, held_out)
    monkeypatch.setattr(sra, "CHECKPOINT_SECONDS", 0.0)
    counting_updates(monkeypatch, fail_at=4)  # killed as the 4th update starts: 3 done, mid-pass
    with pytest.raises(Killed):
        build(tmp_path, "killed", cfg, lines, held_out)
    state = torch.load(tmp_path / "killed" / sra.CHECKPOINT, weights_only=True)
    assert (state["step"], state["position"], state["epoch"]) == (3, 3, 0)
    updates = counting_updates(monkeypatch)
    resumed, again = build(tmp_path, "killed", cfg, lines, held_out)
    assert len(updates) == 4
    assert resumed["history"] == whole["history"]
    assert all(torch.equal(weights[k], again[k]) for k in weights)
    assert not (tmp_path / "killed" / sra.CHECKPOINT).exists()


IDENTITY = {"name_or_path": "pkg:x", "source": "abc", "random_init": None}
SIZES = {"embedding_dim": 300, "hidden_size": 512, "num_layers": 1, "dropout": 0.2, "embedding_init": "svd"}


def key(**settings) -> str:
    cfg = OmegaConf.merge(OmegaConf.structured(AgnosticConfig), settings)
    return spec_hash(sra.agnostic_spec(cfg, IDENTITY, SIZES, "d" * 64, 384))


def test_the_new_settings_at_their_defaults_keep_every_artifact_key():
    """Pinned before `steps`, `heldout` and `heldout_sentences` existed: an artifact built then is
    still found. Set, they change the key; with steps set, `epochs` is unused and out of it."""
    assert key() == "ea8ca8af7fdc67aa"
    assert key(seed=3, max_sentences=None) == "e7577cefd1919b4d"
    assert key(steps=None, heldout="after", heldout_sentences=2000) == key()
    assert len({key(), key(steps=100), key(heldout="end"), key(heldout_sentences=500)}) == 4
    assert key(steps=100, epochs=1) == key(steps=100, epochs=9)
    assert key(epochs=1) != key(epochs=9)


def test_an_unknown_heldout_is_a_one_line_error():
    with pytest.raises(DistilError, match="agnostic.heldout"):
        sra.check_agnostic(agnostic(heldout="start"))
