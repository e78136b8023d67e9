"""A saved student: the one home of its folder's format. A run writes it (write_student); SavedStudent
reads it back and predicts (no argument parsing: the `distil predict` command is distil/cli/predict.py).

Pairs are given as "first sentence ||| second sentence". Tagging prints word/TAG.

A SavedStudent serves on one device (the active runtime's by default, distil.common.runtime; `.to`
moves it): each batch's inputs are copied there once and its logits back once, in fp32 (serving
gives the saved model's own predictions, not a lower precision's).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from distil.common.runtime import Runtime, current, fetch
from distil.config.schema import StudentConfig
from distil.data.batching import model_inputs
from distil.data.cut import cut_all, cut_for_tokenizer
from distil.errors import DistilError
from distil.serve.speed import torch_threads
from distil.store.artifacts import MANIFEST
from distil.students import build_student, reads_pairs_apart, reads_words
from distil.students.static import bag_means
from distil.students.vocab import UNK, TrimmedVocab, student_sep_id
from distil.tasks import get_task
from distil.tasks.text import split_pairs, wordpiece_encoder, words_of

ONE_BAG = torch.zeros(1, dtype=torch.int64)  # the offsets of a single bag (read, never written)


def write_student(out: Path, model: torch.nn.Module, vocab: TrimmedVocab, tokenizer, *, student: dict, task,
                  labels: list[str], teacher_hidden_size: int, representation_head: bool, projection: str,
                  max_length: int, shared_output: bool = True) -> None:
    """Everything SavedStudent needs: weights, vocabulary, the teacher's tokenizer, and config.json
    (the student's settings, its task, output labels and how its inputs were cut)."""
    out.mkdir(parents=True, exist_ok=True)
    # from the CPU, whichever device trained it: a saved student is read back anywhere
    save_file({k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}, out / "model.safetensors")
    vocab.save(out / "vocab.json")
    tokenizer.save_pretrained(out / "tokenizer")
    config = {"student": student, "task": task.name, "inputs": task.inputs, "labels": labels,
              "vocab_size": len(vocab), "teacher_hidden_size": teacher_hidden_size,
              "representation_head": representation_head, "projection": projection,
              "shared_output": shared_output, "max_length": max_length}
    (out / "config.json").write_text(json.dumps(config, indent=2))


class SavedStudent:
    """`device`: where it serves (None: the active runtime's device, the CPU outside one)."""

    def __init__(self, directory: Path, device: str | torch.device | None = None):
        from transformers import AutoTokenizer

        _check_complete(directory)
        self.config = _read_part(directory / "config.json", lambda path: json.loads(path.read_text()))
        self.cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), self.config["student"])
        self.task = get_task(self.config["task"], pair=self.config.get("inputs") == "pair")
        self.labels = self.config["labels"]
        self.vocab = _read_part(directory / "vocab.json", TrimmedVocab.load)
        self.tokenizer = _read_part(directory / "tokenizer",
                                    lambda path: AutoTokenizer.from_pretrained(path, local_files_only=True))
        # a Transformer reads a pair's second segment from [SEP] on, as it trained (run/pipeline.py)
        sep = student_sep_id(self.vocab, self.tokenizer.sep_token_id, reads_words(self.cfg))
        self.model = build_student(self.cfg, len(self.vocab), len(self.labels), self.task,
                                   self.config["teacher_hidden_size"],
                                   representation_head=self.config.get("representation_head", False),
                                   projection=self.config.get("projection", "side"),
                                   sep_id=sep,
                                   shared_output=self.config.get("shared_output", True))
        # read onto the CPU (safetensors' map_location), then moved once to the serving device below
        _read_part(directory / "model.safetensors",
                   lambda path: self.model.load_state_dict(load_file(path, device="cpu")))
        self.model.eval()
        # a bag-of-tokens student (static) serves batches as bags: no padding (StaticStudent.forward_bags)
        self.bags = getattr(self.model, "serves_bags", False)
        self.folded = self.word_rows = self.one_request = None
        if self.bags:
            self._bag_tokens, self._student_ids = self._bag_reader()
            self.folded = self.model.folded_classifier()  # a linear model's classifier folded into its table
            self.word_rows = WordRows(*self.folded, self.vocab) if self.folded and reads_words(self.cfg) else None
            # one request, in numpy: a folded word table by word, else the student's own OneRequest. Taken
            # here, on the CPU, before the model moves: it serves from host memory on any device (one
            # text is a few microseconds of numpy, less than a copy to a GPU and back)
            self.one_request = self.word_rows or getattr(self.model, "one_request", lambda folded: None)(self.folded)
        self.to(current().device if device is None else device)

    def to(self, device: str | torch.device) -> SavedStudent:
        """Serve on `device` (checked as runtime.device is: auto, cpu, cuda, cuda:N or mps), in fp32."""
        self.runtime = Runtime.resolve(str(device))
        self.model.to(self.runtime.device)
        if self.folded is not None:  # the batched bag path's folded table
            self.folded = tuple(tensor.to(self.runtime.device) for tensor in self.folded)
        return self

    def _bag_reader(self) -> tuple[Callable, Callable]:
        """(texts -> each text's tokens, those tokens laid end to end -> student ids as an int64 array)."""
        max_length = self.config["max_length"]
        if reads_words(self.cfg):
            return (lambda texts: [self.vocab.map(words_of(text, max_length)) for text in texts],
                    lambda ids: np.asarray(ids, dtype=np.int64))
        # teacher id -> student id over the tokenizer's whole vocabulary: one gather, no bounds check
        student_id = np.full(max(len(self.tokenizer), len(self.vocab.table)), UNK, dtype=np.int64)
        student_id[:len(self.vocab.table)] = self.vocab.table
        return wordpiece_encoder(self.tokenizer, max_length), student_id.__getitem__

    def _encode(self, text: str):
        max_length = self.config["max_length"]
        if self.task.per_token:  # split into words before its tokenizer cuts it: cut by characters first
            text = cut_for_tokenizer(text, max_length)
        if reads_words(self.cfg):
            return self.vocab.map(words_of(text, max_length)), None
        ids, context = self.task.encode_text(self.tokenizer, text, max_length, apart=reads_pairs_apart(self.cfg))
        student_ids = tuple(self.vocab.map(part) for part in ids) if isinstance(ids, tuple) else self.vocab.map(ids)
        return student_ids, context

    def encode_batch(self, texts: list[str], one_request: bool = True) -> tuple[torch.Tensor, ...]:
        """The model's inputs for many texts (one batched tokenizer call): what serving a batch costs
        before the model runs. `one_request` False: one text too in the batched layout (an exported
        model reads only that), without the one-request fast paths of a bag student."""
        max_length = self.config["max_length"]
        if one_request and self.word_rows is not None and len(texts) == 1:
            return (words_of(texts[0], max_length),)  # one request to a folded word table: its words (WordRows)
        if self.bags:
            return self._bags(texts, one_request)
        return self.padded_batch(texts)

    def padded_batch(self, texts: list[str]) -> tuple[torch.Tensor, ...]:
        """Padded (ids, mask) inputs, or two pairs of them for a pair read apart: what the model's own
        forward reads, a bag student's too (which serves from bags, but has its representation here)."""
        max_length = self.config["max_length"]
        if self.task.per_token:  # a text to tag, as _encode (the other tasks cut each sentence of a pair)
            texts = cut_all(texts, max_length)
        if reads_words(self.cfg):
            return model_inputs([self.vocab.map(words_of(text, max_length)) for text in texts])
        ids = self.task.encode_texts(self.tokenizer, texts, max_length, apart=reads_pairs_apart(self.cfg))
        return model_inputs([tuple(self.vocab.map(part) for part in example) if isinstance(example, tuple)
                             else self.vocab.map(example) for example in ids])

    def encode_with_contexts(self, texts: list[str], one_request: bool = True) -> tuple[tuple, list]:
        """(encode_batch's inputs, each text's context for the task's decode): a tagged text's words and
        its wordpieces' words (read from the same tokenizer call), None for the other tasks."""
        if not self.task.per_token:
            return self.encode_batch(texts, one_request), [None] * len(texts)
        encoded = [self._encode(text) for text in texts]  # tagging tokenises text by text anyway
        return model_inputs([ids for ids, _ in encoded]), [context for _, context in encoded]

    def _bags(self, texts: list[str], one_request: bool = True) -> tuple[torch.Tensor, ...]:
        """(student ids laid end to end, offsets) per sentence column: each text's, or a pair's first
        sentences' then their seconds'."""
        columns = split_pairs(texts) if self.task.inputs == "pair" else (texts,)
        bags = []
        for column in columns:
            ids = self._bag_tokens(column)
            if len(ids) == 1 and one_request and self.one_request is not None:  # served in numpy: its ids
                return (self._student_ids(ids[0]),)
            if len(ids) == 1:  # one request: no lengths to count, no offsets to sum
                bags += [torch.from_numpy(self._student_ids(ids[0])), ONE_BAG]
                continue
            lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
            flat = np.fromiter(itertools.chain.from_iterable(ids), dtype=np.int64, count=int(lengths.sum()))
            offsets = np.zeros(len(ids), dtype=np.int64)
            np.cumsum(lengths[:-1], out=offsets[1:])
            bags += [torch.from_numpy(self._student_ids(flat)), torch.from_numpy(offsets)]
        return tuple(bags)

    def logits(self, inputs: tuple) -> torch.Tensor:
        """Logits for encode_batch's inputs, on the CPU: the batch copied to the device once, and its
        logits back once."""
        if len(inputs) == 1 and self.one_request is not None:  # one request, in numpy (encode_batch)
            return torch.from_numpy(self.one_request(inputs[0]))
        return fetch(self._model_logits(self.runtime.put(inputs)))

    @torch.inference_mode()
    def outputs(self, inputs: tuple) -> dict[str, torch.Tensor]:
        """Every output of the model's forward (the representation too) for padded_batch's inputs, on the CPU."""
        return fetch(self.model(*self.runtime.put(inputs)))

    @torch.inference_mode()
    def _model_logits(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if not self.bags:
            return self.model(*inputs)["logits"]
        # one request: too small for torch to split, and switching threads costs ~10 us; on a GPU the
        # CPU's threads do not run the model
        if inputs[1].shape[0] == 1 or self.runtime.on_gpu:
            return self._bag_logits(inputs)
        # A bag student's forward is a gather and two small products (~0.2 ms for 32 sentences):
        # spread over threads it costs more than it saves, waking them and taking the cores from the
        # tokenizer's own threads (measured: batch-32 serving 1.5x faster on one thread, 2 cores).
        with torch_threads(1):
            return self._bag_logits(inputs)

    def _bag_logits(self, inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
        if self.folded is None:
            return self.model.forward_bags(*inputs)["logits"]
        table, bias = self.folded
        return bag_means(table, *inputs).add_(bias)

    @torch.inference_mode()
    def predict(self, text: str) -> str:
        ids, context = self._encode(text)
        logits = fetch(self.model(*self.runtime.put(model_inputs([ids])))["logits"][0])
        return self.task.decode(logits, context, self.labels)


class WordRows:
    """A folded linear word-level student (student=static-words) serving one request as fastText
    does: each word's row of E W^T (what it adds to every label's logit) looked up by the word
    itself, averaged in Python, plus the bias. For one sentence, torch's fixed cost per operation
    (~5 us; a gather, a sum, a division and an addition) is most of the time, and the ids need not
    exist at all (measured on SST-2, 2 cores: 9 us a sentence end to end, against 43 us through
    torch and fastText's 11 us). Batches still go through embedding_bag (SavedStudent._bags)."""

    def __init__(self, table: torch.Tensor, bias: torch.Tensor, vocab: TrimmedVocab):
        rows = table.tolist()
        self.rows = {word: rows[index] for word, index in vocab.index.items()}
        self.unknown, self.bias = rows[UNK], bias.tolist()

    def __call__(self, words: list[str]) -> np.ndarray:
        """[1, labels]: the mean of the words' rows plus the bias; no words, the bias (an empty bag's
        mean is zeros, as embedding_bag gives)."""
        rows = [self.rows.get(word, self.unknown) for word in words]
        if not rows:
            return np.array([self.bias], dtype=np.float32)
        count = len(rows)
        logits = [sum(column) / count + b for column, b in zip(zip(*rows, strict=True), self.bias, strict=True)]
        return np.array([logits], dtype=np.float32)


STUDENT_FILES = ("model.safetensors", "config.json", "vocab.json", "tokenizer")
RERUN = "the run that wrote it did not finish or the file was changed: rerun the training command"


def _check_complete(directory: Path) -> None:
    missing = [name for name in STUDENT_FILES if not (directory / name).exists()]
    if missing:
        _check_not_other_model(directory)
    if len(missing) == len(STUDENT_FILES):
        raise DistilError(f"{directory} holds no saved student (model.safetensors); pass a run directory "
                          f"written by `distil` or its student/ folder")
    if missing:
        raise DistilError(f"{directory} is an incomplete student (missing: {', '.join(missing)}); {RERUN}")


def _check_not_other_model(directory: Path) -> None:
    """A folder of distil's cache (a fine-tuned teacher: a Hugging Face model folder with weights and a
    config.json, but no vocab.json) or another Hugging Face model is not an incomplete student: say what it is."""
    kind = _json_field(directory / MANIFEST, "kind")
    if kind == "teachers" or (kind is None and _json_field(directory / "config.json", "model_type")):
        what = "a fine-tuned teacher from distil's cache" if kind else "a Hugging Face model folder"
        raise DistilError(f"{directory} is {what}, not a saved student; pass a run directory written by `distil` "
                          f"(outputs/runs/<date>/<time>) or its student/ folder (a teacher loads with transformers' "
                          f"from_pretrained)")
    if kind is not None:
        raise DistilError(f"{directory} is an artifact of distil's cache ({kind}), not a saved student; pass a run "
                          f"directory written by `distil` (outputs/runs/<date>/<time>) or its student/ folder")


def _json_field(path: Path, field: str):
    """`field` of the JSON object in `path`; None when the file is missing, unreadable or has no such field."""
    try:
        value = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value.get(field) if isinstance(value, dict) else None


def _read_part(path: Path, read):
    """read(path): a truncated or damaged file of a saved student is one line, not a traceback."""
    try:
        return read(path)
    except (OSError, ValueError, KeyError, RuntimeError, SafetensorError) as error:  # json, safetensors, torch
        cause = " ".join(str(error).split())[:200]
        raise DistilError(f"{path} is damaged ({type(error).__name__}: {cause}); {RERUN}") from None
