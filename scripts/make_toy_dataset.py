"""Write distil/resources/toy: a tiny 3-topic dataset for smoke runs and tests.

Sentences come from per-topic word lists, so a model can learn the topics from a few
dozen examples. Deterministic: re-running rewrites the same files.
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


def main() -> None:
    out = Path(__file__).resolve().parent.parent / "distil" / "resources" / "toy"
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, per_topic in SIZES.items():
        rows = [(sentence(rng, words), topic) for topic, words in TOPICS.items() for _ in range(per_topic)]
        order = rng.permutation(len(rows))
        lines = ["text\tlabel"] + [f"{rows[i][0]}\t{rows[i][1]}" for i in order]
        (out / f"{split}.tsv").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
