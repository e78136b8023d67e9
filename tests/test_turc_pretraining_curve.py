"""Turc's masked-LM pre-training reports its loss curve against the unigram level.

The unigram level is the loss of predicting the corpus's wordpiece frequencies at every masked
position, whatever the context: their entropy in nats. The report records it beside the running
training loss and the loss on a held-out slice of the corpus; `distil pretrain` prints the curve.
Toy corpora, a few steps of a 2 x 32 model over the tiny teacher's character-level wordpieces.
"""

import json
import math

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from distil.cli.pretrain import CURVE_ROWS, curve_table
from distil.config.schema import PretrainConfig
from distil.pretrain import mlm
from distil.pretrain.corpus import tokenize, unigram_loss
from distil.store.artifacts import ArtifactStore
from distil.teacher.load import load_tokenizer

# the tiny teacher's tokenizer reads letters: "a a b" is the wordpieces a, a, b
TRAIN = ["a a b"] * 10 + ["c"] * 10  # a 20 times, b 10, c 10: p = 1/2, 1/4, 1/4
HELDOUT = ["a b c", "c b a", "b b", "a c", "c c a"]
UNIGRAM = -(0.5 * math.log(0.5) + 2 * 0.25 * math.log(0.25))  # = 1.5 ln 2 = 1.0397 nats


def tiny_tokenizer(smoke_cfg):
    return load_tokenizer(smoke_cfg().teacher, hub_offline=True)


def toy_cfg(**settings):
    values = {"corpus": "transfer", "max_sentences": len(TRAIN), "max_length": 16, "batch_size": 8, "steps": 6,
              "heldout_every": 2, "lr": 2e-3, "checkpoint_every_seconds": 0, **settings}
    return OmegaConf.structured(PretrainConfig(**values))


def test_the_unigram_level_is_the_entropy_of_the_wordpiece_frequencies_by_hand(smoke_cfg):
    tokenizer = tiny_tokenizer(smoke_cfg)
    a, b = tokenizer.convert_tokens_to_ids(["a", "b"])
    # "b" ten times is cut to max_length = 8 wordpieces: a 2, b 1 + 8 of the 11 wordpieces
    sentences = tokenize(tokenizer, ["a", "a b", " ".join(["b"] * 10)], 8)
    assert sorted(sentences.values.tolist()) == sorted([a, a, b] + [b] * 8)
    by_hand = -(2 / 11 * math.log(2 / 11) + 9 / 11 * math.log(9 / 11))  # 0.4741 nats
    assert unigram_loss(sentences) == pytest.approx(by_hand, abs=1e-12)
    assert unigram_loss(tokenize(tokenizer, TRAIN, 16)) == pytest.approx(UNIGRAM, abs=1e-12)
    assert unigram_loss(tokenize(tokenizer, ["a a a"], 16)) == 0.0  # one wordpiece: nothing to learn
    assert unigram_loss(tokenize(tokenizer, [], 16)) is None
    assert mlm.unigram_level(toy_cfg(), tokenizer, ".", TRAIN + HELDOUT) == pytest.approx(UNIGRAM, abs=1e-12)


def test_the_held_out_slice_is_the_lines_after_max_sentences(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(f"line {i}\n" for i in range(30)))
    cfg = OmegaConf.structured(PretrainConfig(corpus=str(corpus), max_sentences=20, heldout_sentences=5))
    lines, heldout = mlm.corpus_split(cfg, str(tmp_path), None)
    assert lines == [f"line {i}" for i in range(20)] and heldout == [f"line {i}" for i in range(20, 25)]
    assert mlm.corpus_lines(cfg, str(tmp_path), None) == lines  # what is trained on: as before
    cfg.heldout_sentences = 50  # the corpus ends first: what is there
    assert mlm.corpus_split(cfg, str(tmp_path), None)[1] == [f"line {i}" for i in range(20, 30)]
    cfg.max_sentences = None  # all of it is trained on: nothing is held out
    assert mlm.corpus_split(cfg, str(tmp_path), None) == ([f"line {i}" for i in range(30)], [])
    transfer = OmegaConf.structured(PretrainConfig(corpus="transfer", max_sentences=3, heldout_sentences=2))
    assert mlm.corpus_split(transfer, ".", ["p", "q", "r", "s", "t", "u"]) == (["p", "q", "r"], ["s", "t"])


def test_the_report_holds_the_unigram_level_and_the_held_out_curve(smoke_cfg, tmp_path):
    tokenizer = tiny_tokenizer(smoke_cfg)
    built = mlm.ensure_pretrained(toy_cfg(), 2, 32, tokenizer, {"vocab": "tiny"}, ArtifactStore(tmp_path / "cache"),
                                  str(tmp_path), 0, TRAIN + HELDOUT)
    info = built.info
    assert info["unigram_loss"] == pytest.approx(UNIGRAM, abs=1e-12)
    assert info["sentences"] == len(TRAIN) and info["heldout_sentences"] == len(HELDOUT)
    history = info["history"]
    assert [entry["step"] for entry in history] == [2, 4, 6]  # every heldout_every steps and the last
    for entry in history:
        # a random 107-wordpiece model starts near ln 107 = 4.67
        assert 0 < entry["heldout_mlm_loss"] < 6 and 0 < entry["mlm_loss"] < 6
    assert info["final_heldout_mlm_loss"] == history[-1]["heldout_mlm_loss"]
    assert info["final_mlm_loss"] == history[-1]["mlm_loss"]
    manifest = json.loads((built.path / "manifest.json").read_text())
    assert manifest["info"]["unigram_loss"] == info["unigram_loss"]  # recorded with the artifact


def test_the_held_out_evaluation_changes_no_weight(smoke_cfg, tmp_path):
    """It draws from its own generators and runs without dropout: the weights are the same bytes."""
    tokenizer = tiny_tokenizer(smoke_cfg)
    with_curve, without = tmp_path / "with", tmp_path / "without"
    with_curve.mkdir()
    without.mkdir()
    info = mlm.pretrain(toy_cfg(), 2, 32, tokenizer, TRAIN, 0, with_curve, HELDOUT)
    plain = mlm.pretrain(toy_cfg(), 2, 32, tokenizer, TRAIN, 0, without)
    assert (with_curve / mlm.WEIGHTS).read_bytes() == (without / mlm.WEIGHTS).read_bytes()
    assert len(info["history"]) == 3 and [e["step"] for e in plain["history"]] == [6]
    assert "heldout_mlm_loss" not in plain["history"][0] and plain["final_heldout_mlm_loss"] is None
    # the held-out examples are one fixed draw: the same losses again
    again = tmp_path / "again"
    again.mkdir()
    assert mlm.pretrain(toy_cfg(), 2, 32, tokenizer, TRAIN, 0, again, HELDOUT)["history"] == info["history"]


def test_held_out_settings_at_their_defaults_leave_the_artifact_key_as_before():
    """Settings at their schema default stay out of the key, so every artifact built before the
    held-out curve existed is still found; another held-out setting is another report: another key."""
    legacy = {"objective", "mask_prob", "mask_token_prob", "random_token_prob", "max_length", "steps", "batch_size",
              "lr", "warmup_fraction", "weight_decay", "dropout", "seed"}  # the older keys' settings
    spec = mlm.pretrain_spec(OmegaConf.structured(PretrainConfig()), 2, 128, {"vocab": "v"}, "digest", 0)
    assert set(spec["settings"]) == legacy
    other = mlm.pretrain_spec(OmegaConf.structured(PretrainConfig(heldout_every=50)), 2, 128, {"vocab": "v"},
                              "digest", 0)
    assert set(other["settings"]) == legacy | {"heldout_every"}
    store = ArtifactStore("unused")
    assert store.key("bert", spec) != store.key("bert", other)


def table_rows(text: str) -> list[list[str]]:
    """The body rows of a printed rich table, as their cells' text."""
    rows = [line.replace("│", " ").split() for line in text.splitlines() if line.lstrip().startswith("│")]
    return [row for row in rows if row and row[0].isdigit()]


def render(table) -> str:
    console = Console(record=True, width=160)
    console.print(table)
    return console.export_text()


def test_the_printed_curve_is_short_and_ends_at_the_last_step():
    history = [{"step": 100 * i, "mlm_loss": 10 - i / 20, "nsp_loss": 0.6} for i in range(1, 181)]
    for entry in history:
        if entry["step"] % 200 == 0:
            entry["heldout_mlm_loss"] = entry["mlm_loss"] + 0.1
    text = render(curve_table({"history": history, "unigram_loss": 7.25}))
    rows = table_rows(text)
    assert len(rows) == CURVE_ROWS  # of the 90 entries with a held-out loss, evenly spaced
    assert rows[0] == ["200", "9.900", "10.000", "+2.750"] and rows[-1] == ["18000", "1.000", "1.100", "-6.150"]
    assert "unigram level 7.250" in text
    # without held-out losses (a report built before them, or max_sentences=null): the training curve
    old = render(curve_table({"history": [{"step": 100, "mlm_loss": 7.0}, {"step": 200, "mlm_loss": 6.8}]}))
    assert "6.800" in old and "unigram level: not known" in old
    assert curve_table({"final_loss": 0.1}) is None  # an SRA student's report


def test_distil_pretrain_prints_the_curve_and_the_unigram_level(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    corpus = tmp_path / "toy.txt"
    corpus.write_text("\n".join(TRAIN + HELDOUT) + "\n")
    args = ["pretrain", "debug=smoke", "student=transformer-tiny", "student.hidden_size=32",
            f"pretrain.corpus={corpus}", f"pretrain.max_sentences={len(TRAIN)}", "pretrain.steps=6",
            "pretrain.heldout_every=2", "pretrain.batch_size=8", "pretrain.max_length=16",
            f"paths.cache={tmp_path / 'cache'}"]
    code, out, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err[-2000:]
    assert "masked-LM loss curve" in out and "held-out MLM loss" in out
    assert f"unigram level {UNIGRAM:.3f}" in out
    assert [row[0] for row in table_rows(out)] == ["2", "4", "6"]
    assert ": built " in out and f"unigram_loss {UNIGRAM:.4f}" in out and "final_heldout_mlm_loss" in out
    code, again, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err[-2000:]
    assert ": reused " in again and "masked-LM loss curve" in again  # printed when found, too
