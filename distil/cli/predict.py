"""`distil predict <run dir> TEXT... | --file F`: load a saved student and print its predictions.

Texts go through the student in batches (--batch-size) with the Python API (distil.serve.api.Student),
on the torch weights or an ONNX export (--backend). Pairs are given as "first sentence ||| second
sentence", or in --file as the two sentences on one line, tab-separated. Tagging prints word/TAG.
A schedule=d0 run serves a student per language: --language names one, else each text goes to the
student whose vocabulary knows most of it. The student serves on the CPU unless --device
(device=...) names another: auto, cuda, cuda:N or mps. The whole input's throughput goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from distil.cli.parsing import Parser, run_guarded
from distil.common.console import console_command
from distil.data.check_file import text_lines
from distil.errors import DistilError
from distil.tasks.text import PAIR_SEPARATOR

EXAMPLES = """\
examples:
  distil predict outputs/runs/<date>/<time> "a gripping, funny film"
  distil predict run_dir=outputs/runs/<date>/<time> text="a gripping, funny film"
  distil predict outputs/runs/<date>/<time> --file texts.txt        # one text per line
  distil predict outputs/runs/<date>/<time> --file texts.txt --jsonl > predictions.jsonl
  distil predict outputs/runs/<date>/<time> "first sentence ||| second sentence"
  distil predict outputs/runs/<date>/<time> --backend onnx --file texts.txt   # after `distil export`
  distil predict outputs/runs/<date>/<time> --language es "Juan vive en Madrid"   # a schedule=d0 run
  distil predict outputs/runs/<date>/<time> --device cuda --file texts.txt
"""
KEYS = {"file": "--file", "device": "--device", "backend": "--backend", "language": "--language",
        "batch_size": "--batch-size"}  # distil's key=value form -> the option


def predict_arguments(args: list[str]) -> list[str]:
    """`distil predict run_dir=R text="..." file=F device=D ...` in the positional argument form."""
    translated = []
    for arg in args:
        key, _, value = arg.partition("=")
        if key == "run_dir":
            translated.insert(0, value)
        elif key in KEYS:
            translated += [KEYS[key], value]
        else:  # text=... or a bare text
            translated.append(value if key == "text" else arg)
    return translated


def read_texts(args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """The texts to label, arguments then --file lines, and where each came from ("text 2", "--file F line 7")
    for the errors; an empty text is an error, not a label."""
    for number, text in enumerate(args.text, start=1):
        if not text.strip():
            raise DistilError(f"text {number} is empty; give a non-empty text to label")
    texts, origins = list(args.text), [f"text {number}" for number in range(1, len(args.text) + 1)]
    if args.file:
        for number, line in file_lines(args.file):
            texts.append(line)
            origins.append(f"--file {args.file} line {number}")
    if not texts:
        raise DistilError("nothing to predict: give texts as arguments or --file")
    return texts, origins


def file_lines(file: Path) -> list[tuple[int, str]]:
    """(line number, text) of each non-blank line of --file. A line is kept whole, however long: the
    student cuts what it reads by characters before its tokenizer sees it (distil/data/cut.py)."""
    if file.is_dir():
        raise DistilError(f"--file {file} is a directory; give a text file, one text per line")
    if not file.exists():
        raise DistilError(f"--file {file} does not exist; check the path")
    # the encoding and binary check every reader of text files shares; isspace, not strip: no copy of a
    # long line just to test it
    lines = [(number, line.rstrip("\r\n")) for number, line in enumerate(text_lines(file, "--file", "--file"), start=1)
             if not line.isspace()]
    if not lines:
        raise DistilError(f"--file {file} has no text (it is empty or blank); give one text per line")
    return lines


def as_pairs(texts: list[str], origins: list[str]) -> list[str]:
    """A pair student's texts as 'first ||| second': a --file line with a tab and no '|||' is a pair, its two
    sentences either side of the tab. Anything else than two sentences is refused, naming the format."""
    from distil.serve.api import check_pair  # with the student: torch is loaded by then

    pairs = []
    for text, origin in zip(texts, origins, strict=True):
        from_file = origin.startswith("--file")
        if from_file and "\t" in text and PAIR_SEPARATOR not in text:
            columns = text.split("\t")
            if len(columns) > 2:
                raise DistilError(f"{origin} has {len(columns)} tab-separated columns; a pair is its two "
                                  f"sentences, tab-separated (or 'first {PAIR_SEPARATOR} second')")
            text = f"{columns[0]} {PAIR_SEPARATOR} {columns[1]}"
        fix = (f"give the two sentences tab-separated, or 'first {PAIR_SEPARATOR} second'" if from_file
               else f"give 'first {PAIR_SEPARATOR} second'")
        check_pair(text, origin, f"this student reads sentence pairs: {fix}")
        pairs.append(text)
    return pairs


def build_parser(prog: str) -> argparse.ArgumentParser:
    parser = Parser(prog, "distil predict", __doc__.splitlines()[0], EXAMPLES)
    parser.add_argument("run_dir", type=Path, help="a run directory (or its student/ folder); also run_dir=R")
    parser.add_argument("text", nargs="*", help=f"texts to label (also text=...); a pair is "
                                                f"'first {PAIR_SEPARATOR} second'")
    parser.add_argument("--file", type=Path, help="one text per line, or a pair's two sentences tab-separated "
                                                  "(also file=F)")
    parser.add_argument("--jsonl", action="store_true",
                        help="one JSON object per text: text, label and probabilities (per word for tagging)")
    parser.add_argument("--batch-size", type=int, default=64, help="texts per batch (default 64; also batch_size=N)")
    parser.add_argument("--backend", default="torch", choices=("torch", "onnx", "onnx-int8"),
                        help="torch (default), or the ONNX export `distil export RUN_DIR [--int8]` wrote "
                             "(also backend=B)")
    parser.add_argument("--language", help="a schedule=d0 run's student of this language (default: each text "
                                           "goes to the student whose vocabulary knows most of it; also language=L)")
    # the CPU by default: a prediction serves a few texts, and a GPU's start-up costs more than they do
    parser.add_argument("--device", default="cpu",
                        help="where the student runs: cpu (default), auto, cuda, cuda:N or mps (also device=D)")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil predict", keys: bool = True) -> int:
    """keys: also take `run_dir=R text=... file=F device=D ...` (distil's key=value form; the alias never did)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(prog).parse_intermixed_args(predict_arguments(argv) if keys else argv)
    with console_command(prog):
        texts, origins = read_texts(args)
        if args.batch_size < 1:
            raise DistilError(f"--batch-size {args.batch_size} must be at least 1")
        # torch and transformers: only once the input is read
        from distil.common.runtime import Runtime, use
        from distil.serve.api import Student

        # the command's whole length: the student loads and serves on it (a device this machine lacks
        # is one line, before any loading)
        with use(Runtime.resolve(args.device)):
            student = Student.load(args.run_dir, backend=args.backend, language=args.language)
            if student.inputs == "pair":
                texts = as_pairs(texts, origins)
            started = time.perf_counter()
            predictions = student.predictions(texts, batch_size=args.batch_size)
            seconds = time.perf_counter() - started
        for prediction in predictions:
            # the fields written one by one: a long text is not copied into a joined line
            print(*([json_line(prediction, student.labels)] if args.jsonl else plain_fields(prediction)), sep="\t")
        print(f"{len(texts)} texts in {seconds:.2f} s: {len(texts) / max(seconds, 1e-9):,.0f} texts/s "
              f"({args.backend}, batch {args.batch_size})", file=sys.stderr)
    return 0


def plain_fields(prediction) -> list[str]:
    """The prediction, then (for a schedule=d0 run) the language that served it, then the text: the
    tab-separated fields of its line."""
    language = [] if prediction.language is None else [prediction.language]
    return [prediction.line, *language, prediction.text]


def json_line(prediction, labels: list[str]) -> str:
    """text, label and probabilities ({label: p}; per word for tagging, null for a word cut off), and the
    language that served it for a schedule=d0 run."""
    record = {"text": prediction.text, "label": prediction.label, "probabilities": None}
    if prediction.probabilities is not None:
        rows = prediction.probabilities
        record["probabilities"] = ([label_probabilities(row, labels) for row in rows] if rows.ndim == 2
                                   else label_probabilities(rows, labels))
    if prediction.language is not None:
        record["language"] = prediction.language
    return json.dumps(record, ensure_ascii=False)


def label_probabilities(row, labels: list[str]) -> dict[str, float] | None:
    values = [float(value) for value in row]
    return None if any(math.isnan(value) for value in values) else dict(zip(labels, values, strict=True))


def alias() -> None:
    """`distil-predict`, kept for one release."""
    sys.exit(run_guarded(main, None, "distil-predict", keys=False))
