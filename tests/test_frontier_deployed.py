"""Frontier tables: each student's deployed forms (its ONNX export and int8 copy) timed in the same
interleaved run as the eager students, scored on the test split, and shown as rows beside them."""

from __future__ import annotations

import json
import os

import pytest

from distil.serve.onnx_session import ONNX_FILES
from distil.tables.preset import Axis, Cell, Scale, TablePreset
from distil.tables.render import number_text, scatter_entries, write_table
from tests.test_student_timing import timed_table
from tests.test_tables_render import md_rows

COLUMNS = [Axis("accuracy", value="student.test.accuracy", format="percent"),
           Axis("dev", value="student.dev.accuracy", format="percent"),
           Axis("params", value="student.params", format="count"),
           Axis("disk MB", value="timing.disk_mb", format="number"),
           Axis("ms per text", value="timing.single_ms", format="number"),
           Axis("model ms per text", value="timing.model_single_ms", format="number")]


def deployed(accuracy: float, disk: float, single: float, model_single: float) -> dict:
    return {"test": {"accuracy": accuracy}, "disk_mb": disk, "single_ms": single, "model_single_ms": model_single}


def frontier_preset(rows: list[Axis]) -> TablePreset:
    return TablePreset(name="frontier", paper="p", table="T", title="t", scales={"cpu": Scale(seeds=[1])},
                       rows=rows, columns=COLUMNS,
                       plot={"kind": "scatter", "x": "timing.single_ms", "y": "student.test.accuracy"})


def test_deployed_rows_read_the_timing_of_their_form_and_a_peer_shows_none(tmp_path):
    """`reads: onnx | int8`: timing.<f> -> timing.<form>.<f>, student.test.<m> -> timing.<form>.test.<m>;
    the size is the student's, a dev score is not measured (–); a peer (null forms) shows –, never a
    zero; a timing from before the deployed forms were timed is 'not timed yet'."""
    rows = [Axis("bilstm", ["student=bilstm"]), Axis("bilstm, ONNX", ["student=bilstm"], reads="onnx"),
            Axis("bilstm, ONNX int8", ["student=bilstm"], reads="int8"),
            Axis("peer", ["student=peer-tfidf"]), Axis("peer, ONNX", ["student=peer-tfidf"], reads="onnx"),
            Axis("old", ["student=tang"]), Axis("old, ONNX", ["student=tang"], reads="onnx")]
    preset = frontier_preset(rows)
    bilstm = {"status": "ok", "student": {"test": {"accuracy": 0.80}, "dev": {"accuracy": 0.79}, "params": 1000},
              "timing": {"disk_mb": 4.0, "single_ms": 2.0, "model_single_ms": 1.5,
                         "onnx": deployed(0.80, 3.5, 1.0, 0.5), "int8": deployed(0.795, 1.0, 0.8, 0.3)}}
    peer = {"status": "ok", "student": {"test": {"accuracy": 0.70}, "dev": {"accuracy": 0.69}, "params": 10},
            "timing": {"disk_mb": 1.0, "single_ms": 0.2, "model_single_ms": 0.1, "onnx": None, "int8": None}}
    old = {"status": "ok", "student": {"test": {"accuracy": 0.60}, "dev": {"accuracy": 0.6}, "params": 7},
           "timing": {"disk_mb": 2.0, "single_ms": 3.0, "model_single_ms": 2.0}}
    runs = {"bilstm": bilstm, "peer": peer, "old": old}
    cells = [Cell(row=row.label, column=column.label, seed=1, overrides=[], key=row.label.split(",")[0],
                  metrics=runs[row.label.split(",")[0]]) for row in rows for column in COLUMNS]
    shown = md_rows(write_table(preset, cells, tmp_path)[0])
    assert shown == [
        ["", "accuracy", "dev", "params", "disk MB", "ms per text", "model ms per text"],
        ["bilstm", "80.00", "79.00", "1,000", "4.00", "2.00", "1.50"],
        ["bilstm, ONNX", "80.00", "–", "1,000", "3.50", "1.00", "0.500"],
        ["bilstm, ONNX int8", "79.50", "–", "1,000", "1.00", "0.800", "0.300"],
        ["peer", "70.00", "69.00", "10", "1.00", "0.200", "0.100"],
        ["peer, ONNX", "–", "–", "–", "–", "–", "–"],
        ["old", "60.00", "60.00", "7", "2.00", "3.00", "2.00"],
        ["old, ONNX", *["not timed yet"] * 6]]
    # the plot draws each deployed form at its own latency and score; the peer's and the old timing's none
    xs, ys = scatter_entries(preset, cells)
    points = {row: (xs[(row, column)].mean, ys[(row, column)].mean) for row, column in xs}
    assert points == {"bilstm": (2.0, 80.0), "bilstm, ONNX": (1.0, 80.0), "bilstm, ONNX int8": (0.8, 79.5),
                      "peer": (0.2, 70.0), "old": (3.0, 60.0)}


@pytest.mark.parametrize("name,task_name", [("transformer-base", "classification"), ("sra", "pair")])
@pytest.mark.heavy
def test_int8_quantises_a_transformer_and_an_sra_student(name, task_name, tmp_path):
    """ONNX Runtime's symbolic shape inference stopped short on these graphs (a length capped by
    max_length); every frontier table has Transformer students, each quantised by the timing."""
    from transformers import BertTokenizer

    from distil.serve.export import export_onnx, quantise_int8
    from distil.serve.onnx_session import OnnxLogits
    from distil.teacher.load import TINY_VOCAB
    from tests.test_export import TEXTS, saved_student

    tokenizer = BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})
    student = saved_student(tmp_path, tokenizer, name, task_name)
    fp32, int8 = tmp_path / ONNX_FILES["onnx"], tmp_path / ONNX_FILES["onnx-int8"]
    export_onnx(student, fp32)
    quantise_int8(fp32, int8)
    texts = [f"{a} ||| {b}" for a, b in zip(TEXTS, TEXTS[::-1], strict=True)] if task_name == "pair" else TEXTS
    inputs = student.encode_batch(texts, one_request=False)
    logits = OnnxLogits(fp32)(inputs)["logits"], OnnxLogits(int8)(inputs)["logits"]
    assert int8.stat().st_size < fp32.stat().st_size / 2
    assert logits[1].shape == logits[0].shape and abs(logits[1] - logits[0]).max() < 0.1


@pytest.mark.slow  # a timed table end to end (~16 s); the deployed rows' rendering has its unit test below
def test_a_timed_table_exports_times_and_scores_each_student_as_deployed(tmp_path, monkeypatch, capsys):
    """A smoke BiLSTM and a TF-IDF peer, timed: the BiLSTM's folder gets model.onnx and model.int8.onnx,
    its timing.json their rates, latencies, test scores (fp32's the run's own) and disk sizes; the peer
    records none; the table shows the deployed rows, and the peer's shows –."""
    code, out, err = timed_table(tmp_path, monkeypatch, capsys,
                                 "rows: [{label: bilstm, overrides: [student=bilstm]},\n"
                                 "       {label: 'bilstm, ONNX', overrides: [student=bilstm], reads: onnx},\n"
                                 "       {label: 'bilstm, ONNX int8', overrides: [student=bilstm], reads: int8},\n"
                                 "       {label: tfidf, overrides: [student=peer-tfidf]},\n"
                                 "       {label: 'tfidf, ONNX', overrides: [student=peer-tfidf], reads: onnx}]\n"
                                 "columns: [{label: accuracy, value: student.test.accuracy},\n"
                                 "          {label: disk MB, value: timing.disk_mb, format: number},\n"
                                 "          {label: ex/s batch 32, value: timing.batch32_ex_per_s, format: count},\n"
                                 "          {label: model ms per text, value: timing.model_single_ms, "
                                 "format: number}]\n")
    assert code == 0, err
    cells = {json.loads((p / "metrics.json").read_text())["choices"]["student"]: p
             for p in (tmp_path / "outputs" / "cells").iterdir() if (p / "timing.json").is_file()}
    assert sorted(cells) == ["bilstm", "peer-tfidf"]
    timing = json.loads((cells["bilstm"] / "timing.json").read_text())
    metrics = json.loads((cells["bilstm"] / "metrics.json").read_text())
    folder = cells["bilstm"] / "student"
    for form, backend in (("onnx", "onnx"), ("int8", "onnx-int8")):
        record = timing[form]
        assert min(record[field] for field in ("batch32_ex_per_s", "model_batch32_ex_per_s", "single_ms",
                                               "model_single_ms", "speedup", "single_speedup")) > 0
        assert len(record["seconds"]["single_ms"]) == len(timing["seconds"]["single_ms"])  # the same passes
        assert record["disk_mb"] == pytest.approx(((folder / ONNX_FILES[backend]).stat().st_size
                                                   + (folder / "vocab.json").stat().st_size) / 1e6)
        assert 0 <= record["test"]["accuracy"] <= 1
    assert timing["onnx"]["test"]["accuracy"] == pytest.approx(metrics["student"]["test"]["accuracy"], abs=1e-9)
    peer = json.loads((cells["peer-tfidf"] / "timing.json").read_text())
    assert peer["onnx"] is None and peer["int8"] is None and peer["batch32_ex_per_s"] > 0

    rows = {row[0]: row[1:] for row in md_rows(tmp_path / "outputs" / "tables" / "frontier.md")[1:]}
    assert rows["bilstm, ONNX"][0] == rows["bilstm"][0] == f"{100 * metrics['student']['test']['accuracy']:.2f}"
    assert rows["bilstm, ONNX"][1] == number_text(timing["onnx"]["disk_mb"], "number") != rows["bilstm"][1]
    assert rows["bilstm, ONNX int8"][3] == number_text(timing["int8"]["model_single_ms"], "number")
    assert rows["tfidf, ONNX"] == ["–"] * 4 and rows["tfidf"][0] != "–"


@pytest.mark.slow  # two exports of a trained smoke student (~6 s)
def test_a_student_is_exported_once_and_again_when_its_cell_runs_again(tmp_path):
    """The timing writes model.onnx and model.int8.onnx once, into the student folder; a later timing (the
    serving code moved on) reuses them, unless the weights are newer than the graph (the cell ran again)."""
    from transformers import BertTokenizer

    from distil.tables.timing import exported
    from distil.teacher.load import TINY_VOCAB
    from tests.test_export import saved_student

    student = saved_student(tmp_path, BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)}),
                            "bilstm", "classification")
    files = {"onnx": tmp_path / ONNX_FILES["onnx"], "int8": tmp_path / ONNX_FILES["onnx-int8"]}
    assert exported(student, tmp_path) == files
    written = {path: path.stat().st_mtime_ns for path in files.values()}
    assert exported(student, tmp_path) == files
    assert {path: path.stat().st_mtime_ns for path in files.values()} == written
    weights = tmp_path / "model.safetensors"
    os.utime(weights, ns=(weights.stat().st_atime_ns, max(written.values()) + 1))
    exported(student, tmp_path)
    assert all(path.stat().st_mtime_ns > written[path] for path in written)


def test_the_frontier_targets_count_each_deployed_form_as_a_runner_student():
    """A deployed row (reads: onnx | int8) is a student a user ships: the frontier target takes it among the
    runner students at its own accuracy and latency, and the speed targets take the static student in each
    of its forms against the BiLSTM served the same way; the targets name the row behind each number."""
    from distil.tables.frontier_targets import BILSTM, MODEL2VEC, STATIC, targets
    from tests.test_student_timing import frontier_run

    def run(accuracy, single_ms, batch, single, **forms):
        metrics = frontier_run(accuracy, single_ms, batch, single)
        for form, measured in forms.items():  # None: a peer's, no graph to export
            a, ms, b, s = measured or (None,) * 4
            metrics["timing"][form] = measured and {"test": {"accuracy": a}, "single_ms": ms,
                                                    "seconds": {"batch32_ex_per_s": b, "single_ms": s}}
        return metrics

    # the eager BiLSTM is as accurate as model2vec's pipeline but 3x slower; its int8 copy is faster and
    # as accurate. The static student is 10x the BiLSTM in batches eagerly, 25x as ONNX against ONNX
    runs = {STATIC: run(0.80, 0.5, [0.1], [0.2], onnx=(0.80, 0.6, [0.04], [0.3]), int8=(0.79, 0.4, [0.05], [0.1])),
            BILSTM: run(0.86, 3.0, [1.0], [2.0], onnx=(0.86, 2.0, [1.0], [1.0]), int8=(0.855, 0.9, [0.5], [0.6])),
            MODEL2VEC: run(0.85, 1.0, [0.1], [0.1], onnx=None, int8=None)}
    reads = {}
    cells = [Cell(row=row, column=None, seed=1, overrides=[], key=row, metrics=metrics)
             for row, metrics in runs.items()]
    for row in (STATIC, BILSTM, MODEL2VEC):
        for form, suffix in (("onnx", "ONNX"), ("int8", "ONNX int8")):
            reads[f"{row}, {suffix}"] = form
            cells.append(Cell(row=f"{row}, {suffix}", column=None, seed=1, overrides=[], key=row, metrics=runs[row]))
    eager = [cell for cell in cells if cell.row not in reads]
    assert targets(eager)[-1].met is False  # the trained students alone: nothing as fast is as accurate

    accuracy, batch, single, model2vec, frontier = targets(cells, reads=reads)
    assert (accuracy.ours, accuracy.rows) == (pytest.approx(80.0), STATIC)  # the trained student's, chosen on dev
    assert (batch.ours, batch.met) == (pytest.approx(25.0), True)  # 1.0 / 0.04, ONNX against ONNX
    assert batch.rows == f"{STATIC}, ONNX against {BILSTM}, ONNX"
    assert (single.ours, single.met) == (pytest.approx(10.0), False)  # eager 2.0/0.2, int8 0.6/0.1 = 6, ONNX 1/0.3
    assert single.rows == f"{STATIC} against {BILSTM}"
    # model2vec is served one way (its deployed rows are null): each static form against its pipeline,
    # the ONNX one 0.1 / 0.04 = 2.5
    assert (model2vec.ours, model2vec.rows) == (pytest.approx(2.5), f"{STATIC}, ONNX against {MODEL2VEC}")
    assert frontier.met is True and frontier.spread == "every peer matched"
    assert frontier.rows == f"{MODEL2VEC}: {BILSTM}, ONNX int8"
    # a deployed form with no timing of its own (a timing from before the forms were timed) is not timed
    for form in ("onnx", "int8"):
        del runs[BILSTM]["timing"][form]
    assert targets(cells, reads=reads)[-1].met is False
