"""Wu et al. (2019) §5.5, Table 5: untuned sentence representations on a pair task. The cosine of a
pair's two sentence vectors is the score; the threshold that classifies it is chosen on dev alone
(the best dev accuracy), then accuracy and F1 of the positive class are reported on test.

    distil paper wu-table5 [dataset=quora] [teacher=minilm] [agnostic.pooling=cls] [key=value ...] [--out DIR]

Rows, each from the same pre-trained (not fine-tuned) teacher:
  teacher (CLS)       the top layer at [CLS]
  teacher (averaged)  the top layer averaged over the sentence's wordpieces
  BiLSTM_KD (cosine)  the SRA architecture from a random start, trained on the task's transfer pairs to
                      fit the teacher's cosine of each pair (§5.5: "fitting the cosine similarity score
                      of the sentence pair directly given by the pre-trained BERT"), [CLS] vectors
  BiLSTM_SRA          the task-agnostic SRA student (distil/pretrain/sra.py, the agnostic group)
Writes <paths.outputs>/tables/untuned.{md,csv} (the wu-table5 preset reads the csv).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from rich.console import Console

from distil.common.atomic import write_atomic
from distil.common.markdown import to_markdown
from distil.data.batching import pad
from distil.errors import DistilError

log = logging.getLogger(__name__)

Encode = Callable[[list[str]], torch.Tensor]  # sentences -> [n, d] vectors


def threshold_on_dev(scores: np.ndarray, labels: np.ndarray) -> float:
    """The threshold t (positive when score >= t) with the best dev accuracy; ties: the lowest t.
    Candidates are the midpoints between consecutive distinct scores, and both ends."""
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1e-6], (values[:-1] + values[1:]) / 2, [values[-1] + 1e-6]])
    accuracies = [float(((scores >= t) == labels).mean()) for t in candidates]
    return float(candidates[int(np.argmax(accuracies))])


def pair_cosines(encode: Encode, firsts: list[str], seconds: list[str]) -> np.ndarray:
    a, b = encode(firsts), encode(seconds)
    return torch.nn.functional.cosine_similarity(a, b, dim=-1).numpy()


def scores_of(threshold: float, scores: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    predicted = scores >= threshold
    tp = float((predicted & labels).sum())
    precision = tp / max(float(predicted.sum()), 1.0)
    recall = tp / max(float(labels.sum()), 1.0)
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"accuracy": float((predicted == labels).mean()), "f1": f1}


def evaluate(encode: Encode, dev: tuple[list[str], list[str], np.ndarray],
             test: tuple[list[str], list[str], np.ndarray]) -> dict[str, float]:
    """Threshold from dev's cosines and labels only; test's labels are read once, to score."""
    dev_scores = pair_cosines(encode, dev[0], dev[1])
    threshold = threshold_on_dev(dev_scores, dev[2])
    test_scores = pair_cosines(encode, test[0], test[1])
    dev_result, test_result = scores_of(threshold, dev_scores, dev[2]), scores_of(threshold, test_scores, test[2])
    return {"threshold": threshold, "dev_accuracy": dev_result["accuracy"], "accuracy": test_result["accuracy"],
            "f1": test_result["f1"]}


def teacher_encoders(encoder, tokenizer, max_length: int) -> dict[str, Encode]:
    """{"cls": ..., "mean": ...}: the teacher's two sentence vectors, each list of sentences read
    by the encoder once for both poolings (Table 5's two teacher rows score the same pairs)."""
    from distil.pretrain.sra import POOLINGS, pooled_vectors

    @functools.lru_cache(maxsize=4)  # a row scores dev and test: four lists of sentences
    def vectors(texts: tuple[str, ...]) -> dict[str, torch.Tensor]:
        ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
        return pooled_vectors(encoder, ids, tokenizer.pad_token_id, POOLINGS)

    return {pooling: lambda texts, pooling=pooling: vectors(tuple(texts))[pooling] for pooling in POOLINGS}


def student_encoder(student, tokenizer, max_length: int) -> Encode:
    """An SRA student over the teacher's whole vocabulary (ids shifted past [PAD], [UNK])."""
    @torch.inference_mode()
    def encode(texts: list[str]) -> torch.Tensor:
        student.eval()
        ids = tokenizer(texts, truncation=True, max_length=max_length)["input_ids"]
        return torch.cat([student.sentence(*student_batch(ids[start:start + 256]))
                          for start in range(0, len(ids), 256)])
    return encode


def student_batch(ids: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher wordpiece ids as the SRA student's padded rows: its vocabulary is every teacher
    wordpiece shifted past [PAD] and [UNK] (distil.students.vocab.TrimmedVocab over all ids)."""
    return pad([[t + 2 for t in x] for x in ids])


def fit_pair_cosine(student, teacher_encode: Encode, tokenizer, firsts: list[str], seconds: list[str],
                    max_length: int, epochs: int = 3, batch_size: int = 256, lr: float = 1e-3, seed: int = 0):
    """BiLSTM_KD of Table 5: train the student so that cos(S_a, S_b) fits the teacher's cos(T_a, T_b)."""
    from distil.common.progress import progress_bar

    log.info("BiLSTM_KD (cosine): the teacher's cosine of each of %d transfer pairs, then %d epochs to fit it",
             len(firsts), epochs)
    targets = torch.from_numpy(pair_cosines(teacher_encode, firsts, seconds))
    encode = student_encoder(student, tokenizer, max_length)
    optimizer = torch.optim.Adam(student.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    ids_a = tokenizer(firsts, truncation=True, max_length=max_length)["input_ids"]
    ids_b = tokenizer(seconds, truncation=True, max_length=max_length)["input_ids"]

    batches = -(-len(firsts) // batch_size)
    with progress_bar() as progress:
        for epoch in range(1, epochs + 1):
            student.train()
            order = rng.permutation(len(firsts))
            task = progress.add_task(f"BiLSTM_KD (cosine) epoch {epoch}/{epochs}", total=batches, status="")
            losses = []
            for start in range(0, len(order), batch_size):
                rows = order[start:start + batch_size]
                a, b = student_batch([ids_a[r] for r in rows]), student_batch([ids_b[r] for r in rows])
                cos = torch.nn.functional.cosine_similarity(student.sentence(*a), student.sentence(*b), dim=-1)
                loss = torch.nn.functional.mse_loss(cos, targets[torch.from_numpy(rows)])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                losses.append(loss.item())
                progress.update(task, advance=1, status=f"loss {losses[-1]:.4f}")
            progress.remove_task(task)
            log.info("BiLSTM_KD (cosine) epoch %d/%d: mean squared cosine error %.4f", epoch, epochs,
                     float(np.mean(losses)))
    return encode


def pairs_of(split, positive: int) -> tuple[list[str], list[str], np.ndarray]:
    return list(split["text"]), list(split["text_pair"]), np.asarray(split["label"]) == positive


def run(overrides: list[str]) -> tuple[pd.DataFrame, Path]:
    """The four rows, and the tables directory of this configuration (paths.outputs/tables)."""
    from distil.pretrain.sra import TeacherAsPretrained, agnostic_student, load_agnostic
    from distil.run.data import load_splits
    from distil.store.artifacts import ArtifactStore

    cfg, data = load_splits(overrides)
    if data.task.inputs != "pair" or cfg.dataset.positive_label is None:
        raise DistilError(f"distil paper wu-table5 scores sentence pairs with a positive class, and dataset "
                          f"'{cfg.dataset.name}' is not one; use dataset=quora (Table 5) or dataset=mrpc")
    positive = data.label_names.index(cfg.dataset.positive_label)
    dev, test = pairs_of(data.splits["dev"], positive), pairs_of(data.splits["test"], positive)
    teacher = TeacherAsPretrained(cfg.teacher, cfg.hub_offline)
    tokenizer, length = teacher.tokenizer, cfg.agnostic.max_length
    teacher_vectors = teacher_encoders(teacher.encoder, tokenizer, length)
    rows = {"teacher (CLS)": teacher_vectors["cls"], "teacher (averaged)": teacher_vectors["mean"]}
    transfer = data.splits["transfer"]
    rows["BiLSTM_KD (cosine)"] = fit_pair_cosine(teacher.student(cfg.student, cfg.agnostic.seed),
                                                 rows["teacher (CLS)"], tokenizer, list(transfer["text"]),
                                                 list(transfer["text_pair"]), length)
    artifact = agnostic_student(cfg.agnostic, cfg.teacher, cfg.student, cfg.hub_offline,
                                ArtifactStore(cfg.paths.cache), cfg.paths.data_dir, teacher)
    sra = teacher.student(cfg.student, cfg.agnostic.seed)
    sra.load_state_dict(load_agnostic(artifact.path), strict=False)  # the classifier is not used here
    rows["BiLSTM_SRA"] = student_encoder(sra, tokenizer, length)
    records = []
    for name, encode in rows.items():
        log.info("%s: threshold on dev (%d pairs), scored on test (%d pairs)", name, len(dev[2]), len(test[2]))
        records.append({"model": name, **evaluate(encode, dev, test)})
    return pd.DataFrame(records), Path(cfg.paths.outputs) / "tables"


def write_table(overrides: list[str], out_dir: Path | None = None) -> None:
    """`distil paper wu-table5` (distil/cli/paper.py parses the arguments): the four rows, printed and
    written to out_dir (default <paths.outputs>/tables) as untuned.{md,csv}."""
    overrides = ["dataset=quora", "student=sra", *overrides]
    frame, out = run(overrides)
    out = out_dir or out
    out.mkdir(parents=True, exist_ok=True)
    text = to_markdown(frame, index=False, floatfmt=".4f")
    write_atomic(out / "untuned.csv", frame.to_csv(index=False))
    write_atomic(out / "untuned.md", f"# Untuned sentence representations (Wu et al. Table 5)\n\n"
                                     f"overrides: {' '.join(overrides)}\n\n{text}\n")
    Console().print(f"{text}\nwrote {out}/untuned.{{md,csv}}")
