"""The model card's size and speed of each served form (distil/serve/card.py): PyTorch, ONNX fp32 and ONNX
int8, each measurement with where it was made, read from the run's metrics.json, a frontier table's
timing.json and the student folder's export.json (what `distil export` measured); never guessed."""

from __future__ import annotations

import json
from pathlib import Path

from distil.serve.card import write_cards

METRICS = {"status": "ok", "task": "classification", "metric": "accuracy", "metrics": ["accuracy"],
           "choices": {"student": "bilstm", "teacher": "tiny", "dataset": "toy", "schedule": "d1", "seed": 1},
           "student": {"test": {"accuracy": 0.8}, "params": 1000}, "teacher": {"test": {"accuracy": 0.9}},
           "speed": {"student_ex_per_s": 5000.0, "teacher_ex_per_s": 500.0, "speedup": 10.0, "batch_size": 64},
           "runtime": {"device": "cpu", "name": "cpu", "precision": "fp32"}}
TIMING = {"single_ms": 2.0, "single_speedup": 5.0, "batch32_ex_per_s": 4000.0, "speedup": 8.0,
          "onnx": {"single_ms": 1.0, "single_speedup": 10.0, "batch32_ex_per_s": 6000.0, "speedup": 12.0,
                   "test": {"accuracy": 0.8}},
          "int8": {"single_ms": 0.5, "single_speedup": 20.0, "batch32_ex_per_s": 9000.0, "speedup": 18.0,
                   "test": {"accuracy": 0.795}}}
EXPORT = {"measured_by": "distil export", "metric": "accuracy", "batch_size": 32,
          "eager": {"ex_per_s": 3000.0, "test": {"accuracy": 0.8}},
          "onnx": {"ex_per_s": 5500.0, "test": {"accuracy": 0.8}, "max_logit_difference": 1e-7},
          "int8": {"ex_per_s": 11000.0, "test": {"accuracy": 0.7875}, "max_logit_difference": 0.01}}
SIZES = {"model.safetensors": 2_000_000, "model.onnx": 2_100_000, "model.int8.onnx": 600_000}


def run_dir(root: Path, timing: dict | None = None, export: dict | None = None, files=tuple(SIZES)) -> Path:
    """A finished run's record and its student folder, its weights files of SIZES bytes."""
    student = root / "student"
    student.mkdir(parents=True)
    (root / "metrics.json").write_text(json.dumps(METRICS))
    for name in files:
        (student / name).write_bytes(b"0" * SIZES[name])
    if timing is not None:
        (root / "timing.json").write_text(json.dumps(timing))
    if export is not None:
        (student / "export.json").write_text(json.dumps(export))
    return root


def forms_rows(card: str) -> list[str]:
    lines = card.splitlines()
    start = lines.index("| served as | file | one text | throughput | test accuracy | measured by |")
    return lines[start + 2:lines.index("", start)]


RUN_ROW = ("| PyTorch (eager), `backend=\"torch\"` | `model.safetensors` 2.00 MB | not measured | 5,000 examples/s, "
           "teacher 500 (10.0x), in batches of 64 on cpu, model time only | 80.00 | "
           "the run (metrics.json) |")


def test_the_card_lists_each_served_form_with_where_it_was_measured(tmp_path):
    """The frontier's timing (each form end to end, against the teacher) and distil export (model time,
    its own test score) each give a row per form; the trained student's test score is the run's."""
    (card,) = write_cards(run_dir(tmp_path, TIMING, EXPORT))
    frontier, export = "the frontier's interleaved timing (timing.json)", "distil export (export.json)"
    assert forms_rows(card.read_text()) == [
        RUN_ROW,
        f"| PyTorch (eager), `backend=\"torch\"` | `model.safetensors` 2.00 MB | 2.000 ms end to end (5.0x the "
        f"teacher's) | 4,000 examples/s end to end, batches of 32 (8.0x the teacher's) | 80.00 (the run's) | "
        f"{frontier} |",
        f"| PyTorch (eager), `backend=\"torch\"` | `model.safetensors` 2.00 MB | not measured | 3,000 examples/s, "
        f"model time only, batches of 32 | 80.00 | {export} |",
        f"| ONNX fp32, `backend=\"onnx\"` | `model.onnx` 2.10 MB | 1.000 ms end to end (10.0x the teacher's) | "
        f"6,000 examples/s end to end, batches of 32 (12.0x the teacher's) | 80.00 | {frontier} |",
        f"| ONNX fp32, `backend=\"onnx\"` | `model.onnx` 2.10 MB | not measured | 5,500 examples/s, model time only, "
        f"batches of 32 | 80.00 | {export} |",
        f"| ONNX int8, `backend=\"onnx-int8\"` | `model.int8.onnx` 0.60 MB | 0.500 ms end to end (20.0x the "
        f"teacher's) | 9,000 examples/s end to end, batches of 32 (18.0x the teacher's) | 79.50 | {frontier} |",
        f"| ONNX int8, `backend=\"onnx-int8\"` | `model.int8.onnx` 0.60 MB | not measured | 11,000 examples/s, "
        f"model time only, batches of 32 | 78.75 | {export} |"]
    assert "from the run's metrics.json, timing.json and the folder's export.json." in card.read_text()


def test_a_form_nothing_measured_says_so(tmp_path):
    """No timing and no export record: the exports' rows are not measured, never the eager numbers copied;
    a peer's timing (null forms) measures none of them either."""
    (card,) = write_cards(run_dir(tmp_path / "bare", files=("model.safetensors",)))
    nothing = "| not measured | not measured | not measured | nothing yet |"
    assert forms_rows(card.read_text()) == [
        RUN_ROW, f"| ONNX fp32, `backend=\"onnx\"` | not in the folder {nothing}",
        f"| ONNX int8, `backend=\"onnx-int8\"` | not in the folder {nothing}"]
    (card,) = write_cards(run_dir(tmp_path / "peer", {**TIMING, "onnx": None, "int8": None}))
    assert forms_rows(card.read_text())[2:] == [f"| ONNX fp32, `backend=\"onnx\"` | `model.onnx` 2.10 MB {nothing}",
                                                f"| ONNX int8, `backend=\"onnx-int8\"` | `model.int8.onnx` 0.60 MB "
                                                f"{nothing}"]
