"""Write the tiny datasets shipped in distil/resources for smoke runs and tests.

toy:      3-topic sentence classification (tsv)
toy-pair: sentence pairs, label 1 when both sentences share a topic (tsv)
toy-ner:  IOB2 NER in two made-up "languages" (conll, one folder per language)
toy-sts:  sentence pairs scored 0-5 by how many topic words they share (regression, tsv)

Sentences come from word lists, so a model can learn them from a few dozen examples.
Deterministic: re-running rewrites the same files.
"""

from pathlib import Path

import numpy as np

TOPICS = {
    "sports": "match goal team coach league striker keeper season cup final referee stadium".split(),
    "food": "recipe bread cheese soup chef oven spice sauce dinner garlic pasta kitchen".split(),
    "tech": "software chip laptop server code phone network robot data cloud browser app".split(),
}
FILLER = "the a new big old this that our their with about after today again".split()
SIZES = {"train": 20, "dev": 8, "test": 8}  # per topic


def sentence(rng: np.random.Generator, words: list[str]) -> str:
    picks = list(rng.choice(words, size=4)) + list(rng.choice(FILLER, size=3))
    rng.shuffle(picks)
    return " ".join(picks)


PEOPLE = "anna boris chen dara emil farah".split()
PLACES = "paris lima oslo cairo delhi quito".split()
ORGS = "acme globex initech umbrella".split()
VERBS = "met visited joined left praised called".split()
RESOURCES = Path(__file__).resolve().parent.parent / "distil" / "resources"


def write_toy(rng: np.random.Generator) -> None:
    out = RESOURCES / "toy"
    out.mkdir(parents=True, exist_ok=True)
    for split, per_topic in SIZES.items():
        rows = [(sentence(rng, words), topic) for topic, words in TOPICS.items() for _ in range(per_topic)]
        order = rng.permutation(len(rows))
        lines = ["text\tlabel"] + [f"{rows[i][0]}\t{rows[i][1]}" for i in order]
        (out / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def write_toy_pair(rng: np.random.Generator) -> None:
    out = RESOURCES / "toy-pair"
    out.mkdir(parents=True, exist_ok=True)
    topics = list(TOPICS)
    for split, per_topic in SIZES.items():
        lines = ["text\ttext_pair\tlabel"]
        for _ in range(per_topic * len(topics)):
            first = rng.choice(topics)
            same = bool(rng.integers(2))
            second = first if same else rng.choice([t for t in topics if t != first])
            lines.append(f"{sentence(rng, TOPICS[first])}\t{sentence(rng, TOPICS[second])}\t{int(same)}")
        (out / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def ner_sentence(rng: np.random.Generator) -> list[tuple[str, str]]:
    person, place, org = rng.choice(PEOPLE), rng.choice(PLACES), rng.choice(ORGS)
    words = [(person, "B-PER"), (rng.choice(VERBS), "O"), (org, "B-ORG"), ("in", "O"), (place, "B-LOC")]
    if rng.integers(2):
        words.insert(1, (rng.choice(PEOPLE) + "son", "I-PER"))
    return words


def write_toy_ner(rng: np.random.Generator) -> None:
    for lang in ("aa", "bb"):
        out = RESOURCES / "toy-ner" / lang
        out.mkdir(parents=True, exist_ok=True)
        for split, per_topic in SIZES.items():
            blocks = ["\n".join(f"{w} {t}" for w, t in ner_sentence(rng)) for _ in range(per_topic)]
            (out / f"{split}.txt").write_text("\n\n".join(blocks) + "\n")


def write_toy_sts(rng: np.random.Generator) -> None:
    """Sentence b takes k of its 4 topic words from sentence a's topic: score 5k/4 (0 to 5)."""
    out = RESOURCES / "toy-sts"
    out.mkdir(parents=True, exist_ok=True)
    topics = list(TOPICS)
    for split, per_topic in SIZES.items():
        lines = ["sentence1\tsentence2\tscore"]
        for _ in range(per_topic * len(topics)):
            first, other = rng.choice(topics, size=2, replace=False)
            shared = int(rng.integers(5))
            words = list(rng.choice(TOPICS[first], size=shared)) + list(rng.choice(TOPICS[other], size=4 - shared))
            words += list(rng.choice(FILLER, size=3))
            rng.shuffle(words)
            lines.append(f"{sentence(rng, TOPICS[first])}\t{' '.join(words)}\t{5 * shared / 4:.2f}")
        (out / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def main() -> None:
    rng = np.random.default_rng(0)
    write_toy(rng)
    write_toy_pair(rng)
    write_toy_ner(rng)
    write_toy_sts(np.random.default_rng(1))  # its own generator: the files above stay as they were


if __name__ == "__main__":
    main()
