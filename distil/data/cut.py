"""A text cut, by characters, to what a model can read of it, before any tokenizer sees it.

A model reads at most `max_length` wordpieces, but a tokenizer handed a text tokenises all of it
before it truncates: a 100 MB line took 4.6 GB in the Rust tokenizer (its alignments cost several
bytes per byte) and ended in a crash. Every text is therefore cut to `max_length * CHARS_PER_WORDPIECE`
characters first, in training, in pre-training and in serving alike; a shorter text is left whole.

The margin: the cut loses nothing the model reads as long as those characters hold `max_length`
wordpieces, i.e. while the text averages fewer than CHARS_PER_WORDPIECE characters a wordpiece
(spaces included). English averages 4 to 5 (IMDB's reviews 4.2 with BERT's uncased vocabulary: a
wordpiece is a word or a piece of one, its longest entries 18 characters, a punctuation mark a piece
of its own), scripts without spaces less (a CJK character is a piece), and a byte-level BPE spends
one piece or more on an unusual character. 32 leaves a margin of about 7 on English prose: only a
text whose first characters are mostly whitespace, or a run-on word of unknown characters ([UNK],
one piece for any length), is read shorter than before. The word that straddles the cut is cut in
two, but it lies past the last wordpiece read. The cost is small: at most 16,384 characters
tokenised per text at max_length 512. A word-level student reads `max_length` words: the same
margin holds for words of up to 31 characters on average.

A sentence given as words (tagging's CoNLL sentences) is cut the same way: at the same characters,
its words counted with a space between them, so that a training sentence and the same sentence
typed as one text to a served tagger reach the tokenizer alike.
"""

from __future__ import annotations

CHARS_PER_WORDPIECE = 32


def readable_chars(max_length: int) -> int:
    """How many characters of a text are kept for a model that reads `max_length` wordpieces."""
    return max_length * CHARS_PER_WORDPIECE


def cut_for_tokenizer(text: str, max_length: int) -> str:
    """`text`, or its first readable_chars(max_length) characters when it is longer."""
    limit = readable_chars(max_length)
    return text if len(text) <= limit else text[:limit]


def cut_all(texts: list[str], max_length: int) -> list[str]:
    """cut_for_tokenizer of each text (the same list when none is long: serving's fast paths copy nothing)."""
    limit = readable_chars(max_length)
    if all(len(text) <= limit for text in texts):
        return texts
    return [cut_for_tokenizer(text, max_length) for text in texts]


def cut_words(words: list[str], max_length: int) -> list[str]:
    """The words of `words` that the first readable_chars(max_length) characters of `" ".join(words)`
    hold, the word that straddles the limit cut to the characters left: `words` itself when they all fit.
    Reads words only up to the limit, however many there are."""
    left = readable_chars(max_length)
    for count, word in enumerate(words):
        if len(word) > left:
            return [*words[:count], word[:left]] if left else words[:count]
        left -= len(word) + 1  # the word and the space after it
        if left < 0:  # no room for another word
            return words if count + 1 == len(words) else words[:count + 1]
    return words
