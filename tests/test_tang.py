"""Tang et al. (2019) single-sentence student, Fig. 1: BiLSTM -> [last forward, last backward] -> ReLU -> linear.

The forward pass is checked against an LSTM run by hand from the module's own weights (so it is the last
states that reach the classifier, not a max-pool), the parameter count against the LSTM formula, and both
input modes (whitespace words, teacher wordpieces) through the real console script.
"""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from distil.errors import DistilError
from distil.run.pipeline import TeacherVocab, initialise_embeddings
from distil.students import build_student, check_student, count_params, reads_words
from distil.students.tang import TangStudent
from distil.students.vocab import TrimmedVocab
from distil.tasks import get_task
from tests.conftest import compose_config

CLASSIFICATION = get_task("classification")


def lstm_last_state(inputs: torch.Tensor, lstm: torch.nn.LSTM, suffix: str) -> torch.Tensor:
    """h_T of one LSTM direction over `inputs` [T, E], from the gate equations (PyTorch's i, f, g, o order)."""
    w_ih, w_hh = getattr(lstm, f"weight_ih_l0{suffix}"), getattr(lstm, f"weight_hh_l0{suffix}")
    bias = getattr(lstm, f"bias_ih_l0{suffix}") + getattr(lstm, f"bias_hh_l0{suffix}")
    h = c = torch.zeros(lstm.hidden_size)
    for x in inputs:
        i, f, g, o = (w_ih @ x + w_hh @ h + bias).chunk(4)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
    return h


def tang_by_hand(model: TangStudent, ids: list[int]) -> torch.Tensor:
    """Fig. 1: (c, d) the last backward and forward states, concatenated -> (e) ReLU layer -> (h) logits."""
    embedded = model.encoder.embedding.weight[torch.tensor(ids)]
    lstm = model.encoder.lstm
    forward_last = lstm_last_state(embedded, lstm, "")  # after reading the last real token
    backward_last = lstm_last_state(embedded.flip(0), lstm, "_reverse")  # after reading the first one
    hidden = torch.cat([forward_last, backward_last])
    relu_layer, output_layer = model.classifier[0], model.classifier[-1]
    return output_layer(torch.relu(relu_layer(hidden)))


def test_forward_is_last_states_then_relu_layer_then_linear():
    torch.manual_seed(0)
    model = TangStudent(vocab_size=20, embedding_dim=4, hidden_size=3, num_labels=2, dropout=0.0,
                        relu_size=5).eval()
    sentences = [[3, 4, 5, 6], [7, 8]]  # the second is padded: padding must not reach either direction
    ids = torch.tensor([[3, 4, 5, 6], [7, 8, 0, 0]])
    mask = ids != 0
    with torch.no_grad():
        logits = model(ids, mask)["logits"]
        expected = torch.stack([tang_by_hand(model, sentence) for sentence in sentences])
    torch.testing.assert_close(logits, expected, atol=1e-6, rtol=1e-5)


def test_parameter_count_follows_the_lstm_formula():
    # vocab V=20, E=4, H=3 per direction, ReLU layer R=5, 2 labels.
    embedding = 20 * 4
    lstm_direction = 4 * 3 * (4 + 3) + 2 * 4 * 3  # four gates: W_ih, W_hh and PyTorch's two bias vectors
    relu_layer = 2 * 3 * 5 + 5
    output = 5 * 2 + 2
    model = TangStudent(vocab_size=20, embedding_dim=4, hidden_size=3, num_labels=2, dropout=0.0, relu_size=5)
    assert count_params(model) == embedding + 2 * lstm_direction + relu_layer + output == 343


def non_embedding_params(model: torch.nn.Module) -> int:
    return count_params(model) - model.encoder.embedding.weight.numel()


def test_tangs_sst2_size_is_table_2s_096m_parameters():
    """Tang Table 2: 0.96M parameters (embeddings excluded) on SST-2. By the LSTM formula only H=150 with a
    ReLU layer of 200 gets there, reading the 2 x 300 multichannel word2vec input (600 per word):
    2 * (4*150*(600+150) + 8*150) + (300*200 + 200) + (200*2 + 2) = 963,002. H=150/R=400 gives 1.02M, H=300 2.2M."""
    cfg = compose_config("student=tang").student
    assert (cfg.hidden_size, cfg.mlp_hidden_size, cfg.embedding_dim) == (150, 200, 300)
    multichannel = TangStudent(10, 2 * cfg.embedding_dim, cfg.hidden_size, 2, 0.0, cfg.mlp_hidden_size)
    assert non_embedding_params(multichannel) == 963_002
    # one 300-d channel, as this student reads: 2 * (4*150*450 + 1200) + 60,200 + 402
    single = build_student(cfg, vocab_size=10, num_labels=2, task=CLASSIFICATION)
    assert non_embedding_params(single) == 603_002


def test_presets_pick_tangs_setting():
    student = compose_config("student=tang").student
    assert (student.kind, student.tokens, student.batch_size, student.dropout) == ("tang", "words", 50, 0.1)
    cfg = compose_config("+experiment=tang")
    assert (cfg.student.name, cfg.schedule.name, cfg.trainer.optimizer, cfg.trainer.lr, cfg.trainer.rho) == (
        "tang", "bilstm-soft", "adadelta", 1.0, 0.95)


def test_tokens_setting_chooses_words_or_wordpieces():
    tang = compose_config("student=tang").student
    assert reads_words(tang)
    assert not reads_words(compose_config("student=tang", "student.tokens=wordpieces").student)
    # other students keep what their family reads unless told otherwise
    assert reads_words(compose_config("student=rnn").student)
    assert not reads_words(compose_config("student=bilstm").student)


@pytest.mark.parametrize("overrides,task,message", [
    (["student.tokens=characters"], "classification",
     "unknown student.tokens 'characters'; choose one of: words, wordpieces"),
    ([], "pair", "student 'tang' cannot do pair"),
    (["student=siamese", "student.tokens=words"], "pair",
     "student.tokens=words reads one whitespace-split text but pair gives text pairs; set student.tokens=wordpieces"),
])
def test_bad_tokens_setting_is_one_line(overrides, task, message):
    cfg = compose_config("student=tang", *overrides).student
    with pytest.raises(DistilError) as error:
        check_student(cfg, get_task(task))
    assert message in str(error.value) and "\n" not in str(error.value)


def write_vectors(path, rows: dict[str, list[float]]):
    path.write_text("".join(f"{word} {' '.join(str(v) for v in vector)}\n" for word, vector in rows.items()))
    return path


@pytest.mark.parametrize("tokens", ["words", "wordpieces"])
def test_pretrained_vectors_file_loads_into_the_embedding(tokens, tmp_path):
    chef = [0.01 * k for k in range(32)]
    vectors = write_vectors(tmp_path / "vectors.txt", {"chef": chef, "soup": [-0.5] * 32})
    cfg = compose_config("debug=smoke", "student=tang", f"student.tokens={tokens}", "student.embedding_init=file",
                         f"student.vectors_file={vectors}")
    teacher_tokens = ["[PAD]", "[UNK]", "a", "soup", "pan", "chef"]
    vocab = TrimmedVocab(["pan", "chef", "soup"] if tokens == "words" else [4, 5, 3])
    model = build_student(cfg.student, len(vocab), 2, CLASSIFICATION)
    initialise_embeddings(model, cfg.student, cfg.seed, vocab, TeacherVocab(torch.randn(6, 32), teacher_tokens, 32, []))
    weight = model.encoder.embedding.weight
    torch.testing.assert_close(weight[3], torch.tensor(chef))  # student row 3 = vocabulary entry 1 = chef
    torch.testing.assert_close(weight[4], torch.full((32,), -0.5))
    assert not torch.allclose(weight[2], torch.tensor(chef))  # "pan" has no vector: it keeps the random init


# words + a vectors file with the slow tests: the same path, another vocabulary
@pytest.mark.parametrize("tokens,init", [pytest.param("words", "file", marks=pytest.mark.slow), ("wordpieces", "svd")])
def test_tang_runs_end_to_end_on_words_or_wordpieces(tokens, init, tmp_path, monkeypatch, capsys):
    from distil.cli.predict import main as predict
    from tests.test_cli import distil_in_process

    vectors = write_vectors(tmp_path / "vectors.txt", {"chef": [0.1] * 32, "soup": [0.2] * 32})
    args = ["debug=smoke", "student=tang", "schedule=bilstm-soft", f"student.tokens={tokens}",
            f"student.embedding_init={init}", f"student.vectors_file={vectors}"]
    code, out, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    if init == "file":  # both words have a vector; the rest of the vocabulary starts random
        assert "found vectors for 2 of" in out + err
    metrics_file = next((tmp_path / "outputs" / "runs").rglob("metrics.json"))
    metrics = json.loads(metrics_file.read_text())
    assert metrics["status"] == "ok"
    assert (metrics["choices"]["student"], metrics["choices"]["schedule"]) == ("tang", "bilstm-soft")

    saved = metrics_file.parent / "student"
    entries = json.loads((saved / "vocab.json").read_text())["teacher_ids"]
    if tokens == "words":
        assert {"chef", "soup", "stadium"} <= set(entries)  # whole lower-cased words from the toy data
    else:
        assert all(isinstance(entry, int) for entry in entries)  # the tiny teacher's wordpiece ids
    state = load_file(saved / "model.safetensors")
    rows = len(entries) + 2  # [PAD], [UNK], then the trimmed vocabulary
    labels = len(json.loads((saved / "config.json").read_text())["labels"])
    # smoke sizes: E=32, H=32 per direction, Tang's ReLU layer of 200
    expected = rows * 32 + 2 * (4 * 32 * (32 + 32) + 8 * 32) + (64 * 200 + 200) + (200 * labels + labels)
    assert sum(t.numel() for t in state.values()) == expected
    assert state["classifier.0.weight"].shape == (200, 64)  # the ReLU layer reads both last states

    predict([str(metrics_file.parent), "the chef made soup"])
    assert capsys.readouterr().out.strip().splitlines()[-1].split("\t")[0] in json.loads(
        (saved / "config.json").read_text())["labels"]
