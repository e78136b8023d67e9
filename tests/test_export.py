"""ONNX export of every student family (distil/serve/export.py), its export-friendly pieces
(distil/students/exportable.py), the ONNX Runtime server (distil/serve/onnx_session.py) and `distil export`."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from transformers import BertTokenizer

from distil.config.schema import CONF_DIR, StudentConfig
from distil.errors import DistilError
from distil.serve.export import (
    agreement,
    encoded_batches,
    export_onnx,
    onnx_forward,
    quantise_int8,
    quiet_exporter,
    run_pass,
    torch_forward,
)
from distil.serve.onnx_session import ONNX_FILES, OnnxLogits
from distil.serve.student import SavedStudent, write_student
from distil.students import FAMILIES, build_student, reads_words
from distil.students.encoders import BiLSTMEncoder
from distil.students.exportable import ExportEncoder, bag_means, exportable
from distil.students.vocab import TrimmedVocab, student_sep_id
from distil.tasks import get_task
from distil.teacher.load import TINY_VOCAB
from tests.test_cli import distil_in_process

TASK_OF = {"text": "classification", "pair": "pair", "tokens": "tagging"}
TINY = {"embedding_dim": 8, "hidden_size": 8, "dropout": 0.0}


def tiny_configs() -> dict[str, dict]:
    """Every student option of conf/student that builds a distil student (peers are other tools), at tiny
    sizes; options that are the same student when tiny (transformer-mini, -small, ...) once."""
    configs, seen = {}, set()
    for path in sorted((CONF_DIR / "student").glob("*.yaml")):
        settings = {key: value for key, value in OmegaConf.to_container(OmegaConf.load(path)).items()
                    if key != "description"}
        if settings["kind"] not in FAMILIES:
            continue
        settings.update(TINY, num_layers=min(settings.get("num_layers", 1), 2),
                        mlp_hidden_size=min(settings.get("mlp_hidden_size", 6), 6))
        if settings["kind"] == "transformer":
            settings.update(hidden_size=64, num_layers=1)
        key = json.dumps({k: v for k, v in settings.items() if k != "name"}, sort_keys=True)
        if key not in seen:
            seen.add(key)
            configs[path.stem] = settings
    return configs


CONFIGS = tiny_configs()


def task_of(settings: dict) -> str:
    """The input that exports the largest graph a student reads: a pair read apart (two sentence columns)
    where it reads one, else its family's first."""
    cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), settings)
    family = FAMILIES[cfg.kind]
    apart = getattr(family, "READS_PAIRS_APART", False) and "pair" in family.INPUTS and not reads_words(cfg)
    return "pair" if apart else TASK_OF[family.INPUTS[0]]


# every option, and the static student's tagger (padded batches, not bags)
CASES = [*((name, task_of(settings)) for name, settings in CONFIGS.items()), ("static", "tagging")]
TEXTS = ["the cat sat on the mat", "a dog", "zyx qq the end of it all right now , ok", "x y", "one more text", "ok"]


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocab={word: i for i, word in enumerate(TINY_VOCAB)})


def saved_student(out: Path, tokenizer, name: str, task_name: str, representation_head: bool = False) -> SavedStudent:
    """A tiny random student of conf/student/<name>.yaml, written as a run writes it and read back."""
    cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), CONFIGS[name])
    task = get_task(task_name)
    vocab = TrimmedVocab(list(range(5, len(TINY_VOCAB))))  # every wordpiece of the tiny vocabulary
    labels = ["B-X", "I-X", "O"] if task_name == "tagging" else ["a", "b", "c"]
    torch.manual_seed(0)
    model = build_student(cfg, len(vocab), task.num_outputs(labels), task, 12, representation_head=representation_head)
    write_student(out, model, vocab, tokenizer, student=OmegaConf.to_container(cfg), task=task,
                  labels=task.output_names(labels), teacher_hidden_size=12, representation_head=representation_head,
                  projection="side", max_length=32)
    return SavedStudent(out, device="cpu")


def texts_for(student: SavedStudent) -> list[str]:
    if student.task.inputs == "pair":
        return [f"{a} ||| {b}" for a, b in zip(TEXTS, TEXTS[::-1], strict=True)]
    return TEXTS


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tokenizer):
    """(saved student, its model.onnx) of an option on a task, exported once for the module's tests; the
    bilstm with a representation head."""
    done = {}

    def export(name: str, task_name: str) -> tuple[SavedStudent, Path]:
        if (name, task_name) not in done:
            out = tmp_path_factory.mktemp(f"{name}-{task_name}")
            student = saved_student(out, tokenizer, name, task_name, representation_head=name == "bilstm")
            export_onnx(student, out / ONNX_FILES["onnx"])
            done[name, task_name] = student, out / ONNX_FILES["onnx"]
        return done[name, task_name]

    return export


@pytest.mark.parametrize("name,task_name", CASES, ids=[f"{name}-{task}" for name, task in CASES])
@pytest.mark.heavy
def test_every_student_family_exports_with_free_batch_and_length(name, task_name, exported):
    """ONNX Runtime gives PyTorch's logits and predictions on batches of 2, of 6 and of 1 text, padded, of
    other sizes than the export's example; and the representation where the student has one."""
    student, path = exported(name, task_name)
    texts = texts_for(student)
    for batch_size in (2, 6):
        batches = encoded_batches(student, texts, batch_size)
        assert len(batches) == len(texts) // batch_size
        result = agreement(run_pass(torch_forward(student), batches), run_pass(onnx_forward(path), batches))
        assert result.max_difference <= 1e-4 and result.agreeing == result.compared > 0, result
        rows = batches[-1][1]  # a mask, or a bag student's offsets
        assert rows.shape[0] == batch_size and (student.bags or (rows == 0).any())  # padded
    one = [student.encode_batch(texts[2:3], one_request=False)]  # a batch of one text, the longest
    result = agreement(run_pass(torch_forward(student), one), run_pass(onnx_forward(path), one))
    assert result.max_difference <= 1e-4 and result.agreeing == result.compared > 0, result
    served = OnnxLogits(path, threads=1)(batches[0])
    with torch.no_grad():
        out = student.model.forward_bags(*batches[0]) if student.bags else student.model(*batches[0])
    assert set(served) == {"logits"} | ({"representation"} & set(out))
    assert ("representation" in served) == (name in ("bilstm", "sra"))  # a head; the SRA student's own vector
    for key, value in served.items():
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, out[key].numpy(), atol=1e-4)


@pytest.mark.parametrize("task_name", ["classification", "pair"])
@pytest.mark.heavy
def test_a_static_student_served_as_bags_encodes_on_every_backend(task_name, tokenizer, tmp_path):
    """A static student serves bags, which skip its side representation head; its export keeps the head,
    so the ONNX files give torch's representation (a pair's per sentence), the int8 one close to it."""
    from distil import Student

    student = saved_student(tmp_path, tokenizer, "static", task_name, representation_head=True)
    assert student.bags
    fp32, int8 = tmp_path / ONNX_FILES["onnx"], tmp_path / ONNX_FILES["onnx-int8"]
    export_onnx(student, fp32)
    quantise_int8(fp32, int8)
    texts = texts_for(student)
    encoded = {backend: Student.load(tmp_path, backend=backend).encode(texts, batch_size=4)
               for backend in ("torch", "onnx", "onnx-int8")}
    assert encoded["torch"].shape == ((6, 2, 12) if task_name == "pair" else (6, 12))
    assert encoded["onnx"].shape == encoded["onnx-int8"].shape == encoded["torch"].shape
    np.testing.assert_allclose(encoded["onnx"], encoded["torch"], atol=1e-4, rtol=0)
    np.testing.assert_allclose(encoded["onnx-int8"], encoded["torch"], atol=0.05, rtol=0)
    # serving logits from bags still skips the head: no representation computed there
    with torch.no_grad():
        assert "representation" not in student.model.forward_bags(*student.encode_batch(texts, one_request=False))


def test_an_export_without_the_representation_says_to_export_again(tokenizer, tmp_path, monkeypatch):
    """A graph written before the export kept a bag student's representation head has no such output:
    encode() on it is one line naming the fix."""
    import distil.serve.export as export
    from distil import Student
    from distil.students.heads import WithRepresentation

    def without_representation(model):
        copy = exportable(model)
        for module in copy.modules():
            if isinstance(module, WithRepresentation):
                module.represent_bags = False
        return copy

    student = saved_student(tmp_path, tokenizer, "static", "classification", representation_head=True)
    monkeypatch.setattr(export, "exportable", without_representation)
    export_onnx(student, tmp_path / ONNX_FILES["onnx"])
    message = ("this student's ONNX export has no representation output (an export from before distil exported it); "
               "export it again with `distil export RUN_DIR`, or use backend='torch'")
    with pytest.raises(DistilError, match=f"^{re.escape(message)}$"):
        Student.load(tmp_path, backend="onnx").encode(TEXTS)


@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.heavy
def test_the_exported_encoder_gives_the_training_encoders_outputs(layers, tmp_path):
    """The ONNX LSTM operators ExportEncoder exports give the training encoder's states (zeros at padding)
    and last states, on batches of other sizes than the export's example: without padding (the
    training encoder's fused kernel), with it, and with an empty row (read as one position)."""
    torch.manual_seed(0)
    encoder = BiLSTMEncoder(30, 8, 6, dropout=0.3, num_layers=layers, recurrent_dropout=0.2).eval()
    keys = list(encoder.state_dict())
    path = tmp_path / "encoder.onnx"
    example = (torch.randint(2, 30, (3, 4)), torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1], [1, 0, 0, 0]]))
    free = {0: torch.export.Dim("batch"), 1: torch.export.Dim("length")}
    with quiet_exporter():
        torch.onnx.export(ExportEncoder(encoder), example, path, dynamo=True, input_names=["ids", "mask"],
                          output_names=["states", "last"], dynamic_shapes=(free, free))
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    for lengths in ([7, 7, 7, 7, 7], [7, 3, 1, 0], [2, 1], [1, 1, 1, 1, 1, 1]):
        lengths = torch.tensor(lengths)
        mask = (torch.arange(int(lengths.max())) < lengths.unsqueeze(1)).long()
        ids = torch.randint(2, 30, mask.shape) * mask
        with torch.no_grad():
            states, last = encoder(ids, mask)
        got = session.run(None, {"ids": ids.numpy(), "mask": mask.numpy()})
        np.testing.assert_allclose(got[0], states.numpy(), atol=1e-6, rtol=0)
        np.testing.assert_allclose(got[1], last.numpy(), atol=1e-6, rtol=0)
        assert (got[0][(torch.arange(mask.shape[1]) >= lengths.clamp(min=1).unsqueeze(1)).numpy()] == 0).all()
    assert list(encoder.state_dict()) == keys  # the training encoder is as it was


def test_exportable_copies_and_leaves_the_student_as_it_was():
    torch.manual_seed(0)
    cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), {**CONFIGS["siamese"], "dropout": 0.2})
    model = build_student(cfg, 30, 2, get_task("pair")).train()
    copy = exportable(model)
    assert isinstance(model.encoder, BiLSTMEncoder) and model.training
    assert isinstance(copy.encoder, ExportEncoder) and not copy.training
    inputs = (torch.tensor([[2, 3, 4], [5, 6, 0]]), torch.tensor([[1, 1, 1], [1, 1, 0]]),
              torch.tensor([[7, 8], [9, 0]]), torch.tensor([[1, 1], [1, 0]]))
    with torch.no_grad():
        torch.testing.assert_close(copy(*inputs)["logits"], model.eval()(*inputs)["logits"], atol=1e-6, rtol=0)


@pytest.mark.heavy
def test_a_transformer_serves_a_pair_as_it_trained_on_it(tokenizer, tmp_path):
    """The run's student (its second segment from [SEP] on, as run/pipeline.py builds it) against the saved
    student read back and its export: the same logits on pairs. (Served with every position in segment 0,
    an MRPC student lost 7 points of test accuracy; its ONNX export inherited it.)"""
    cfg = OmegaConf.merge(OmegaConf.structured(StudentConfig), CONFIGS["transformer-base"])
    task = get_task("pair")
    vocab = TrimmedVocab(list(range(2, len(TINY_VOCAB))))  # the run's vocabulary holds [CLS] and [SEP]
    sep = student_sep_id(vocab, tokenizer.sep_token_id, reads_words(cfg))
    assert sep == vocab.map([tokenizer.sep_token_id])[0] > 1  # [SEP] itself, not [UNK]
    torch.manual_seed(0)
    trained = build_student(cfg, len(vocab), 2, task, 12, sep_id=sep).eval()
    write_student(tmp_path, trained, vocab, tokenizer, student=OmegaConf.to_container(cfg), task=task,
                  labels=["a", "b"], teacher_hidden_size=12, representation_head=False, projection="side",
                  max_length=32)
    saved = SavedStudent(tmp_path, device="cpu")
    inputs = saved.encode_batch([f"{a} ||| {b}" for a, b in zip(TEXTS, TEXTS[::-1], strict=True)],
                                one_request=False)
    with torch.no_grad():
        expected = trained(*inputs)["logits"]
        unsegmented = build_student(cfg, len(vocab), 2, task, 12).eval()  # every position in segment 0
        unsegmented.load_state_dict(trained.state_dict())
        assert (unsegmented(*inputs)["logits"] - expected).abs().max() > 1e-3  # so the test can fail
        torch.testing.assert_close(saved.model(*inputs)["logits"], expected)
    export_onnx(saved, tmp_path / ONNX_FILES["onnx"])
    np.testing.assert_allclose(OnnxLogits(tmp_path / ONNX_FILES["onnx"], threads=2)(inputs)["logits"],
                               expected.numpy(), atol=1e-5)


def test_a_bag_students_export_adds_by_no_scatter(exported):
    """ONNX Runtime's ScatterND with reduction add (torch's index_add) loses additions when two threads
    meet on one bag: a static MRPC student's export disagreed with it on 1 to 3 pairs of each batch of 64.
    The bag mean is exported without it."""
    import onnx

    for task_name in ("classification", "pair"):
        _, path = exported("static", task_name)
        assert "ScatterND" not in {node.op_type for node in onnx.load(str(path)).graph.node}


def test_bag_means_is_embedding_bags_mean_empty_bags_included():
    table = torch.randn(12, 5)
    ids = torch.tensor([3, 4, 5, 6, 7, 8, 9, 10, 11])
    for offsets in ([0, 3, 5], [0, 0, 2, 2, 9], [0, 9]):
        offsets = torch.tensor(offsets)
        torch.testing.assert_close(bag_means(table, ids, offsets),
                                   F.embedding_bag(ids, table, offsets, mode="mean"), atol=1e-6, rtol=0)


def test_int8_quantisation_of_a_bilstm_is_smaller_and_close(exported, tmp_path):
    student, fp32 = exported("bilstm", "classification")
    int8 = tmp_path / ONNX_FILES["onnx-int8"]
    quantise_int8(fp32, int8)
    assert int8.stat().st_size < fp32.stat().st_size / 2
    batches = encoded_batches(student, TEXTS, 3)
    result = agreement(run_pass(onnx_forward(fp32), batches), run_pass(onnx_forward(int8), batches))
    assert 0 < result.max_difference < 0.05
    assert [p.name for p in tmp_path.iterdir()] == [ONNX_FILES["onnx-int8"]]  # nothing else left behind


def test_quantising_leaves_nothing_in_the_working_directory(exported, tmp_path, monkeypatch):
    """ONNX Runtime's shape inference saves its partial model in the working directory when it cannot
    finish (sym_shape_infer_temp.onnx, and a weights file named by a uuid): quantising runs elsewhere."""
    import onnxruntime.quantization.shape_inference as shape_inference

    _, fp32 = exported("bilstm", "classification")
    original = shape_inference.quant_pre_process

    def leaving_its_partial_model(*args, **kwargs):
        Path("sym_shape_infer_temp.onnx").write_text("partial")
        return original(*args, **kwargs)
    monkeypatch.setattr(shape_inference, "quant_pre_process", leaving_its_partial_model)
    (tmp_path / "cwd").mkdir()
    monkeypatch.chdir(tmp_path / "cwd")
    quantise_int8(fp32, tmp_path / ONNX_FILES["onnx-int8"])
    assert Path.cwd() == tmp_path / "cwd" and not list(Path.cwd().iterdir())
    assert (tmp_path / ONNX_FILES["onnx-int8"]).exists()


def test_the_onnx_server_takes_tensors_or_arrays_and_says_what_is_wrong(exported, tmp_path):
    student, exported_path = exported("static-words", "classification")
    path = tmp_path / ONNX_FILES["onnx-int8"]
    with pytest.raises(DistilError, match="does not exist; write it with `distil export <run dir> --int8`$"):
        OnnxLogits(path)
    session = OnnxLogits(exported_path)
    inputs = student.encode_batch(TEXTS[:3])
    as_arrays = session(tuple(tensor.numpy() for tensor in inputs))["logits"]
    np.testing.assert_array_equal(session(inputs)["logits"], as_arrays)
    assert as_arrays.shape == (3, 3)
    with pytest.raises(ValueError, match="takes 2 inputs"):
        session(inputs[:1])
    path.write_bytes(exported_path.read_bytes()[:100])
    with pytest.raises(DistilError) as damaged:
        OnnxLogits(path)
    assert str(damaged.value).startswith(f"{path} is damaged (")
    assert str(damaged.value).endswith("); export it again with `distil export <run dir>`")


@pytest.mark.heavy
def test_distil_export_on_a_smoke_run(tmp_path, monkeypatch, capsys):
    """`distil export RUN_DIR --int8` writes both files beside the student and prints the check on the
    test split: ONNX Runtime agrees with PyTorch on every prediction, at the score the run recorded."""
    assert distil_in_process(["debug=smoke"], tmp_path, monkeypatch, capsys)[0] == 0
    run_dir = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent
    code, out, err = distil_in_process(["export", str(run_dir), "--int8"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    student = run_dir / "student"
    assert (student / "model.onnx").is_file() and (student / "model.int8.onnx").is_file()
    assert not [p for p in student.iterdir() if p.name.endswith(".tmp") or p.name.startswith(".")]
    assert "serving the 24 test examples with PyTorch and with ONNX Runtime" in out
    checked = next(line for line in out.splitlines() if "ONNX Runtime against PyTorch:" in line)
    assert "predictions agree 100% (24 of 24 examples)" in checked
    recorded = json.loads((run_dir / "metrics.json").read_text())["student"]["test"]["accuracy"]
    assert f"test accuracy: ONNX {100 * recorded:.2f}, PyTorch {100 * recorded:.2f}" in out
    assert "int8: test accuracy" in out and "int8 against PyTorch" in out
    # the card, rendered again, lists the exports with their sizes and what serves them
    assert f"rendered the model card again, with the files' sizes: {student / 'README.md'}" in out
    card = (student / "README.md").read_text()
    files = next(line for line in card.splitlines() if line.startswith("| files |"))
    sizes = {name: (student / name).stat().st_size / 1e6 for name in ("model.onnx", "model.int8.onnx")}
    assert f"`model.onnx` {sizes['model.onnx']:.2f} MB (ONNX Runtime, `backend=\"onnx\"`)" in files
    assert (f"`model.int8.onnx` {sizes['model.int8.onnx']:.2f} MB (ONNX Runtime int8, `backend=\"onnx-int8\"`; "
            f"{sizes['model.int8.onnx'] / sizes['model.onnx']:.2f}x the fp32 file)") in files
    assert files.index("model.safetensors") < files.index("model.onnx") < files.index("model.int8.onnx")
    assert 'Student.load(".")   # backend="onnx-int8" serves its ONNX export' in card
    # what it measured is kept in export.json, and the card lists it for each served form
    record = json.loads((student / "export.json").read_text())
    assert (record["measured_by"], record["metric"], record["texts"]) == ("distil export", "accuracy", 24)
    assert record["onnx"]["test"]["accuracy"] == record["eager"]["test"]["accuracy"] == recorded
    assert record["onnx"]["agreeing"] == record["onnx"]["compared"] == 24
    for form, row, file in (("eager", "PyTorch (eager), `backend=\"torch\"`", "model.safetensors"),
                            ("onnx", "ONNX fp32, `backend=\"onnx\"`", "model.onnx"),
                            ("int8", "ONNX int8, `backend=\"onnx-int8\"`", "model.int8.onnx")):
        assert record[form]["ex_per_s"] > 0
        assert (f"| {row} | `{file}` {(student / file).stat().st_size / 1e6:.2f} MB | not measured | "
                f"{record[form]['ex_per_s']:,.0f} examples/s, model time only, batches of 32 | "
                f"{100 * record[form]['test']['accuracy']:.2f} | distil export (export.json) |") in card
    # served as the run scored it: no warning, unless int8's timing (not its score) lost to fp32 on a busy machine
    assert "warning:" not in re.sub(r"warning: student's int8 model is slower than fp32 \([^)]*\); serve model.onnx "
                                    r"instead\n", "", err)
    # a run whose recorded score the served student does not give (as a Transformer pair student's was when
    # serving read no second segment): one warning line
    metrics = json.loads((run_dir / "metrics.json").read_text())
    metrics["student"]["test"]["accuracy"] = recorded - 0.1
    (run_dir / "metrics.json").write_text(json.dumps(metrics))
    code, out, err = distil_in_process(["export", str(run_dir)], tmp_path, monkeypatch, capsys)
    assert code == 0 and err.strip().splitlines()[-1] == (
        f"warning: student, served, scores {100 * recorded:.2f} test accuracy where its run recorded "
        f"{100 * (recorded - 0.1):.2f}: serving reads the inputs otherwise than training did; please report it "
        f"with this run's .hydra/config.yaml")


def bad_runs(root: Path) -> dict[str, tuple[Path, str]]:
    """Directories `distil export` refuses: (the directory, the message after its path), by case."""
    (root / "plain").mkdir()
    failed = root / "failed"
    (failed / ".hydra").mkdir(parents=True)
    (failed / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (failed / "metrics.json").write_text(json.dumps({"status": "failed: interrupted"}))
    peer = root / "peer"
    (peer / ".hydra").mkdir(parents=True)
    (peer / ".hydra" / "config.yaml").write_text("seed: 1\n")
    (peer / "student").mkdir()
    (peer / "student" / "config.json").write_text(json.dumps({"student": {"name": "peer-tfidf", "kind": "peer"}}))
    return {
        "no-directory": (root / "nowhere", " is not a directory; pass a run directory written by `distil` "
                                           "(outputs/runs/<date>/<time>)"),
        "no-run": (root / "plain", " is not a run directory (it has no .hydra/config.yaml, the run's configuration); "
                                   "pass one written by `distil`, e.g. outputs/runs/<date>/<time>"),
        "no-student": (failed, " holds no saved student (student/ or student-<lang>/): the run did not finish "
                               "(see the status in its metrics.json); rerun it, then export"),
        "peer": (peer / "student", " holds a peer (student=peer-tfidf), another tool's model, not a distil student; "
                                   "export a run of a distil student (bilstm, static, transformer, ...)"),
    }


@pytest.mark.parametrize("case", ["no-directory", "no-run", "no-student", "peer"])
def test_distil_export_refuses_what_is_no_run_with_a_student_in_one_line(case, tmp_path, monkeypatch, capsys):
    path, message = bad_runs(tmp_path)[case]
    before = sorted(tmp_path.rglob("*"))
    code, out, err = distil_in_process(["export", str(path), "--int8"], tmp_path, monkeypatch, capsys)
    assert code == 2 and out == "", err
    assert err == f"distil export: error: {path}{message}\n"
    assert sorted(tmp_path.rglob("*")) == before  # nothing written


@pytest.mark.heavy
def test_a_graph_of_another_export_version_is_refused_by_the_api_and_exported_again_by_a_table(tokenizer, tmp_path):
    import onnx

    from distil.serve.onnx_session import EXPORT_VERSION, export_version
    from distil.tables.timing import exported as table_export

    student = saved_student(tmp_path, tokenizer, "static", "pair")
    path = tmp_path / ONNX_FILES["onnx"]
    export_onnx(student, path)
    assert export_version(path) == EXPORT_VERSION
    graph = onnx.load(str(path))
    del graph.metadata_props[:]  # as distil wrote it before export versions: version 1
    onnx.save(graph, str(path))
    message = (f"{path} was exported by another distil (export version 1, this one {EXPORT_VERSION}), whose graph "
               f"may not give the student's predictions; export it again with `distil export <run dir>`")
    with pytest.raises(DistilError, match=f"^{re.escape(message)}$") as refused:
        OnnxLogits(path)
    assert "\n" not in str(refused.value)
    files = table_export(student, tmp_path)  # a frontier table's timing: stale, so exported again
    assert {form: export_version(file) for form, file in files.items()} == {"onnx": EXPORT_VERSION,
                                                                             "int8": EXPORT_VERSION}
    OnnxLogits(files["int8"])  # the int8 copy carries the version too
