"""Turc et al.'s pre-trained compact students: BERT's masking, the masked-LM artifact (learns,
resumes, reloads), compact checkpoints, segment ids, and PD / PDF end to end on the tiny teacher."""

import json
import logging

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from transformers import BertConfig, BertModel

from distil.config.schema import PretrainConfig
from distil.errors import DistilError
from distil.pretrain import mlm
from distil.pretrain.corpus import ExampleSampler, tokenize
from distil.pretrain.masking import IGNORE, mask_tokens
from distil.store.artifacts import ArtifactStore
from distil.students.pretrained import PretrainedStart, from_checkpoint
from distil.students.transformer import TransformerStudent
from distil.students.vocab import TrimmedVocab
from distil.teacher.load import load_tokenizer

CORPUS = ["the cat sat on the mat.", "a dog ran in the park.", "the cat saw the dog.", "rain fell on the town.",
          "a bird sang in the tree.", "the sun rose over the hill."] * 20


def tiny_tokenizer(smoke_cfg):
    return load_tokenizer(smoke_cfg().teacher, hub_offline=True)


def test_masking_follows_bert_15_80_10_10():
    """Devlin et al. §3.1: 15% of the maskable wordpieces chosen; of those 80% [MASK], 10% a random
    wordpiece, 10% kept; special tokens and padding never chosen; labels only at chosen positions."""
    ids = torch.randint(5, 1000, (200, 500), generator=torch.Generator().manual_seed(1))
    maskable = torch.ones_like(ids, dtype=torch.bool)
    maskable[:, 0] = False  # [CLS]
    maskable[:, -50:] = False  # padding
    corrupted, labels = mask_tokens(ids, maskable, mask_id=4, vocab_size=1000,
                                    generator=torch.Generator().manual_seed(0))
    chosen = labels != IGNORE
    assert not chosen[~maskable].any() and torch.equal(corrupted[~maskable], ids[~maskable])
    assert torch.equal(labels[chosen], ids[chosen])
    n = int(chosen.sum())
    assert n == 13391  # pinned for this seed: 0.1491 of the 89,800 maskable
    masked = int((corrupted[chosen] == 4).sum())
    kept = int((corrupted[chosen] == ids[chosen]).sum())
    assert (masked, kept) == (10578, 1415)  # 79.0% and 10.6% (a random draw can hit the original: 0.1%)
    assert abs(masked / n - 0.8) < 0.015 and abs(kept / n - 0.1) < 0.015  # 4 binomial std
    assert torch.equal(corrupted[~chosen], ids[~chosen])


def test_examples_are_bert_pairs_with_segments_and_next_sentence_labels(smoke_cfg):
    tokenizer = tiny_tokenizer(smoke_cfg)
    sentences = tokenize(tokenizer, CORPUS[:6], 64)
    sampler = ExampleSampler(sentences, tokenizer, 40, True, 0.0, 0.8, 0.1)  # nothing masked: read the pairs
    batch = sampler.batch(64, np.random.default_rng(0), torch.Generator().manual_seed(0))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert (batch.input_ids[:, 0] == cls).all() and batch.input_ids.shape[1] <= 40
    for row in range(64):
        ids = batch.input_ids[row][batch.attention_mask[row] == 1].tolist()
        types = batch.token_type_ids[row][batch.attention_mask[row] == 1].tolist()
        first_sep = ids.index(sep)
        assert ids[-1] == sep and ids.count(sep) == 2
        assert types == [0] * (first_sep + 1) + [1] * (len(ids) - first_sep - 1)
    labels = batch.next_sentence_label.tolist()
    assert 0 < sum(labels) < 64  # both kinds drawn
    assert (batch.labels == IGNORE).all()


def pretrain_cfg(**settings):
    return OmegaConf.structured(PretrainConfig(corpus="transfer", max_length=32, batch_size=16, lr=2e-3,
                                               checkpoint_every_seconds=0, **settings))


@pytest.mark.heavy
def test_masked_lm_loss_falls_and_the_artifact_reloads(smoke_cfg, tmp_path):
    tokenizer = tiny_tokenizer(smoke_cfg)
    store = ArtifactStore(tmp_path / "cache")
    cfg = pretrain_cfg(steps=200)
    built = mlm.ensure_pretrained(cfg, 2, 32, tokenizer, {"vocab": "tiny"}, store, str(tmp_path), 0, CORPUS)
    history = built.info["history"]
    # the mean masked-LM loss of steps 1-100 and 101-200, pinned (deterministic on CPU): it falls by 0.94
    assert [round(h["mlm_loss"], 2) for h in history] == pytest.approx([2.98, 2.04], abs=0.02)
    again = mlm.ensure_pretrained(cfg, 2, 32, tokenizer, {"vocab": "tiny"}, store, str(tmp_path), 0, CORPUS)
    assert again.reused and again.key == built.key
    encoder, config = mlm.load_encoder(again.path)
    assert (config["num_hidden_layers"], config["hidden_size"]) == (2, 32)
    # into a student over a trimmed vocabulary: every layer as saved, the word embeddings at its rows
    vocab = TrimmedVocab([7, 12, 30])
    student = TransformerStudent(len(vocab), 2, 32, 3, 0.1, per_token=False)
    start = PretrainedStart(encoder, 2, 32, tokenizer.pad_token_id, tokenizer.unk_token_id, "test")
    start.apply(student.bert, vocab)
    state = student.bert.state_dict()
    words = encoder["embeddings.word_embeddings.weight"]
    assert torch.equal(state["embeddings.word_embeddings.weight"],
                       words[[tokenizer.pad_token_id, tokenizer.unk_token_id, 7, 12, 30]])
    for name, tensor in encoder.items():
        if name != "embeddings.word_embeddings.weight" and not name.endswith("position_ids"):
            assert torch.equal(state[name], tensor), name


def test_killed_pretraining_resumes_to_the_same_weights(smoke_cfg, tmp_path, monkeypatch):
    tokenizer = tiny_tokenizer(smoke_cfg)
    cfg = pretrain_cfg(steps=8)
    reference = tmp_path / "reference"
    reference.mkdir()
    mlm.pretrain(cfg, 2, 32, tokenizer, CORPUS, 0, reference)

    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    original = mlm.save_checkpoint

    def dying(path, model, optimizer, scheduler, rng, generator, step, *rest):
        original(path, model, optimizer, scheduler, rng, generator, step, *rest)
        if step == 5:
            raise KeyboardInterrupt

    monkeypatch.setattr(mlm, "save_checkpoint", dying)
    with pytest.raises(KeyboardInterrupt):
        mlm.pretrain(cfg, 2, 32, tokenizer, CORPUS, 0, interrupted)
    assert (interrupted / mlm.CHECKPOINT).is_file() and not (interrupted / mlm.WEIGHTS).exists()
    monkeypatch.setattr(mlm, "save_checkpoint", original)
    info = mlm.pretrain(cfg, 2, 32, tokenizer, CORPUS, 0, interrupted)
    assert info["steps"] == 8 and not (interrupted / mlm.CHECKPOINT).exists()
    assert (interrupted / mlm.WEIGHTS).read_bytes() == (reference / mlm.WEIGHTS).read_bytes()


def test_pair_segments_start_after_the_first_separator():
    student = TransformerStudent(10, 1, 32, 2, 0.0, per_token=False, sep_id=3)
    ids = torch.tensor([[2, 5, 6, 3, 7, 8, 3, 0, 0]])
    assert student.segments(ids).tolist() == [[0, 0, 0, 0, 1, 1, 1, 1, 1]]
    assert TransformerStudent(10, 1, 32, 2, 0.0, per_token=False).segments(ids) is None


def save_compact_checkpoint(directory, tokenizer, hidden=32, intermediate=None):
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2, num_attention_heads=1,
                        intermediate_size=intermediate or 4 * hidden, pad_token_id=tokenizer.pad_token_id)
    model = BertModel(config, add_pooling_layer=False)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return model


def test_a_local_compact_checkpoint_is_the_students_start(smoke_cfg, tmp_path):
    tokenizer = tiny_tokenizer(smoke_cfg)
    model = save_compact_checkpoint(tmp_path / "compact", tokenizer)
    student_cfg = smoke_cfg(f"student.name_or_path={tmp_path / 'compact'}", "student=transformer").student
    start = from_checkpoint(student_cfg, tokenizer, hub_offline=True)
    assert (start.layers, start.hidden) == (2, 32)
    vocab = TrimmedVocab([9, 11])
    student = TransformerStudent(len(vocab), 2, 32, 2, 0.1, per_token=False)
    start.apply(student.bert, vocab)
    expected = model.state_dict()["encoder.layer.1.output.dense.weight"]
    assert torch.equal(student.bert.state_dict()["encoder.layer.1.output.dense.weight"], expected)


def test_a_checkpoint_with_another_vocabulary_or_offline_hub_name_fails_in_one_line(smoke_cfg, tmp_path):
    from transformers import BertTokenizer

    tokenizer = tiny_tokenizer(smoke_cfg)
    other = BertTokenizer(vocab={word: i for i, word in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                                    "x", "y"])})
    save_compact_checkpoint(tmp_path / "other", other)
    cfg = smoke_cfg(f"student.name_or_path={tmp_path / 'other'}", "student=transformer").student
    with pytest.raises(DistilError, match="has its own wordpiece vocabulary"):
        from_checkpoint(cfg, tokenizer, hub_offline=True)
    hub = smoke_cfg("student.name_or_path=google/bert_uncased_L-4_H-256_A-4", "student=transformer").student
    with pytest.raises(DistilError, match="is not available offline: download it"):
        from_checkpoint(hub, tokenizer, hub_offline=True)


PD_ARGS = ["debug=smoke", "student=transformer-tiny", "pretrain.corpus=transfer", "pretrain.steps=20",
           "pretrain.batch_size=8", "trainer.epochs=2"]


@pytest.mark.heavy
def test_pd_and_pdf_run_end_to_end_and_share_one_pretrained_student(tmp_path, monkeypatch, capsys):
    """pd pre-trains once; pdf (and a second task seed) reuse the artifact; pdf adds its labeled stage."""
    from tests.test_cli import distil_in_process

    def distil(*args):
        code, out, err = distil_in_process([*PD_ARGS, f"paths.outputs={tmp_path / 'out'}", *args], tmp_path,
                                           monkeypatch, capsys)
        assert code == 0, err[-2000:]
        return out + err

    assert "pre-trained student saved" in distil("schedule=pd", f"hydra.run.dir={tmp_path / 'pd'}")
    assert "reusing pre-trained student" in distil("schedule=pdf", f"hydra.run.dir={tmp_path / 'pdf'}")
    stages = json.loads((tmp_path / "pdf" / "metrics.json").read_text())["student"]["stages"]
    assert [(s["name"], list(s["losses"]), s["data"]) for s in stages] == [
        ("S1", ["soft_ce"], ["labeled", "transfer"]), ("S2", ["ce"], ["labeled"])]
    assert len(list((tmp_path / "out" / "cache" / "pretrained").iterdir())) == 1


def test_pretraining_a_bilstm_is_refused(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    code, _, err = distil_in_process(["debug=smoke", "schedule=pf", "student=bilstm"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert "schedule.student_init=pretrained starts a Transformer student" in err.strip().splitlines()[-1]


def test_distil_pretrain_builds_once_and_names_what_cannot_be_pretrained(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    args = ["pretrain", "debug=smoke", f"paths.outputs={tmp_path / 'out'}", "pretrain.corpus=transfer",
            "pretrain.steps=10", "pretrain.batch_size=8"]
    # as in a fresh process, no logging set up: the command shows its own log lines (a build's steps)
    monkeypatch.setattr(logging.root, "handlers", [])
    monkeypatch.setattr(logging.root, "level", logging.WARNING)
    code, out, err = distil_in_process([*args, "student=transformer-tiny"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert "masked-LM pre-trained L2/H32 (Turc et al.): built" in out
    assert "pre-training step 10/10" in err and "pre-trained student saved to" in err
    code, out, _ = distil_in_process([*args, "student=transformer-tiny"], tmp_path, monkeypatch, capsys)
    assert code == 0 and "(Turc et al.): reused" in out
    code, _, err = distil_in_process([*args, "student=bilstm"], tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip() == ("distil pretrain: error: student 'bilstm' (bilstm) has no task-independent "
                           "pre-training; give student=transformer-* (masked LM, Turc et al.) or "
                           "student=sra (Wu et al.)")
