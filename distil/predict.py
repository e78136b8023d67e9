"""`distil-predict <run dir> TEXT... | --file F`: load a saved student and print its predictions.

Pairs are given as "first sentence ||| second sentence". Tagging prints word/TAG.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf
from safetensors.torch import load_file

from distil.config import StudentConfig
from distil.data.batching import model_inputs
from distil.errors import DistilError
from distil.students import build_student, reads_pairs_apart, reads_words
from distil.students.vocab import TrimmedVocab

PAIR_SEPARATOR = "|||"


class SavedStudent:
    def __init__(self, directory: Path):
        from transformers import AutoTokenizer

        if not (directory / "model.safetensors").is_file():
            raise DistilError(f"{directory} holds no saved student (model.safetensors); pass a run directory "
                              f"written by `distil` or its student/ folder")
        self.config = json.loads((directory / "config.json").read_text())
        self.cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), self.config["student"])
        self.task, self.labels = self.config["task"], self.config["labels"]
        self.vocab = TrimmedVocab.load(directory / "vocab.json")
        self.tokenizer = AutoTokenizer.from_pretrained(directory / "tokenizer", local_files_only=True)
        self.model = build_student(self.cfg, len(self.vocab), len(self.labels), self.task,
                                   self.config["teacher_hidden_size"],
                                   representation_head=self.config.get("representation_head", False))
        self.model.load_state_dict(load_file(directory / "model.safetensors"))
        self.model.eval()

    def _encode(self, text: str):
        max_length = self.config["max_length"]
        if reads_words(self.cfg):
            return self.vocab.map(text.lower().split()[:max_length]), None
        if self.task == "tagging":
            words = text.split()
            enc = self.tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_length)
            return self.vocab.map(enc["input_ids"]), (words, enc.word_ids())
        first, _, second = (part.strip() for part in text.partition(PAIR_SEPARATOR))
        if self.task == "pair" and reads_pairs_apart(self.cfg):
            parts = [self.tokenizer(part, truncation=True, max_length=max_length)["input_ids"]
                     for part in (first, second)]
            return tuple(self.vocab.map(part) for part in parts), None
        second_text = second if self.task == "pair" else None
        ids = self.tokenizer(first, second_text, truncation=True, max_length=max_length)["input_ids"]
        return self.vocab.map(ids), None

    @torch.inference_mode()
    def predict(self, text: str) -> str:
        ids, words = self._encode(text)
        logits = self.model(*model_inputs([ids]))["logits"][0]
        if self.task != "tagging":
            probabilities = logits.softmax(-1)
            best = int(probabilities.argmax())
            return f"{self.labels[best]}\t{probabilities[best]:.3f}"
        tokens, word_ids = words
        best = logits.argmax(-1).tolist()
        tags, seen = [], set()
        for position, word in enumerate(word_ids):
            if word is not None and word not in seen:
                seen.add(word)
                label = self.labels[best[position]]
                tags.append(f"{tokens[word]}/{'O' if label == 'X' else label}")
        return " ".join(tags)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="distil-predict", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path, help="a run directory (or its student/ folder)")
    parser.add_argument("text", nargs="*", help=f"texts to label; a pair is 'first {PAIR_SEPARATOR} second'")
    parser.add_argument("--file", type=Path, help="one text per line")
    args = parser.parse_args(argv)
    directory = args.run_dir / "student" if (args.run_dir / "student").is_dir() else args.run_dir
    texts = list(args.text)
    try:
        if args.file:
            if not args.file.is_file():
                raise DistilError(f"--file {args.file} does not exist")
            texts += [line.rstrip("\n") for line in args.file.open(encoding="utf-8") if line.strip()]
        if not texts:
            raise DistilError("nothing to predict: give texts as arguments or --file")
        student = SavedStudent(directory)
    except DistilError as error:
        print(f"distil-predict: error: {error}", file=sys.stderr)
        sys.exit(2)
    for text in texts:
        print(f"{student.predict(text)}\t{text}")


if __name__ == "__main__":
    main()
