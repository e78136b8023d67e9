"""Tang et al. (2019) augmentation of one example, "Data Augmentation Procedure" (tang-2019 slides):

- for each word w_i draw X_i ~ U[0, 1]: X_i < p_mask -> the mask token ("masking");
  p_mask <= X_i < p_mask + p_pos -> another word of w_i's POS tag, drawn from the corpus's unigram
  distribution of that tag without w_i ("POS-guided word replacement": "they replace a word with
  another of the same POS tag", slides, "Data Augmentation"; w_i stays only when its tag has no
  other word); the two are mutually exclusive;
- then, with probability p_ng, the synthetic example becomes one of its n-grams, n drawn
  uniformly from {1, ..., ngram_max = 5} ("n-gram sampling");
- n_iter synthetic examples are drawn per example and duplicates discarded (the original too:
  it is already in the labeled set);
- a pair cycles: draw i augments the first sentence only (i mod 3 = 0), the second only (1), both (2).

The random draws, in order, for one sentence: X_1..X_n (one `random(n)`), one uniform for each
replaced word (its pick in the tag's distribution), one uniform for n-gram sampling, then n and
the n-gram's start when sampled. Fixed seed -> fixed output.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Sentence:
    """A source sentence as words, each word's POS tag ("" untagged) and whether a space follows it."""

    words: tuple[str, ...]
    tags: tuple[str, ...]
    spaces: tuple[bool, ...]

    @property
    def text(self) -> str:
        return join(self.words, self.spaces)

    @classmethod
    def whitespace(cls, text: str) -> Sentence:
        """Untagged words split at whitespace: masking and n-gram sampling need no tagger (any language)."""
        words = tuple(text.split())
        return cls(words, ("",) * len(words), (True,) * len(words))


def join(words, spaces) -> str:
    return "".join(word + (" " if space else "") for word, space in zip(words, spaces, strict=True)).strip()


class PosLexicon:
    """Per POS tag, the corpus's words and their counts: the unigram distribution renormalised by the
    tag, which POS-guided replacement draws from."""

    def __init__(self, sentences):
        counts: dict[str, dict[str, int]] = {}
        for sentence in sentences:
            for word, tag in zip(sentence.words, sentence.tags, strict=True):
                by_word = counts.setdefault(tag, {})
                by_word[word] = by_word.get(word, 0) + 1
        self.words = {tag: list(by_word) for tag, by_word in counts.items()}
        self.position = {tag: {word: i for i, word in enumerate(by_word)} for tag, by_word in counts.items()}
        self.cumulative = {tag: np.cumsum(list(by_word.values())) for tag, by_word in counts.items()}

    def draw(self, tag: str, uniform: float, other_than: str | None = None) -> str:
        """The word of `tag` at `uniform` in [0, 1) of its cumulative distribution; with `other_than`,
        of the distribution without that word (renormalised), so the draw is another word of the tag
        (Tang's slides, "Data Augmentation": "replace a word with another of the same POS tag"). A tag
        whose only word is `other_than` has no other word to give: it gives that word back."""
        cumulative, words = self.cumulative[tag], self.words[tag]
        excluded = self.position[tag].get(other_than) if other_than is not None else None
        if excluded is None or len(words) == 1:
            return words[int(np.searchsorted(cumulative, uniform * cumulative[-1], side="right"))]
        before = cumulative[excluded - 1] if excluded else 0
        own = cumulative[excluded] - before
        rest = cumulative[-1] - own
        point = min(uniform * rest, np.nextafter(rest, 0))  # on the line without the excluded word's share ...
        if point >= before:
            point += own  # ... mapped back past it
        return words[int(np.searchsorted(cumulative, point, side="right"))]


@dataclass(frozen=True)
class TangSettings:
    p_mask: float = 0.1
    p_pos: float = 0.1
    p_ng: float = 0.25
    ngram_max: int = 5
    mask_token: str = "[MASK]"
    replace_with_other: bool = True  # augment.pos_replacement: another word of the tag, not the same one


def synthetic(sentence: Sentence, settings: TangSettings, lexicon: PosLexicon | None,
              rng: np.random.Generator) -> str:
    """One synthetic copy of `sentence` (masking / POS-guided replacement, then n-gram sampling)."""
    words, spaces = list(sentence.words), list(sentence.spaces)
    for i, x in enumerate(rng.random(len(words))):
        if x < settings.p_mask:
            words[i] = settings.mask_token
        elif x < settings.p_mask + settings.p_pos:
            words[i] = lexicon.draw(sentence.tags[i], rng.random(),
                                    other_than=sentence.words[i] if settings.replace_with_other else None)
    if rng.random() < settings.p_ng and words:
        n = min(int(rng.integers(1, settings.ngram_max + 1)), len(words))
        start = int(rng.integers(0, len(words) - n + 1))
        words, spaces = words[start:start + n], spaces[start:start + n]
    return join(words, spaces)


def augment_example(sentences: tuple[Sentence, ...], n_iter: int, settings: TangSettings,
                    lexicon: PosLexicon | None, rng: np.random.Generator,
                    seen: set | None = None) -> list[tuple[str, ...]]:
    """Up to n_iter new examples from one example (one sentence, or a pair): each a tuple of texts.
    Duplicates of each other and of the original are dropped; so are those in `seen` (dedupe across
    examples), which is updated."""
    original = tuple(s.text for s in sentences)
    seen = set() if seen is None else seen
    seen.add(original)
    out = []
    for i in range(n_iter):
        # a pair: first only, second only, both (i mod 3); a single sentence: always itself
        changed = (0,) if len(sentences) == 1 else ((0,), (1,), (0, 1))[i % 3]
        example = tuple(synthetic(s, settings, lexicon, rng) if side in changed else original[side]
                        for side, s in enumerate(sentences))
        if example not in seen:
            seen.add(example)
            out.append(example)
    return out
