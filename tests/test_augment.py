"""Tang et al. (2019) transfer-set augmentation: each operator of the "Data Augmentation Procedure"
on fixed sentences and seeds, the POS tagger, the cached artifacts, and runs end to end."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest

from distil.augment import pos
from distil.augment.build import augmented_examples, check_augment, n_iter
from distil.augment.tang import PosLexicon, Sentence, TangSettings, augment_example, synthetic
from distil.config.schema import AugmentConfig, DatasetConfig
from distil.errors import DistilError
from distil.store.artifacts import ArtifactStore
from distil.tasks import make_task

MASK = "[MASK]"


def tagged(words: str, tags: str) -> Sentence:
    words, tags = tuple(words.split()), tuple(tags.split())
    return Sentence(words, tags, (True,) * len(words))


LONG = tagged(" ".join(f"w{i}" for i in range(4000)), " ".join("NN" for _ in range(4000)))


def test_masking_replaces_exactly_the_words_whose_draw_is_below_p_mask():
    settings = TangSettings(p_mask=0.3, p_pos=0.0, p_ng=0.0)
    out = synthetic(LONG, settings, None, np.random.default_rng(7)).split()
    below = np.random.default_rng(7).random(len(LONG.words)) < 0.3  # X_i ~ U[0, 1], one per word, first
    assert [w == MASK for w in out] == below.tolist()
    assert all(w == o for w, o, masked in zip(out, LONG.words, below, strict=True) if not masked)
    assert abs(below.mean() - 0.3) < 3 * np.sqrt(0.3 * 0.7 / len(below))  # the rate is p_mask


def test_masking_and_pos_replacement_are_mutually_exclusive_and_split_the_unit_interval():
    lexicon = PosLexicon([tagged("dog", "NN")])  # every NN becomes "dog"
    settings = TangSettings(p_mask=0.25, p_pos=0.5, p_ng=0.0)
    out = synthetic(LONG, settings, lexicon, np.random.default_rng(3)).split()
    counts = Counter("mask" if w == MASK else "pos" if w == "dog" else "kept" for w in out)
    assert sum(counts.values()) == len(LONG.words)  # one outcome per word, never both
    n = len(out)
    for outcome, p in (("mask", 0.25), ("pos", 0.5), ("kept", 0.25)):
        assert abs(counts[outcome] / n - p) < 4 * np.sqrt(p * (1 - p) / n), outcome


def test_pos_replacement_keeps_the_tag_and_follows_the_tags_unigram_distribution_without_the_word():
    corpus = [tagged("the cat saw a dog", "DT NN VBD DT NN"), tagged("the dog ran", "DT NN VBD"),
              tagged("a dog sat", "DT NN VBD"), tagged("a pig ran", "DT NN VBD"), tagged("the pig sat", "DT NN VBD")]
    lexicon = PosLexicon(corpus)
    tag_of = {w: t for s in corpus for w, t in zip(s.words, s.tags, strict=True)}
    settings = TangSettings(p_mask=0.0, p_pos=1.0, p_ng=0.0)
    rng = np.random.default_rng(0)
    for_cat = Counter()
    for _ in range(4000):
        out = synthetic(corpus[0], settings, lexicon, rng).split()
        assert [tag_of[w] for w in out] == list(corpus[0].tags)  # same tag at every position
        for_cat[out[1]] += 1
    # NN in the corpus: dog 3 times, pig twice, cat once; "cat" becomes another noun (Tang's slides,
    # "Data Augmentation"), drawn from the rest of the tag's distribution: dog 3/5, pig 2/5
    assert for_cat["cat"] == 0
    share = for_cat["dog"] / 4000
    assert abs(share - 0.6) < 4 * np.sqrt(0.6 * 0.4 / 4000)


def test_lexicon_draws_each_word_on_its_share_of_the_unit_interval():
    lexicon = PosLexicon([tagged("a b b b", "X X X X")])  # a: [0, 1/4), b: [1/4, 1)
    assert [lexicon.draw("X", u) for u in (0.0, 0.2499, 0.25, 0.9999)] == ["a", "a", "b", "b"]


def test_ngram_sampling_yields_contiguous_ngrams_of_every_length_from_1_to_5():
    sentence = tagged("a b c d e f g h i j", " ".join("X" * 10))
    settings = TangSettings(p_mask=0.0, p_pos=0.0, p_ng=1.0)
    rng = np.random.default_rng(5)
    lengths = Counter()
    for _ in range(2000):
        out = synthetic(sentence, settings, None, rng)
        assert out in sentence.text  # contiguous: a substring at word boundaries
        lengths[len(out.split())] += 1
    assert sorted(lengths) == [1, 2, 3, 4, 5]  # n ~ U{1..5}
    assert min(lengths.values()) > 2000 / 5 * 0.8


def test_ngram_sampling_happens_with_probability_p_ng_and_a_short_sentence_is_its_own_longest_ngram():
    sentence = tagged("a b c d e f g h i j", " ".join("X" * 10))
    rng = np.random.default_rng(11)
    shortened = sum(synthetic(sentence, TangSettings(0.0, 0.0, 0.25), None, rng) != sentence.text for _ in range(4000))
    assert abs(shortened / 4000 - 0.25) < 4 * np.sqrt(0.25 * 0.75 / 4000)
    short = tagged("a b", "X X")
    outs = {synthetic(short, TangSettings(0.0, 0.0, 1.0), None, rng) for _ in range(200)}
    assert outs == {"a", "b", "a b"}


def test_duplicates_and_the_original_are_dropped():
    one_word = tagged("fine", "JJ")
    # p_ng only: every sample is the sentence itself -> nothing new
    assert augment_example((one_word,), 20, TangSettings(0.0, 0.0, 1.0), None, np.random.default_rng(0)) == []
    # masking a one-word sentence has one possible outcome: kept once
    assert augment_example((one_word,), 20, TangSettings(0.5, 0.0, 0.0), None, np.random.default_rng(0)) == [(MASK,)]
    # across examples, only with a shared `seen` (augment.dedupe=all)
    seen = set()
    rng = np.random.default_rng(0)
    first = augment_example((tagged("good", "JJ"),), 20, TangSettings(1.0, 0.0, 0.0), None, rng, seen)
    second = augment_example((tagged("bad", "JJ"),), 20, TangSettings(1.0, 0.0, 0.0), None, rng, seen)
    assert (first, second) == ([(MASK,)], [])


def test_a_pair_cycles_first_only_second_only_both():
    a, b = tagged("is it red", "VBZ PRP JJ"), tagged("is it blue", "VBZ PRP JJ")
    out = augment_example((a, b), 3, TangSettings(1.0, 0.0, 0.0), None, np.random.default_rng(0))
    assert out == [("[MASK] [MASK] [MASK]", "is it blue"), ("is it red", "[MASK] [MASK] [MASK]"),
                   ("[MASK] [MASK] [MASK]", "[MASK] [MASK] [MASK]")]


def test_the_same_seed_gives_the_same_examples_and_another_seed_others():
    sentence = tagged("the film is a charming and often affecting journey", "DT NN VBZ DT JJ CC RB JJ NN")
    lexicon = PosLexicon([sentence])

    def draw(seed):
        return augment_example((sentence,), 20, TangSettings(), lexicon, np.random.default_rng(seed))

    assert draw(1) == draw(1) and draw(1) != draw(2)
    assert 10 < len(draw(1)) <= 20


def test_n_iter_defaults_to_20_for_sentences_and_10_for_pairs():
    assert n_iter(AugmentConfig(method="tang"), make_task(DatasetConfig(name="s"))) == 20
    assert n_iter(AugmentConfig(method="tang"), make_task(DatasetConfig(name="p", task="pair"))) == 10
    assert n_iter(AugmentConfig(method="tang", n_iter=3), make_task(DatasetConfig(name="p", task="pair"))) == 3


@pytest.mark.parametrize("augment,dataset,message", [
    ({"p_mask": 0.6, "p_pos": 0.5}, {}, "augment.p_mask + augment.p_pos = 1.1 is above 1"),
    ({}, {"task": "tagging"}, "is a tagging task: use augment=none"),
    ({"source": "file"}, {"task": "pair"}, "use augment.source=labeled or transfer"),
    ({}, {"language": "de"}, "is de; set augment.p_pos=0 to augment with masking and n-gram sampling only"),
    ({}, {"task": "tagging", "languages": ["de", "nl"]}, "use augment=none"),
    ({"source": "pool"}, {}, "unknown augment.source 'pool'; choose one of: labeled, transfer, file"),
])
def test_bad_settings_fail_before_any_data_is_read(augment, dataset, message):
    data = DatasetConfig(name="mine", **dataset)
    with pytest.raises(DistilError, match=message.replace("+", r"\+").replace(".", r"\.")):
        check_augment(AugmentConfig(method="tang", **augment), make_task(data), data)


def test_non_english_data_may_augment_without_pos_replacement():
    data = DatasetConfig(name="mine", language="de")
    check_augment(AugmentConfig(method="tang", p_pos=0.0), make_task(data), data)  # no error


def test_spacy_tags_a_sentence_with_its_ptb_tags_and_spacing():
    nlp = pos.load_tagger()
    [sentence] = pos.tag(["What do pigs eat?"], nlp, "tag", 8)
    assert sentence.words == ("What", "do", "pigs", "eat", "?")
    assert sentence.tags == ("WP", "VBP", "NNS", "VB", ".")
    assert sentence.spaces == (True, True, True, False, False) and sentence.text == "What do pigs eat?"
    [coarse] = pos.tag(["What do pigs eat?"], nlp, "pos", 8)
    assert coarse.tags == ("PRON", "AUX", "NOUN", "VERB", "PUNCT")


def test_tags_and_examples_are_cached_by_content_and_reused(tmp_path):
    store = ArtifactStore(tmp_path / "cache")
    cfg = AugmentConfig(method="tang")
    sides = [["the movie was great .", "a dull , lifeless film .", "what a waste of time ."]]
    first = augmented_examples(cfg, TangSettings(), 20, sides, store, seed=1)
    again = augmented_examples(cfg, TangSettings(), 20, sides, store, seed=1)
    assert first["text"] == again["text"] and len(first) > 20
    assert len(list((tmp_path / "cache" / "pos-tags").iterdir())) == 1  # tagged once
    assert len(list((tmp_path / "cache" / "augmented").iterdir())) == 1
    other_seed = augmented_examples(cfg, TangSettings(), 20, sides, store, seed=2)
    assert other_seed["text"] != first["text"]
    assert len(list((tmp_path / "cache" / "pos-tags").iterdir())) == 1  # the tags serve every seed
    assert len(list((tmp_path / "cache" / "augmented").iterdir())) == 2


def test_max_examples_keeps_a_seeded_subset_in_order(tmp_path):
    store = ArtifactStore(tmp_path / "cache")
    sides = [["the movie was great fun to watch", "a dull lifeless and overlong film"]]
    everything = augmented_examples(AugmentConfig(method="tang", p_pos=0.0), TangSettings(p_pos=0.0), 20, sides,
                                    store, seed=1)["text"]
    subset = augmented_examples(AugmentConfig(method="tang", p_pos=0.0, max_examples=7), TangSettings(p_pos=0.0), 20,
                                sides, store, seed=1)["text"]
    assert len(subset) == 7 and len(set(subset)) == 7
    positions = [everything.index(text) for text in subset]
    assert positions == sorted(positions)  # a subset of the same examples, order kept


def run_metrics(outputs):
    [metrics] = [json.loads(p.read_text()) for p in (outputs / "runs").rglob("metrics.json")]
    return metrics


@pytest.mark.heavy
def test_an_augmented_run_end_to_end_labels_the_synthetic_examples_with_the_teacher(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    code, out, err = distil_in_process(["debug=smoke", "augment=tang", "transfer_size=none"], tmp_path,
                                       monkeypatch, capsys)
    assert code == 0, err
    metrics = run_metrics(tmp_path / "outputs")
    assert metrics["choices"]["augment"] == "tang"
    sizes = metrics["data"]["sizes"]
    # 24 labeled sentences, 20 draws each, duplicates dropped: the transfer set is only synthetic
    [augmented] = [json.loads(p.read_text()) for p in (tmp_path / "outputs" / "cache" / "augmented").rglob(
        "manifest.json")]
    assert sizes["transfer"] == augmented["info"]["examples"] - metrics["data"]["overlap"]["transfer_dropped"]
    assert 24 < sizes["transfer"] <= 24 * 20
    assert metrics["teacher"]["diagnostics"]["transfer"]  # the teacher labeled them

    # augmentation is part of the targets' key: the same run without it caches other targets
    code, _, err = distil_in_process(["debug=smoke", "transfer_size=none"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    assert len(list((tmp_path / "outputs" / "cache" / "targets").iterdir())) == 2


@pytest.mark.heavy
def test_an_augmented_pair_run_end_to_end(tmp_path, monkeypatch, capsys):
    from tests.test_cli import distil_in_process

    code, _, err = distil_in_process(["debug=smoke", "dataset=toy-pair", "student=siamese", "augment=tang",
                                      "augment.n_iter=3"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = run_metrics(tmp_path / "outputs")
    assert metrics["status"] == "ok" and metrics["data"]["sizes"]["transfer"] > 0


def test_a_cached_run_does_not_load_the_tagger(tmp_path, monkeypatch):
    store = ArtifactStore(tmp_path / "cache")
    sides = [["the movie was great .", "a dull , lifeless film ."]]
    first = augmented_examples(AugmentConfig(method="tang"), TangSettings(), 20, sides, store, seed=1)["text"]

    def no_tagger():
        raise AssertionError("the tags are cached: spaCy must not be loaded")

    monkeypatch.setattr(pos, "load_tagger", no_tagger)
    assert augmented_examples(AugmentConfig(method="tang"), TangSettings(), 20, sides, store, seed=1)["text"] == first
    assert augmented_examples(AugmentConfig(method="tang"), TangSettings(), 20, sides, store, seed=3)["text"] != first
