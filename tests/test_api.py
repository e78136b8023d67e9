"""The Python API of a saved student (distil.serve.api), `distil predict --jsonl`, the model card and a
schedule=d0 run's students routed by language, on smoke runs made once per module."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from distil.errors import DistilError
from distil.serve.api import PROGRESS_FROM, RoutedStudent, Student
from distil.serve.student import SavedStudent
from distil.students.vocab import TrimmedVocab
from tests.conftest import compose_config, task_data_of


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """run(*overrides) -> the run directory of `distil debug=smoke *overrides`, each made once; the runs
    share one cache, so a dataset's teacher is fine-tuned once."""
    root, runs = tmp_path_factory.mktemp("api"), {}

    def run(*overrides: str) -> Path:
        if overrides not in runs:
            from distil.cli import main as cli

            run_dir = root / f"run{len(runs)}"
            with pytest.MonkeyPatch.context() as patch:
                patch.chdir(root)
                patch.delenv("DISTIL_OUTPUTS", raising=False)
                patch.setattr(sys, "argv", ["distil", "debug=smoke", *overrides, f"hydra.run.dir={run_dir}"])
                cli.main()
            runs[overrides] = run_dir
        return runs[overrides]

    return run


def held_out(*overrides: str, column: str = "text") -> list:
    """The run's test split as a user gives it: texts, (first, second) pairs, or tagged sentences."""
    cfg = compose_config("debug=smoke", *overrides)
    test = task_data_of(cfg.dataset, cfg.transfer_size, cfg.paths.data_dir, cfg.seed).splits["test"]
    if column == "tokens":
        return [" ".join(words) for words in test["tokens"]]
    if column == "pair":
        return list(zip(test["text"], test["text_pair"], strict=True))
    return list(test["text"])


def test_predict_in_batches_gives_what_one_text_at_a_time_gives(smoke_run):
    run_dir = smoke_run()
    student = Student.load(run_dir)
    texts = held_out()
    assert len(texts) > 5 and student.labels == ["food", "sports", "tech"] and student.task == "classification"
    one_by_one = [SavedStudent(run_dir / "student").predict(text).split("\t")[0] for text in texts]
    assert student.predict(texts, batch_size=5) == one_by_one  # a list longer than a batch, in its order
    assert student.predict(texts) == one_by_one
    assert Student.load(run_dir / "student").predict(texts[:3]) == one_by_one[:3]  # the folder itself
    assert student.predict(texts[0]) == one_by_one[:1]  # a lone string is one text, not its characters
    many = texts * (PROGRESS_FROM // len(texts) + 1)  # enough for the progress bar
    assert student.predict(many, batch_size=256) == one_by_one * (PROGRESS_FROM // len(texts) + 1)
    probabilities = np.stack(student.predict_proba(texts, batch_size=5))
    assert probabilities.shape == (len(texts), 3)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1, rtol=1e-5)
    assert [student.labels[i] for i in probabilities.argmax(axis=1)] == one_by_one


def test_bad_texts_are_one_line_errors(smoke_run):
    student = Student.load(smoke_run())
    with pytest.raises(DistilError, match="text 2 is empty; give a non-empty text to label"):
        student.predict(["soup", "  "])
    with pytest.raises(DistilError, match=r"text 1 is a 2-tuple, but this student reads single texts"):
        student.predict([("soup", "bread")])
    with pytest.raises(DistilError, match="batch_size 0 must be at least 1"):
        student.predict(["soup"], batch_size=0)
    with pytest.raises(DistilError, match="backend 'tensorflow'"):
        Student.load(smoke_run(), backend="tensorflow")
    with pytest.raises(DistilError, match="is one student for every language"):
        Student.load(smoke_run(), language="aa")


def test_encode_gives_the_representation_a_schedule_trained(smoke_run):
    message = ("student 'bilstm' has no representation to encode: it was trained without a representation loss; "
               "encode() needs an SRA student (student=sra) or a schedule that compares hidden states (e.g. "
               "schedule=d4.1)")
    with pytest.raises(DistilError, match=re.escape(message)):
        Student.load(smoke_run()).encode(["soup"])  # schedule d1 compares no hidden states
    student = Student.load(smoke_run("schedule=d4.1"))  # a representation loss: the projection to the teacher
    texts = held_out()
    encoded = student.encode(texts, batch_size=4)
    assert encoded.shape == (len(texts), 32) and np.isfinite(encoded).all()  # the tiny teacher's hidden size
    np.testing.assert_allclose(student.encode(texts[:3]), encoded[:3], rtol=1e-5, atol=1e-6)


def test_pairs_as_tuples_or_separated(smoke_run):
    student = Student.load(smoke_run("dataset=toy-pair", "student=sra"))
    pairs = held_out("dataset=toy-pair", column="pair")
    assert student.inputs == "pair"
    labels = student.predict(pairs, batch_size=3)
    assert labels == student.predict([f"{a} ||| {b}" for a, b in pairs]) and set(labels) <= set(student.labels)
    assert student.encode(pairs[:4]).shape == (4, 2, 32)  # an SRA student: each sentence's vector
    with pytest.raises(DistilError, match="text 1 is not a pair; give \\(first, second\\)"):
        student.predict(["chef soup"])


def test_tagging_gives_a_tag_per_word(smoke_run):
    student = Student.load(smoke_run("dataset=toy-ner", "student=bilstm-tagger"))
    sentences = held_out("dataset=toy-ner", column="tokens")
    long = " ".join(["anna"] * 40)  # the tiny teacher reads characters: cut at 64 wordpieces
    tags = student.predict([*sentences, long], batch_size=4)
    assert [len(t) for t in tags] == [len(s.split()) for s in [*sentences, long]]
    assert {tag for sentence in tags for tag in sentence} <= set(student.labels) - {"X"}
    probabilities = student.predict_proba([sentences[0], long])
    assert probabilities[0].shape == (len(sentences[0].split()), len(student.labels))
    np.testing.assert_allclose(probabilities[0].sum(axis=1), 1, rtol=1e-5)
    cut = np.isnan(probabilities[1]).all(axis=1)
    assert 0 < cut.sum() < 40 and not np.isnan(probabilities[1][~cut]).any()  # the words past the cut read nothing
    assert all(tag == "O" for tag, gone in zip(tags[-1], cut, strict=True) if gone)  # and count as 'O', as scores do


def test_regression_predicts_scores_and_no_probabilities(smoke_run):
    student = Student.load(smoke_run("dataset=toy-sts"))
    scores = student.predict(held_out("dataset=toy-sts", column="pair")[:5])
    assert len(scores) == 5 and all(isinstance(score, float) for score in scores)
    message = "this student predicts a regression score, not class probabilities; use predict()"
    with pytest.raises(DistilError, match=re.escape(message)):
        student.predict_proba(["a cat ||| a dog"])


def test_the_card_says_where_the_student_came_from(smoke_run, tmp_path, capsys):
    run_dir = smoke_run()
    metrics = json.loads((run_dir / "metrics.json").read_text())
    card = (run_dir / "student" / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: distil\n") and "pipeline_tag: text-classification" in card
    fingerprint = metrics["artifacts"]["transfer_fingerprint"]
    assert len(fingerprint) == 64
    for pinned in ["# bilstm distilled from tiny on toy", "- task: classification; input: one text",
                   "- labels: `food`, `sports`, `tech`", "| teacher | `tiny` (from `random`) |",
                   f"| fine-tuned teacher (artifact key) | `teachers/{metrics['artifacts']['teacher']}` |",
                   f"| teacher targets (cache key) | `targets/{metrics['artifacts']['targets']}` |",
                   f"| transfer set | 36 examples, fingerprint `sha256:{fingerprint}` |",
                   "| schedule | `d1` (S1: ce + logit_mse on labeled + transfer) |", "| seed | 1 |",
                   f"| test | accuracy | {100 * metrics['student']['test']['accuracy']:.2f} | "
                   f"{100 * metrics['teacher']['test']['accuracy']:.2f} | 33.33 |",
                   f"| parameters (deployed) | {metrics['student']['params']:,} (",
                   "`model.safetensors` 0.",
                   "| ONNX fp32, `backend=\"onnx\"` | not in the folder | not measured | not measured | not measured | "
                   "nothing yet |",
                   "## Reproduce\n\n```bash\ndistil debug=smoke\n```",
                   "huggingface_hub.upload_folder", "uploading was not tested"]:
        assert pinned in card, pinned
    # what the record lacks is said to be unrecorded, and `distil card` renders it again
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    shutil.rmtree(copy / ".hydra")
    del metrics["artifacts"]["transfer_fingerprint"]
    (copy / "metrics.json").write_text(json.dumps(metrics))
    from distil.cli.card import main as card_command

    assert card_command([str(copy)]) == 0 and f"wrote {copy / 'student' / 'README.md'}" in capsys.readouterr().out
    again = (copy / "student" / "README.md").read_text()
    assert "| teacher | `tiny` (its source: not recorded) |" in again
    assert "fingerprint not recorded" in again and "from the run's metrics.json." in again


def test_a_d0_run_serves_each_language(smoke_run):
    run_dir = smoke_run("dataset=toy-ner", "student=bilstm-tagger", "schedule=d0")
    routing = json.loads((run_dir / "students.json").read_text())
    assert routing["languages"] == {"aa": "student-aa", "bb": "student-bb"}
    assert {path.relative_to(run_dir).as_posix() for path in run_dir.rglob("README.md")} == \
        {"README.md", "student-aa/README.md", "student-bb/README.md"}
    assert "| test | f1 |" in (run_dir / "student-bb" / "README.md").read_text()
    sentences = held_out("dataset=toy-ner", column="tokens")
    bb = Student.load(run_dir, language="bb")
    assert bb.language == "bb" and bb.predict(sentences) == Student.load(run_dir / "student-bb").predict(sentences)
    with pytest.raises(DistilError, match="no student for language 'cc'; this run has: aa, bb"):
        Student.load(run_dir, language="cc")
    # the tiny teacher's wordpieces are characters: both languages' students know them all
    with pytest.raises(DistilError, match="share one vocabulary, so a text's language cannot be told"):
        Student.load(run_dir)


def test_routing_picks_the_student_whose_vocabulary_knows_the_text(smoke_run):
    run_dir = smoke_run("dataset=toy-ner", "student=bilstm-tagger", "schedule=d0")
    students = {language: Student.load(run_dir, language=language) for language in ("aa", "bb")}
    tokenizer = students["aa"].saved.tokenizer
    # aa's student knows only the characters of "anna", bb's only those of "oslo" (the rest read as [UNK])
    for language, word in (("aa", "anna"), ("bb", "oslo")):
        known = {i for i in tokenizer(word)["input_ids"]}
        students[language].saved.vocab = TrimmedVocab(sorted(known))
    routed = RoutedStudent(students)
    texts = ["anna anna", "oslo", "anna met oslo oslo"]
    assert routed.route(texts) == ["aa", "bb", "bb"]
    predictions = routed.predictions(texts)
    assert [p.language for p in predictions] == ["aa", "bb", "bb"]
    assert [p.label for p in predictions] == routed.predict(texts)
    assert [len(tags) for tags in routed.predict(texts)] == [2, 1, 4]


def test_predict_jsonl_writes_text_label_and_probabilities(smoke_run, tmp_path, capsys):
    from distil.cli.predict import main as predict

    run_dir = smoke_run()
    texts = held_out()
    file = tmp_path / "texts.txt"
    file.write_text("\n".join(texts) + "\n")
    assert predict([str(run_dir), "--file", str(file), "--jsonl", "--batch-size", "4"]) == 0
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in out.splitlines()]
    assert [r["text"] for r in records] == texts
    assert [r["label"] for r in records] == Student.load(run_dir).predict(texts)
    for record in records:
        assert list(record["probabilities"]) == ["food", "sports", "tech"]
        assert sum(record["probabilities"].values()) == pytest.approx(1, rel=1e-5)
        assert max(record["probabilities"], key=record["probabilities"].get) == record["label"]
    assert f"{len(texts)} texts in " in err and "texts/s (torch, batch 4)" in err


def test_predict_reads_tab_separated_pairs_and_routes_d0(smoke_run, tmp_path, capsys):
    from distil.cli.predict import main as predict

    pairs = held_out("dataset=toy-pair", column="pair")[:3]
    file = tmp_path / "pairs.txt"
    file.write_text("".join(f"{a}\t{b}\n" for a, b in pairs))
    run_dir = smoke_run("dataset=toy-pair", "student=sra")
    assert predict([str(run_dir), f"file={file}", "batch_size=2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    expected = Student.load(run_dir).predict(pairs)
    assert [line.split("\t")[0] for line in lines] == expected
    assert [line.split("\t")[-1] for line in lines] == [f"{a} ||| {b}" for a, b in pairs]
    d0 = smoke_run("dataset=toy-ner", "student=bilstm-tagger", "schedule=d0")
    assert predict([str(d0), "--jsonl", "anna visited acme", "--language", "aa"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["language"] == "aa" and len(record["label"]) == 3 and len(record["probabilities"]) == 3


def test_import_distil_is_cheap():
    """`import distil` loads no torch (`distil.Student` imports the API on first use: every other test here)."""
    code = "import sys, distil; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


PREDICT_ERRORS = [  # (id, the run's overrides, arguments after the run directory, the message; <dir>: the run's)
    ("half-a-pair", ("dataset=toy-pair", "student=sra"), ["chef soup"],
     "text 1 is not a pair; this student reads sentence pairs: give 'first ||| second'"),
    ("unknown-language", ("dataset=toy-ner", "student=bilstm-tagger", "schedule=d0"), ["anna", "--language", "cc"],
     "no student for language 'cc'; this run has: aa, bb"),
    ("language-of-one-student", (), ["soup", "--language", "aa"],
     "language 'aa' was given but <dir>/student is one student for every language (a student per language is what "
     "schedule=d0 saves on a dataset of several languages); drop --language (language= in Python)"),
    ("languages-alike", ("dataset=toy-ner", "student=bilstm-tagger", "schedule=d0"), ["anna"],
     "the students of languages aa, bb share one vocabulary, so a text's language cannot be told from its tokens; "
     "name one with --language (language= in Python)"),
    ("batch-size", (), ["soup", "--batch-size", "0"], "--batch-size 0 must be at least 1"),
]


@pytest.mark.parametrize("overrides,args,message", [case[1:] for case in PREDICT_ERRORS],
                         ids=[case[0] for case in PREDICT_ERRORS])
def test_predict_errors_are_one_line(smoke_run, capsys, overrides, args, message):
    from distil.cli.predict import main as predict

    run_dir = smoke_run(*overrides)
    with pytest.raises(SystemExit) as exit_:
        predict([str(run_dir), *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1] == f"distil predict: error: {message.replace('<dir>', str(run_dir))}"


def test_a_card_needs_a_finished_run(tmp_path, capsys):
    from distil.cli.card import main as card

    (tmp_path / "metrics.json").write_text(json.dumps({"status": "failed: interrupted"}))
    for directory, message in [(tmp_path / "none", "<dir> has no metrics.json; pass the directory of a finished run"),
                               (tmp_path, "<dir> did not finish (status: failed: interrupted); its student has no "
                                          "card")]:
        with pytest.raises(SystemExit):
            card([str(directory)])
        assert capsys.readouterr().err.strip() == f"distil card: error: {message.replace('<dir>', str(directory))}"


def test_a_sentence_to_tag_may_be_its_words(smoke_run):
    student = Student.load(smoke_run("dataset=toy-ner", "student=bilstm-tagger"))
    assert student.predict([["anna", "visited", "acme"]]) == student.predict(["anna visited acme"])


@pytest.mark.parametrize("overrides,column", [((), "text"), (("dataset=toy-ner", "student=bilstm-tagger"), "tokens"),
                                              (("student=static",), "text")], ids=["bilstm", "tagger", "static"])
@pytest.mark.heavy
def test_every_backend_predicts_the_same_on_the_test_split(smoke_run, capsys, overrides, column):
    """torch, the ONNX export and its int8 copy: the same labels (tags) on the run's whole test split."""
    pytest.importorskip("onnxruntime")
    from distil.cli.export import main as export

    run_dir = smoke_run(*overrides)
    message = (f"{run_dir / 'student'} has no model.int8.onnx (backend onnx-int8); run `distil export RUN_DIR "
               f"--int8` first")
    with pytest.raises(DistilError, match=re.escape(message)):
        Student.load(run_dir, backend="onnx-int8")
    assert export([str(run_dir), "--int8"]) == 0
    capsys.readouterr()
    texts = held_out(*overrides, column=column)
    served = {backend: Student.load(run_dir, backend=backend) for backend in ("torch", "onnx", "onnx-int8")}
    labels = {backend: student.predict(texts, batch_size=5) for backend, student in served.items()}
    assert labels["onnx"] == labels["torch"] and labels["onnx-int8"] == labels["torch"]
    assert served["onnx"].predict(texts[:1]) == labels["torch"][:1]  # one text: a batch of one, not a fast path
    np.testing.assert_allclose(np.concatenate(served["onnx"].predict_proba(texts)),
                               np.concatenate(served["torch"].predict_proba(texts)), rtol=1e-4, atol=1e-5)
    assert "`model.onnx` " in (run_dir / "student" / "README.md").read_text()  # export renders the card again


def test_the_onnx_export_encodes_as_torch_does(smoke_run, capsys):
    pytest.importorskip("onnxruntime")
    from distil.cli.export import main as export

    run_dir = smoke_run("schedule=d4.1")
    assert export([str(run_dir)]) == 0
    texts = held_out()
    np.testing.assert_allclose(Student.load(run_dir, backend="onnx").encode(texts, batch_size=5),
                               Student.load(run_dir).encode(texts), rtol=1e-4, atol=1e-5)
