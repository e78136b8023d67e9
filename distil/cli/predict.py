"""`distil predict <run dir> TEXT... | --file F`: load a saved student and print its predictions.

Pairs are given as "first sentence ||| second sentence". Tagging prints word/TAG. The student
serves on the CPU unless --device (device=...) names another: auto, cuda, cuda:N or mps.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from distil.cli.parsing import Parser
from distil.common.console import console_command
from distil.errors import DistilError
from distil.tasks.text import PAIR_SEPARATOR

EXAMPLES = """\
examples:
  distil predict outputs/runs/<date>/<time> "a gripping, funny film"
  distil predict run_dir=outputs/runs/<date>/<time> text="a gripping, funny film"
  distil predict outputs/runs/<date>/<time> --file texts.txt        # one text per line
  distil predict outputs/runs/<date>/<time> "first sentence ||| second sentence"
  distil predict outputs/runs/<date>/<time> --device cuda --file texts.txt
"""


def predict_arguments(args: list[str]) -> list[str]:
    """`distil predict run_dir=R text="..." file=F device=D` in the positional argument form."""
    translated = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key == "run_dir":
            translated.insert(0, value)
        elif key in ("file", "device"):
            translated += [f"--{key}", value]
        else:  # text=... or a bare text
            translated.append(value if key == "text" else arg)
    return translated


def read_texts(args: argparse.Namespace) -> list[str]:
    """The texts to label: arguments, then --file lines; an empty text is an error, not a label."""
    for number, text in enumerate(args.text, start=1):
        if not text.strip():
            raise DistilError(f"text {number} is empty; give a non-empty text to label")
    texts = list(args.text)
    if args.file:
        if not args.file.is_file():
            raise DistilError(f"--file {args.file} does not exist")
        try:
            lines = [line.rstrip("\n") for line in args.file.open(encoding="utf-8") if line.strip()]
        except UnicodeDecodeError:
            raise DistilError(f"--file {args.file} is not UTF-8 text; re-save it as UTF-8") from None
        if not lines:
            raise DistilError(f"--file {args.file} has no text (it is empty or blank); give one text per line")
        texts += lines
    if not texts:
        raise DistilError("nothing to predict: give texts as arguments or --file")
    return texts


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil predict", __doc__.splitlines()[0], EXAMPLES)
    parser.add_argument("run_dir", type=Path, help="a run directory (or its student/ folder); also run_dir=R")
    parser.add_argument("text", nargs="*", help=f"texts to label (also text=...); a pair is "
                                                f"'first {PAIR_SEPARATOR} second'")
    parser.add_argument("--file", type=Path, help="one text per line (also file=F)")
    # the CPU by default: a prediction serves a few texts, and a GPU's start-up costs more than they do
    parser.add_argument("--device", default="cpu",
                        help="where the student runs: cpu (default), auto, cuda, cuda:N or mps (also device=D)")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil predict", keys: bool = True) -> int:
    """keys: also take `run_dir=R text=... file=F device=D` (distil's key=value form; the alias never did)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(prog).parse_args(predict_arguments(argv) if keys else argv)
    directory = args.run_dir / "student" if (args.run_dir / "student").is_dir() else args.run_dir
    with console_command(prog):
        texts = read_texts(args)
        # torch and transformers: only once the input is read
        from distil.common.runtime import Runtime, use
        from distil.serve.student import SavedStudent

        # the command's whole length: the student loads and serves on it (a device this machine lacks
        # is one line, before any loading)
        with use(Runtime.resolve(args.device)):
            student = SavedStudent(directory)
            for text in texts:
                print(f"{student.predict(text)}\t{text}")
    return 0


def alias() -> None:
    """`distil-predict`, kept for one release."""
    sys.exit(main(prog="distil-predict", keys=False))
