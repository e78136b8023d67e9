"""The held-out set of Wu's task-agnostic stage (Table 4's "Wikipedia validation set", eq. 1 on lines
never distilled on): `agnostic.heldout=end` reads the corpus's last lines, the same for every
max_sentences, where `after` (the default, as before the held-out set was fixed) reads the lines after each size's."""

from __future__ import annotations

import dataclasses

import torch

import distil.pretrain.sra as sra
from distil.config.schema import AgnosticConfig
from distil.store.artifacts import ArtifactStore
from tests.test_wu_agnostic_budget import STUDENT, initial_rows, toy_encoder, toy_lines, toy_tokenizer


def corpus(tmp_path, count: int = 100) -> str:
    path = tmp_path / "corpus.txt"
    path.write_text("\n".join(f"{line} {i}" for i, line in enumerate(toy_lines(count))) + "\n")
    return str(path)


def settings(path: str, **kw) -> AgnosticConfig:
    return dataclasses.replace(AgnosticConfig(), corpus=path, batch_size=8, max_length=16, epochs=1, **kw)


def test_end_holds_out_the_corpus_last_lines_for_every_size_and_never_trains_on_them(tmp_path):
    path = corpus(tmp_path)
    every = open(path).read().splitlines()
    splits = {size: sra.corpus_split(settings(path, max_sentences=size, heldout="end", heldout_sentences=10),
                                     str(tmp_path))
              for size in (30, 60, 95, None)}
    for size, (lines, held_out, whole) in splits.items():
        assert held_out == every[90:]  # the same 10 lines, whatever the size
        assert lines == every[:min(size or 90, 90)]  # the first lines before them (95 and null: all 90)
        assert not set(lines) & set(held_out) and whole == every
    # `after` (the default): the lines after each size's, so the held-out set moves with the size
    after = {size: sra.corpus_split(settings(path, max_sentences=size, heldout_sentences=3), str(tmp_path))
             for size in (30, 60)}
    assert after[30][:2] == (every[:30], every[30:33]) and after[60][:2] == (every[:60], every[60:63])


def test_every_size_and_seed_reads_one_held_out_set_from_vectors_built_once(tmp_path, monkeypatch):
    """Two corpus sizes and two seeds with heldout=end: each build trains on its first lines and scores
    eq. 1 on the same last lines; the teacher's vectors of the corpus are computed once (one encoder
    load, one agnostic-vectors artifact), and the rows each build reads are those lines' own vectors."""
    path = corpus(tmp_path)
    every = open(path).read().splitlines()
    tokenizer = toy_tokenizer(tmp_path)
    encoder = toy_encoder(tokenizer)
    loads, seen, scored = [], [], []

    def load_encoder():
        loads.append(1)
        return encoder
    distil = sra.distil_agnostic

    def spy(cfg, load, tok, student_cfg, rows, lines, held_out, out, teacher_vectors=None):
        seen.append((cfg.max_sentences, cfg.seed, lines, held_out, teacher_vectors()))
        return distil(cfg, load, tok, student_cfg, rows, lines, held_out, out, teacher_vectors)
    monkeypatch.setattr(sra, "distil_agnostic", spy)
    held_out_loss = sra.held_out_loss
    monkeypatch.setattr(sra, "held_out_loss", lambda student, mapped, targets, size: (
        scored.append(len(mapped)) or held_out_loss(student, mapped, targets, size)))
    store = ArtifactStore(tmp_path / "cache")
    built = {}
    for size in (30, 60):
        for seed in (1, 2):
            cfg = settings(path, max_sentences=size, seed=seed, heldout="end", heldout_sentences=10, steps=5)
            built[size, seed] = sra.ensure_agnostic(cfg, "toy", {"name": "toy"}, 16, load_encoder, tokenizer, STUDENT,
                                                    initial_rows, store, str(tmp_path))
    assert len({artifact.key for artifact in built.values()}) == 4  # each size and seed its own student
    assert len(loads) == 1 and len(list((tmp_path / "cache" / sra.VECTORS_KIND).iterdir())) == 1
    direct = sra.sentence_vectors(encoder, tokenizer(every, truncation=True, max_length=16)["input_ids"],
                                  tokenizer.pad_token_id, "cls")
    for size, _, lines, held_out, (targets, held_targets) in seen:
        assert lines == every[:size] and held_out == every[90:]
        assert torch.allclose(targets, direct[:size], atol=1e-5)
        assert torch.allclose(held_targets, direct[90:], atol=1e-5)
    assert set(scored) == {10}
    for artifact in built.values():
        assert (artifact.info["held_out"], artifact.info["heldout"], artifact.info["steps"]) == (10, "end", 5)
    # built: each is found again, and nothing is computed twice
    again = sra.ensure_agnostic(settings(path, max_sentences=30, seed=1, heldout="end", heldout_sentences=10, steps=5),
                                "toy", {"name": "toy"}, 16, load_encoder, tokenizer, STUDENT, initial_rows, store,
                                str(tmp_path))
    assert again.reused and again.key == built[30, 1].key and len(loads) == 1


def test_a_run_waiting_for_the_corpus_vectors_computes_the_pieces_nobody_holds(tmp_path, monkeypatch):
    """Two runs that want one corpus's vectors (two seeds side by side): the one that waits for the
    other's build assists it, computing the unclaimed pieces and writing no artifact; the builder
    computes the rest, and every line is encoded once."""
    from distil.store.claims import ShardClaims

    monkeypatch.setattr(sra, "VECTORS_CHUNK", 30)  # 100 lines: pieces at 0, 30, 60 and 90
    lines = open(corpus(tmp_path)).read().splitlines()
    tokenizer = toy_tokenizer(tmp_path)
    encoder, encoded = toy_encoder(tokenizer), []
    forward = encoder.forward
    monkeypatch.setattr(encoder, "forward", lambda input_ids, attention_mask: (
        encoded.append(len(input_ids)) or forward(input_ids=input_ids, attention_mask=attention_mask)))
    cfg, out = settings("corpus.txt"), tmp_path / "build"
    with ShardClaims(out).take("piece-000000000.safetensors", wait=False) as held:  # the builder's first piece
        assert held
        assert sra.corpus_vectors(cfg, lambda: encoder, tokenizer, lines, out, assisting=True) == {}
    assert sorted(p.name for p in out.iterdir()) == [f"piece-{start:09d}.safetensors" for start in (30, 60, 90)]
    assert sum(encoded) == 70
    info = sra.corpus_vectors(cfg, lambda: encoder, tokenizer, lines, out)
    assert sum(encoded) == 100 and info == {"sentences": 100, "sentence_size": 16}
    direct = sra.sentence_vectors(encoder, tokenizer(lines, truncation=True, max_length=16)["input_ids"],
                                  tokenizer.pad_token_id, "cls")
    assert torch.allclose(sra.load_file(out / sra.VECTORS)["vectors"], direct, atol=1e-5)
