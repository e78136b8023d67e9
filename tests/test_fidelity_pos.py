"""Issue 54, Tang's POS-guided replacement (tang-2019 slides, "Data Augmentation": "With probability
p_pos, they replace a word with another of the same POS tag"): the replacement is another word of the
tag, never the word it replaces, whenever the tag has one."""

from __future__ import annotations

from collections import Counter

import numpy as np

from distil.augment.tang import PosLexicon, Sentence, TangSettings, augment_example, synthetic


def tagged(words: str, tags: str) -> Sentence:
    words, tags = tuple(words.split()), tuple(tags.split())
    return Sentence(words, tags, (True,) * len(words))


def test_a_seeded_draw_over_a_bucket_of_two_words_never_returns_the_original():
    """The old draw read the tag's whole distribution, so "good" came back about half the time."""
    lexicon = PosLexicon([tagged("good bad", "JJ JJ")])
    rng = np.random.default_rng(0)
    every_word_replaced = TangSettings(p_mask=0.0, p_pos=1.0, p_ng=0.0)
    outs = Counter(synthetic(tagged("good", "JJ"), every_word_replaced, lexicon, rng) for _ in range(500))
    assert outs == Counter({"bad": 500})


def test_the_draw_excludes_only_the_replaced_word_and_keeps_the_others_proportions():
    lexicon = PosLexicon([tagged("a b b c c c", "X X X X X X")])  # a 1, b 2, c 3
    # without b: a on [0, 1/4), c on [1/4, 1); without a: b on [0, 2/5), c on [2/5, 1)
    assert [lexicon.draw("X", u, other_than="b") for u in (0.0, 0.2499, 0.25, 0.9999)] == ["a", "a", "c", "c"]
    assert [lexicon.draw("X", u, other_than="a") for u in (0.0, 0.3999, 0.4, 0.9999)] == ["b", "b", "c", "c"]
    assert [lexicon.draw("X", u, other_than="c") for u in (0.0, 0.3333, 0.3334, 0.9999)] == ["a", "a", "b", "b"]
    # a word the tag does not hold excludes nothing; without other_than, the whole distribution
    assert [lexicon.draw("X", u, other_than="z") for u in (0.0, 1 / 6, 0.5, 0.9999)] == ["a", "b", "c", "c"]


def test_a_tag_with_one_word_gives_it_back_and_the_example_is_then_a_duplicate():
    lexicon = PosLexicon([tagged("only", "JJ")])
    assert lexicon.draw("JJ", 0.7, other_than="only") == "only"
    # every sample equals the original: dropped as a duplicate, as before
    assert augment_example((tagged("only", "JJ"),), 20, TangSettings(0.0, 1.0, 0.0), lexicon,
                           np.random.default_rng(0)) == []


def test_a_two_word_sentence_over_two_word_buckets_always_swaps_both():
    lexicon = PosLexicon([tagged("cats eat", "NNS VBP"), tagged("dogs run", "NNS VBP")])
    out = augment_example((tagged("cats eat", "NNS VBP"),), 20, TangSettings(0.0, 1.0, 0.0), lexicon,
                          np.random.default_rng(3))
    assert out == [("dogs run",)]  # the one other sentence; the old draw also made "cats run" and "dogs eat"


def test_the_old_draw_stays_a_setting_and_the_paper_draw_is_in_every_tang_cell_key():
    """augment.pos_replacement=any keeps the old draw (the word may come back); tang.yaml's `other`
    differs from the schema's default, so it enters the key: a cell made with the old draw is never
    read as one made with the new."""
    from distil.tables.cells import cell_key

    lexicon = PosLexicon([tagged("good bad", "JJ JJ")])
    rng = np.random.default_rng(0)
    old = TangSettings(p_mask=0.0, p_pos=1.0, p_ng=0.0, replace_with_other=False)
    outs = Counter(synthetic(tagged("good", "JJ"), old, lexicon, rng) for _ in range(500))
    assert set(outs) == {"good", "bad"}
    base = ["dataset=toy", "augment=tang"]
    assert cell_key([*base, "seed=1"]) != cell_key([*base, "augment.pos_replacement=any", "seed=1"])
