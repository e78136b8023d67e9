"""Every failure a user can cause ends in one line with the fix (docs/errors.md lists them, with these tests)."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tests.test_cli import cache_files, distil_in_process

REPO = Path(__file__).resolve().parent.parent


def one_line_error(args, tmp_path, monkeypatch, capsys, code=2):
    """Run `distil debug=smoke ARGS` in-process; the last stderr line, checked to be the only error output."""
    exit_code, _, err = distil_in_process(["debug=smoke", *args], tmp_path, monkeypatch, capsys)
    assert "Traceback" not in err
    assert exit_code == code, err
    return err.strip().splitlines()[-1]


def run_metrics(tmp_path) -> dict:
    (path,) = (tmp_path / "outputs").rglob("metrics.json")
    return json.loads(path.read_text())


RANGE_CASES = [
    ("trainer.batch_size=0", "trainer.batch_size=0 is out of range (allowed: >= 1); set trainer.batch_size to a value >= 1 or null"),
    ("schedule.batch_size=-5", "schedule.batch_size=-5 is out of range (allowed: >= 1); set schedule.batch_size to a value >= 1 or null"),
    ("student.batch_size=0", "student.batch_size=0 is out of range (allowed: >= 1); set student.batch_size to a value >= 1 or null"),
    ("trainer.eval_batch_size=0", "trainer.eval_batch_size=0 is out of range (allowed: >= 1); set trainer.eval_batch_size to a value >= 1"),
    ("teacher.eval_batch_size=0", "teacher.eval_batch_size=0 is out of range (allowed: >= 1); set teacher.eval_batch_size to a value >= 1"),
    ("student.hidden_size=0", "student.hidden_size=0 is out of range (allowed: >= 1); set student.hidden_size to a value >= 1"),
    ("student.embedding_dim=-1", "student.embedding_dim=-1 is out of range (allowed: >= 1); set student.embedding_dim to a value >= 1"),
    ("student.num_layers=0", "student.num_layers=0 is out of range (allowed: >= 1); set student.num_layers to a value >= 1"),
    ("student.mlp_hidden_size=-1", "student.mlp_hidden_size=-1 is out of range (allowed: >= 0); set student.mlp_hidden_size to a value >= 0"),
    ("student.context_window=-1", "student.context_window=-1 is out of range (allowed: >= 0); set student.context_window to a value >= 0"),
    ("student.sif_coefficient=1", "student.sif_coefficient=1.0 is out of range (allowed: in (0, 1)); set student.sif_coefficient to a value in (0, 1) or null"),
    ("trainer.lr=-1", "trainer.lr=-1.0 is out of range (allowed: > 0); set trainer.lr to a value > 0"),
    ("trainer.lr=0", "trainer.lr=0.0 is out of range (allowed: > 0); set trainer.lr to a value > 0"),
    ("trainer.lr_min=-0.1", "trainer.lr_min=-0.1 is out of range (allowed: >= 0); set trainer.lr_min to a value >= 0"),
    ("trainer.rho=1.5", "trainer.rho=1.5 is out of range (allowed: in [0, 1]); set trainer.rho to a value in [0, 1]"),
    ("trainer.epochs=0", "trainer.epochs=0 is out of range (allowed: >= 1); set trainer.epochs to a value >= 1"),
    ("trainer.labels_only_epochs=0", "trainer.labels_only_epochs=0 is out of range (allowed: >= 1); set trainer.labels_only_epochs to a value >= 1"),
    ("trainer.patience=0", "trainer.patience=0 is out of range (allowed: >= 1); set trainer.patience to a value >= 1"),
    ("trainer.grad_clip=-1", "trainer.grad_clip=-1.0 is out of range (allowed: >= 0); set trainer.grad_clip to a value >= 0"),
    ("trainer.threads=0", "trainer.threads=0 is out of range (allowed: in [1, 256]); set trainer.threads to a value in [1, 256]"),
    ("trainer.threads=1000000", "trainer.threads=1000000 is out of range (allowed: in [1, 256]); set trainer.threads to a value in [1, 256]"),
    ("trainer.speed_examples=-1", "trainer.speed_examples=-1 is out of range (allowed: >= 0); set trainer.speed_examples to a value >= 0"),
    ("seed=-1", "seed=-1 is out of range (allowed: >= 0); set seed to a value >= 0"),
    ("dataset.split.seed=-3", "dataset.split.seed=-3 is out of range (allowed: >= 0); set dataset.split.seed to a value >= 0"),
    ("student.dropout=1.5", "student.dropout=1.5 is out of range (allowed: in [0, 1)); set student.dropout to a value in [0, 1)"),
    ("student.recurrent_dropout=1", "student.recurrent_dropout=1.0 is out of range (allowed: in [0, 1)); set student.recurrent_dropout to a value in [0, 1)"),
    ("student.unk_dropout=-0.1", "student.unk_dropout=-0.1 is out of range (allowed: in [0, 1)); set student.unk_dropout to a value in [0, 1)"),
    ("dataset.split.test_fraction=1.5", "dataset.split.test_fraction=1.5 is out of range (allowed: in (0, 1)); set dataset.split.test_fraction to a value in (0, 1)"),
    ("dataset.split.dev_fraction=0", "dataset.split.dev_fraction=0.0 is out of range (allowed: in (0, 1)); set dataset.split.dev_fraction to a value in (0, 1)"),
    ("dataset.split.labeled_per_class=0", "dataset.split.labeled_per_class=0 is out of range (allowed: >= 1); set dataset.split.labeled_per_class to a value >= 1 or null"),
    ("dataset.split.labeled_count=0", "dataset.split.labeled_count=0 is out of range (allowed: >= 1); set dataset.split.labeled_count to a value >= 1 or null"),
    ("dataset.split.max_eval_per_language=0", "dataset.split.max_eval_per_language=0 is out of range (allowed: >= 1); set dataset.split.max_eval_per_language to a value >= 1 or null"),
    ("teacher.max_length=0", "teacher.max_length=0 is out of range (allowed: >= 2); set teacher.max_length to a value >= 2"),
    ("teacher.shard_size=0", "teacher.shard_size=0 is out of range (allowed: >= 1); set teacher.shard_size to a value >= 1"),
    ("teacher.random_init.hidden_size=0", "teacher.random_init.hidden_size=0 is out of range (allowed: >= 1); set teacher.random_init.hidden_size to a value >= 1"),
    ("teacher.finetune.lr=0", "teacher.finetune.lr=0.0 is out of range (allowed: > 0); set teacher.finetune.lr to a value > 0"),
    ("teacher.finetune.epochs=0", "teacher.finetune.epochs=0 is out of range (allowed: >= 1); set teacher.finetune.epochs to a value >= 1"),
    ("teacher.finetune.batch_size=0", "teacher.finetune.batch_size=0 is out of range (allowed: >= 1); set teacher.finetune.batch_size to a value >= 1"),
    ("teacher.finetune.patience=0", "teacher.finetune.patience=0 is out of range (allowed: >= 1); set teacher.finetune.patience to a value >= 1"),
    ("teacher.finetune.warmup_fraction=1", "teacher.finetune.warmup_fraction=1.0 is out of range (allowed: in [0, 1)); set teacher.finetune.warmup_fraction to a value in [0, 1)"),
    ("teacher.finetune.weight_decay=-0.01", "teacher.finetune.weight_decay=-0.01 is out of range (allowed: >= 0); set teacher.finetune.weight_decay to a value >= 0"),
    ("teacher.finetune.min_steps=-1", "teacher.finetune.min_steps=-1 is out of range (allowed: >= 0); set teacher.finetune.min_steps to a value >= 0"),
    ("teacher.finetune.lr_grid=[1e-4,0]", "teacher.finetune.lr_grid=[0.0001, 0.0] is out of range (allowed: each > 0); set every value of teacher.finetune.lr_grid > 0 or null"),
    ("schedule.stages.0.temperature=0", "schedule.stages.0.temperature=0.0 is out of range (allowed: > 0); set schedule.stages.0.temperature to a value > 0"),
    ("schedule.stages.0.epochs=0", "schedule.stages.0.epochs=0 is out of range (allowed: >= 1); set schedule.stages.0.epochs to a value >= 1 or null"),
    ("schedule.stages.0.patience=0", "schedule.stages.0.patience=0 is out of range (allowed: >= 1); set schedule.stages.0.patience to a value >= 1 or null"),
    ("transfer_size.count=-5", "transfer_size.count=-5 is out of range (allowed: >= 0); set transfer_size.count to a value >= 0 or null"),
    ("transfer_size.multiple=-1", "transfer_size.multiple=-1.0 is out of range (allowed: >= 0); set transfer_size.multiple to a value >= 0 or null"),
]


@pytest.mark.parametrize("override,message", RANGE_CASES, ids=[case[0] for case in RANGE_CASES])
def test_a_setting_out_of_range_fails_before_any_work(tmp_path, monkeypatch, capsys, override, message):
    assert one_line_error([override], tmp_path, monkeypatch, capsys) == f"distil: error: {message}"
    assert cache_files(tmp_path / "outputs") == []
    assert run_metrics(tmp_path)["status"] == f"failed: {message}"


HYDRA_CASES = [
    ("trainer.lr=abc", "Error merging override trainer.lr=abc; Value 'abc' of type 'str' could not be converted to Float; fix that override (distil --cfg job shows the composed config)"),
    ("seed=1.5", "Error merging override seed=1.5; Value '1.5' of type 'float' could not be converted to Integer; fix that override (distil --cfg job shows the composed config)"),
    ("schedule.stages.0.losses={nope:1}", "Could not override 'schedule.stages.0.losses'; To append to your config use +schedule.stages.0.losses={nope:1}; Key 'nope' is not in struct; fix that override (distil --cfg job shows the composed config)"),
]


@pytest.mark.parametrize("override,message", HYDRA_CASES, ids=[case[0] for case in HYDRA_CASES])
def test_a_value_hydra_cannot_merge_is_one_line(tmp_path, monkeypatch, capsys, override, message):
    assert one_line_error([override], tmp_path, monkeypatch, capsys) == f"distil: error: {message}"
    assert "HYDRA_FULL_ERROR" not in os.environ  # set only while Hydra runs


RELATION_CASES = [
    (["dataset.files={train:train.tsv}", "dataset.split.test_fraction=0.6", "dataset.split.dev_fraction=0.4"],
     "dataset.split.test_fraction + dataset.split.dev_fraction = 1 leaves no training examples; lower them so their sum is below 1"),
    (["teacher.finetune.min_steps=10", "teacher.finetune.max_steps=5"],
     "teacher.finetune.min_steps=10 is above teacher.finetune.max_steps=5; lower min_steps or raise max_steps"),
]


@pytest.mark.parametrize("args,message", RELATION_CASES, ids=["fractions-sum", "min-steps-above-max"])
def test_settings_that_bound_each_other(tmp_path, monkeypatch, capsys, args, message):
    assert one_line_error(args, tmp_path, monkeypatch, capsys) == f"distil: error: {message}"
    assert cache_files(tmp_path / "outputs") == []


def test_no_labeled_examples_left_after_carving_is_an_error(tmp_path, monkeypatch, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "train.tsv").write_text("text\tlabel\nbread soup\tfood\nball game\tsports\nchip cpu\ttech\n")
    args = [f"dataset.path={data}", "dataset.files={train:train.tsv}", "dataset.split.labeled_per_class=null"]
    last = one_line_error(args, tmp_path, monkeypatch, capsys)
    assert last == "distil: error: dataset 'toy': no labeled training examples are left after carving dev and test from train; give a larger train file or lower dataset.split.test_fraction and dev_fraction"


# Data files: (file name, bytes, dataset overrides, message with <file> for the file's path)
BAD_FILES = [
    ("latin1", "train.tsv", b"text\tlabel\nbread soup\tfood\nbad caf\xe9\tsports\n", [],
     "<file> line 3 is not UTF-8 (byte 0xe9); re-save the file as UTF-8, e.g. iconv -f latin1 -t utf-8"),
    ("binary", "train.tsv", b"text\tlabel\n\x00\x01\x02\xff\x00\n", [],
     "<file> is not a text file (a NUL byte on line 2); point dataset.files at a UTF-8 text file"),
    ("ragged-tsv", "train.tsv", b"text\tlabel\nbread soup\tfood\nball\tgame\tsports\n", [],
     "<file> line 3 has 3 columns where line 1 has 2; fix that line (a tab inside a text?)"),
    ("ragged-tsv-short", "train.tsv", b"text\tlabel\nbread soup\tfood\nball game\n", [],
     "<file> line 3 has 1 column where line 1 has 2; fix that line (a tab inside a text?)"),
    ("ragged-csv", "train.csv", b"text,label\nbread soup,food\nball, game,sports\n", ["dataset.format=csv"],
     '<file> line 3 has 3 columns where line 1 has 2; fix that line (quote a field that holds a comma: "like, this")'),
    ("bad-jsonl", "train.jsonl", b'{"text": "bread", "label": "food"}\n{"text": "ball", label\n',
     ["dataset.format=jsonl"],
     "<file> line 2 is not valid JSON (Expecting property name enclosed in double quotes at column 18); fix that line: jsonl holds one JSON object per line"),
    ("jsonl-not-object", "train.jsonl", b'{"text": "bread", "label": "food"}\n["ball", "sports"]\n',
     ["dataset.format=jsonl"],
     '<file> line 2 is not a JSON object; jsonl holds one object per line, e.g. {"text": "...", "label": "..."}'),
    ("jsonl-missing-key", "train.jsonl", b'{"text": "bread", "label": "food"}\n{"text": "ball"}\n',
     ["dataset.format=jsonl"],
     "<file> line 2 has other keys than line 1 (missing: label; extra: none); give every line the same keys"),
    ("empty", "train.tsv", b"", [],
     "<file> has no examples; point dataset.files at a file with at least one example"),
    ("header-only", "train.tsv", b"text\tlabel\n", [],
     "<file> has no examples; point dataset.files at a file with at least one example"),
    ("missing-column", "train.tsv", b"sentence\tlabel\nbread soup\tfood\n", [],
     "train.tsv has no column 'text'; set dataset.text_column to one of: sentence, label"),
]


@pytest.mark.parametrize("name,content,args,message", [case[1:] for case in BAD_FILES],
                         ids=[case[0] for case in BAD_FILES])
def test_a_bad_data_file_is_one_line_naming_file_and_line(tmp_path, monkeypatch, capsys, name, content, args,
                                                          message):
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_bytes(content)
    last = one_line_error([f"dataset.path={data}", f"dataset.files={{train:{name}}}", *args],
                          tmp_path, monkeypatch, capsys)
    expected = message.replace("<file>", str(data / name))
    assert last == f"distil: error: dataset 'toy': {expected}"
    assert cache_files(tmp_path / "outputs") == []


def load_train_csv(tmp_path, content: str, **settings):
    from distil.config.schema import DatasetConfig
    from tests.conftest import raw_splits_of

    (tmp_path / "train.csv").write_text(content)
    cfg = DatasetConfig(name="quoted", format="csv", path=str(tmp_path), files={"train": "train.csv"}, **settings)
    return raw_splits_of(OmegaConf.structured(cfg), "")["train"]


def test_quoted_csv_fields_keep_their_commas(tmp_path):
    """Standard CSV: a quoted field holds commas and quotes (it used to be split into a fake class)."""
    train = load_train_csv(tmp_path, 'text,label\n"bread, soup",food\n"ball, ""game""",sports\nchip,tech\n')
    assert train["text"][:] == ["bread, soup", 'ball, "game"', "chip"]
    assert train["label"][:] == ["food", "sports", "tech"]


def test_headerless_csv_counts_quoted_columns(tmp_path):
    train = load_train_csv(tmp_path, '"bread, soup",food\n"ball, game",sports\n', header=False,
                           text_column="0", label_column="1")
    assert train["text"][:] == ["bread, soup", "ball, game"] and train["label"][:] == ["food", "sports"]


# --- crashes, interrupts, pipes -------------------------------------------------------------------

def raising(error):
    def run(*args, **kwargs):
        raise error
    return run


def test_an_unexpected_exception_is_one_line_with_the_traceback_in_the_log(tmp_path, monkeypatch, capsys):
    from distil.run import pipeline

    monkeypatch.setattr(pipeline, "run", raising(RuntimeError("boom")))
    last = one_line_error([], tmp_path, monkeypatch, capsys, code=1)
    (log,) = (tmp_path / "outputs").rglob("distil.log")
    assert last == f"distil: error: unexpected RuntimeError: boom (traceback in {log}); please report it"
    assert "Traceback (most recent call last)" in log.read_text() and "RuntimeError: boom" in log.read_text()
    assert run_metrics(tmp_path)["status"] == "failed: unexpected RuntimeError: boom"


def test_a_crashing_sweep_cell_is_recorded_and_the_sweep_goes_on(tmp_path, monkeypatch, capsys):
    from distil.run import pipeline

    monkeypatch.setattr(pipeline, "run", raising(ValueError("bad shape")))
    code, _, err = distil_in_process(["-m", "debug=smoke", "seed=1,2"], tmp_path, monkeypatch, capsys)
    assert code == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("distil: error: 2 sweep cell(s) failed")
    statuses = sorted(json.loads(p.read_text())["status"] for p in (tmp_path / "outputs").rglob("metrics.json"))
    assert statuses == ["failed: unexpected ValueError: bad shape"] * 2


INTERRUPTED = "distil: interrupted; rerun the same command to continue (finished teachers and cached targets are reused)"


def send_sigterm(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGTERM)
    raise AssertionError("SIGTERM did not stop the run")


@pytest.mark.parametrize("run,code", [(raising(KeyboardInterrupt()), 130), (send_sigterm, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_is_one_line(tmp_path, monkeypatch, capsys, run, code):
    from distil.run import pipeline

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(pipeline, "run", run)
    assert one_line_error([], tmp_path, monkeypatch, capsys, code=code) == INTERRUPTED
    assert run_metrics(tmp_path)["status"] == "failed: interrupted"
    assert signal.getsignal(signal.SIGTERM) is handler  # restored when main returns


def test_help_piped_to_head_prints_no_traceback(tmp_path):
    distil = Path(sys.executable).with_name("distil")  # this environment's console script
    process = subprocess.Popen([distil, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
    process.stdout.close()  # the reader is gone before distil writes: like `distil --help | head -0`
    err = process.stderr.read().decode()
    assert process.wait(timeout=60) == 141 and err == ""


# --- distil-predict ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def saved_student(tmp_path_factory):
    """One smoke run's student directory (1 epoch), copied and damaged by the tests below."""
    from distil.cli import main as cli

    root = tmp_path_factory.mktemp("predict")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        patch.setattr(sys, "argv", ["distil", "debug=smoke", "trainer.epochs=1", "trainer.speed_examples=0"])
        cli.main()
    return next((root / "outputs" / "runs").rglob("student"))


def predict_error(args, capsys) -> str:
    from distil.cli.predict import main as predict

    with pytest.raises(SystemExit) as exit_:
        predict([str(arg) for arg in args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "Traceback" not in err
    return err.strip().splitlines()[-1]


def damaged(student: Path, tmp_path: Path, remove=(), truncate=()) -> Path:
    copy = tmp_path / "student"
    shutil.copytree(student, copy)
    for name in remove:
        (copy / name).unlink()
    for name in truncate:
        (copy / name).write_bytes((copy / name).read_bytes()[:10])  # a write cut short
    return copy


DAMAGED_STUDENTS = [
    ("no-weights", ["model.safetensors"], [], "<dir> is an incomplete student (missing: model.safetensors); the run that wrote it did not finish or the file was changed: rerun the training command"),
    ("no-vocab-config", ["vocab.json", "config.json"], [], "<dir> is an incomplete student (missing: config.json, vocab.json); the run that wrote it did not finish or the file was changed: rerun the training command"),
    ("truncated-weights", [], ["model.safetensors"], "<dir>/model.safetensors is damaged (SafetensorError: Error while deserializing header: invalid header length); the run that wrote it did not finish or the file was changed: rerun the training command"),
    ("truncated-config", [], ["config.json"], "<dir>/config.json is damaged (JSONDecodeError: Unterminated string starting at: line 2 column 3 (char 4)); the run that wrote it did not finish or the file was changed: rerun the training command"),
]


@pytest.mark.parametrize("remove,truncate,message", [case[1:] for case in DAMAGED_STUDENTS],
                         ids=[case[0] for case in DAMAGED_STUDENTS])
def test_predict_on_a_damaged_student_names_the_file_and_the_fix(saved_student, tmp_path, capsys, remove, truncate,
                                                                 message):
    student = damaged(saved_student, tmp_path, remove=remove, truncate=truncate)
    last = predict_error([student, "soup"], capsys)
    assert last == f"distil predict: error: {message.replace('<dir>', str(student))}"


def test_predict_on_a_directory_without_a_student(tmp_path, capsys):
    message = "<dir> holds no saved student (model.safetensors); pass a run directory written by `distil` or its student/ folder"
    assert predict_error([tmp_path, "soup"], capsys) == f"distil predict: error: {message.replace('<dir>', str(tmp_path))}"


@pytest.mark.parametrize("content,message", [
    (None, "text 1 is empty; give a non-empty text to label"),
    (b"", "--file <file> has no text (it is empty or blank); give one text per line"),
    (b"\n  \n", "--file <file> has no text (it is empty or blank); give one text per line"),
    (b"caf\xe9\n", "--file: <file> line 1 is not UTF-8 (byte 0xe9); re-save the file as UTF-8, e.g. iconv -f latin1 "
                   "-t utf-8"),
], ids=["empty-text", "empty-file", "blank-file", "latin1-file"])
def test_predict_refuses_empty_or_unreadable_input(tmp_path, capsys, content, message):
    """Checked before the student loads: an empty text gets an error, not a label."""
    file = tmp_path / "texts.txt"
    if content is None:
        args = [tmp_path, "  "]
    else:
        file.write_bytes(content)
        args = [tmp_path, "--file", file]
    assert predict_error(args, capsys) == f"distil predict: error: {message.replace('<file>', str(file))}"


@pytest.mark.parametrize("command, prog, data_file", [
    ("wu_table2", "distil paper wu-table2", "quora-pairs/quora_dev_balanced10k.tsv"),
    ("tang_table2", "distil paper tang-table2", "sst2/train.tsv"),
])
def test_a_benchmark_without_its_data_ends_in_one_stderr_line_and_writes_nothing(command, prog, data_file, tmp_path,
                                                                                capsys):
    """The benchmarks' errors went to stdout, where a pipe takes them for the table."""
    from distil.cli import paper

    with pytest.raises(SystemExit) as ended:
        getattr(paper, command)(["--quick", "--data-dir", str(tmp_path), "--out", str(tmp_path / "t")])
    out, err = capsys.readouterr()
    assert ended.value.code == 2
    assert out == ""
    folder = data_file.split("/")[0]
    assert err.splitlines() == [f"{prog}: error: {tmp_path / data_file} not found: give --data-dir the folder that "
                                f"holds {folder}/ (../shared/data here)"]
    assert not (tmp_path / "t").exists()
