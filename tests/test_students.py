"""Every student family: output shapes, masking of padding, representation head, vocabularies."""

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from distil.config.schema import StudentConfig
from distil.data.batching import model_inputs
from distil.errors import DistilError
from distil.students import FAMILIES, build_student, check_student, count_params
from distil.students.vocab import UNK, TrimmedVocab
from distil.tasks import get_task

SEQUENCES = [[5, 6, 7, 8], [9, 10]]
PAIRS = [([5, 6, 7], [8, 9]), ([10, 11], [12, 13, 14, 15])]


def student_cfg(kind, **overrides):
    base = {"name": kind, "kind": kind, "embedding_dim": 8, "hidden_size": 8, "mlp_hidden_size": 6,
            "num_layers": 1, "dropout": 0.0}
    if kind == "transformer":
        base.update(hidden_size=64, num_layers=2)
    return OmegaConf.merge(OmegaConf.structured(StudentConfig), {**base, **overrides})


CASES = [("bilstm", "classification"), ("bilstm", "pair"), ("rnn", "classification"),
         ("bilstm_tagger", "tagging"), ("siamese", "pair"), ("transformer", "classification"),
         ("transformer", "pair"), ("transformer", "tagging"), ("sra", "classification"), ("sra", "pair"),
         ("static", "classification"), ("static", "pair"), ("static", "tagging")]


def inputs_for(kind, task):
    return model_inputs(PAIRS if kind == "siamese" or (kind, task) in {("sra", "pair"), ("static", "pair")}
                        else SEQUENCES)


@pytest.mark.parametrize("kind,task", CASES)
def test_output_shapes(kind, task):
    torch.manual_seed(0)
    model = build_student(student_cfg(kind), vocab_size=20, num_labels=3, task=get_task(task),
                          teacher_hidden_size=12).eval()
    logits = model(*inputs_for(kind, task))["logits"]
    assert logits.shape == ((2, 4, 3) if task == "tagging" else (2, 3))


@pytest.mark.parametrize("kind,task", CASES)
def test_representation_head_maps_to_the_teacher_size(kind, task):
    model = build_student(student_cfg(kind), vocab_size=20, num_labels=3, task=get_task(task), teacher_hidden_size=12,
                          representation_head=True)
    representation = model(*inputs_for(kind, task))["representation"]
    apart = kind in ("siamese", "sra", "static") and task == "pair"  # each sentence's vector (Wu et al. §3.1)
    assert representation.shape == ((2, 4, 12) if task == "tagging" else (2, 2, 12) if apart else (2, 12))
    if kind == "sra":  # its own sentence layer, tanh
        assert (representation.abs() < 1).all()
    else:
        # gelu(W z + b) with W = 0 is gelu(b) at every position: gelu(x) = x * Phi(x), values by hand
        with torch.no_grad():
            model.projection.weight.zero_()
            model.projection.bias.copy_(torch.tensor([-1.0, 0.0, 1.0, 2.0] * 3))
        representation = model(*inputs_for(kind, task))["representation"]
        expected = torch.tensor([-0.158655, 0.0, 0.841345, 1.954500] * 3).expand_as(representation)
        torch.testing.assert_close(representation, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["bilstm", "rnn", "transformer", "static"])
def test_padding_never_changes_a_prediction(kind):
    """The same sentence alone or next to a much longer one gives the same output."""
    torch.manual_seed(0)
    model = build_student(student_cfg(kind), vocab_size=40, num_labels=3, task=get_task("classification")).eval()
    alone = model(*model_inputs([[5, 6, 7]]))["logits"][0]
    padded = model(*model_inputs([[5, 6, 7], list(range(2, 30))]))["logits"][0]
    assert torch.allclose(alone, padded, atol=1e-5)


def test_max_pool_ignores_padding_even_when_states_are_negative():
    from distil.students.encoders import max_pool

    states = torch.tensor([[[-3.0], [-2.0], [0.0]]])  # the padded position holds the largest value
    assert max_pool(states, torch.tensor([[1, 1, 0]])).item() == -2.0


def test_siamese_is_symmetric_in_its_shared_encoder():
    torch.manual_seed(0)
    model = build_student(student_cfg("siamese"), vocab_size=20, num_labels=2, task=get_task("pair")).eval()
    out = model(*model_inputs([([5, 6], [7, 8, 9])]))
    h1, h2 = out["pooled"].chunk(2, dim=-1)
    swapped = model(*model_inputs([([7, 8, 9], [5, 6])]))["pooled"]
    assert torch.allclose(torch.cat([h2, h1], dim=-1), swapped, atol=1e-6)


def test_turc_bert_tiny_has_the_published_size():
    """BERT-Tiny (L=2, H=128) over BERT's 30,522 wordpieces has 4.4M parameters (Turc et al.)."""
    model = build_student(student_cfg("transformer", num_layers=2, hidden_size=128), vocab_size=30522,
                          num_labels=2, task=get_task("classification"))
    assert count_params(model) == pytest.approx(4.4e6, rel=0.01)


def test_student_that_cannot_do_the_task():
    with pytest.raises(DistilError, match="student 'siamese' cannot do classification"):
        check_student(student_cfg("siamese"), get_task("classification"))


def test_every_family_declares_what_it_reads():
    assert all(family.INPUTS for family in FAMILIES.values())


def test_trimmed_vocab_round_trip(tmp_path):
    vocab = TrimmedVocab.from_sequences([[101, 7592, 102], [101, 2088, 102]])
    assert len(vocab) == 2 + 4
    assert vocab.map([101, 2088, 999]) == [2, 4, UNK]  # ids sorted: 101, 102, 2088, 7592
    vocab.save(tmp_path / "vocab.json")
    again = TrimmedVocab.load(tmp_path / "vocab.json")
    assert again.map([101, 2088, 999]) == vocab.map([101, 2088, 999])


def test_word_vocab_for_the_rnn_baseline():
    vocab = TrimmedVocab.from_sequences([["the", "film"], ["a", "film"]])
    assert vocab.map(["film", "unseen"]) == [vocab.map(["film"])[0], UNK]


def test_unpadded_fast_path_matches_the_packed_path():
    """A batch without padding skips packing; the states must be the same either way."""
    from distil.students.encoders import BiLSTMEncoder

    torch.manual_seed(0)
    encoder = BiLSTMEncoder(20, 8, 8, dropout=0.0).eval()
    ids, mask = model_inputs([[5, 6, 7], [8, 9, 10]])
    fast_states, fast_last = encoder(ids, mask)
    # the same two rows next to a longer one go through the packed path
    ids3, mask3 = model_inputs([[5, 6, 7], [8, 9, 10], [2, 3, 4, 5, 6]])
    slow_states, slow_last = encoder(ids3, mask3)
    assert torch.allclose(fast_states, slow_states[:2, :3], atol=1e-6)
    assert torch.allclose(fast_last, slow_last[:2], atol=1e-6)


@pytest.mark.parametrize("num_layers", [1, 2])
def test_padded_batches_give_the_packed_lstms_states_and_gradients(num_layers):
    """Each direction runs over the padded batch, the backward one reversed within each row's
    length: states, last states and weight gradients must be those of torch's packed LSTM."""
    from distil.students.encoders import BiLSTMEncoder

    torch.manual_seed(0)
    encoder = BiLSTMEncoder(30, 6, 5, dropout=0.0, num_layers=num_layers).eval()
    ids, mask = model_inputs([[5, 6, 7], [8, 9, 10, 11, 12, 13], [2], [4, 4, 9, 21]])
    states, last = encoder(ids, mask)
    (states.sum() + (last ** 2).sum()).backward()
    ours = {name: p.grad.clone() for name, p in encoder.lstm.named_parameters()}
    encoder.zero_grad()

    embedded = encoder.embedding(ids)
    packed = nn.utils.rnn.pack_padded_sequence(embedded, mask.sum(1), batch_first=True, enforce_sorted=False)
    packed_states, (final, _) = encoder.lstm(packed)
    packed_states, _ = nn.utils.rnn.pad_packed_sequence(packed_states, batch_first=True, total_length=ids.shape[1])
    packed_last = torch.cat([final[-2], final[-1]], dim=-1)
    (packed_states.sum() + (packed_last ** 2).sum()).backward()

    assert torch.allclose(states, packed_states, atol=1e-6)
    assert torch.allclose(last, packed_last, atol=1e-6)
    for name, param in encoder.lstm.named_parameters():
        assert torch.allclose(ours[name], param.grad, atol=1e-5), name
    assert set(encoder.state_dict()) == {"embedding.weight", *(f"lstm.{n}" for n, _ in encoder.lstm.named_parameters())}


def test_sra_sentence_vector_has_the_teacher_size_and_lies_in_tanh_range():
    model = build_student(student_cfg("sra"), vocab_size=20, num_labels=2, task=get_task("classification"),
                          teacher_hidden_size=12)
    sentence = model(*model_inputs(SEQUENCES))["sentence"]
    assert sentence.shape == (2, 12) and sentence.abs().max() < 1
    assert model.to_sentence.bias is None  # Wu et al.: a linear layer without bias


def test_recurrent_dropout_regularises_training_only_and_trains_the_real_weights():
    from distil.students.encoders import BiLSTMEncoder

    torch.manual_seed(0)
    encoder = BiLSTMEncoder(20, 8, 8, dropout=0.0, recurrent_dropout=0.5)
    ids, mask = model_inputs([[5, 6, 7, 8]])
    encoder.train()
    first, second = encoder(ids, mask)[0], encoder(ids, mask)[0]
    assert not torch.allclose(first, second)  # a new mask on the recurrent weights each call
    first.sum().backward()
    assert encoder.lstm.weight_hh_l0.grad is not None and encoder.lstm.weight_hh_l0.grad.abs().sum() > 0
    encoder.eval()
    assert torch.allclose(encoder(ids, mask)[0], encoder(ids, mask)[0])


def test_unk_dropout_replaces_tokens_at_its_rate_in_training_only_and_spares_pad_and_kept_ids():
    from distil.students import add_unk_dropout, word_embeddings
    from distil.students.vocab import PAD

    torch.manual_seed(0)
    model = build_student(student_cfg("bilstm"), vocab_size=40, num_labels=3, task=get_task("classification"))
    add_unk_dropout(model, 0.1, keep_ids=[2, 3])
    seen = []
    word_embeddings(model).register_forward_hook(lambda module, args, out: seen.append(args[0].clone()))
    ids = torch.randint(4, 40, (200, 50))
    ids[:, 0], ids[:, 1], ids[:, -5:] = 2, 3, PAD  # [CLS]-like kept ids, then padding
    mask = (ids != PAD).long()
    model.train()
    model(ids, mask)
    read = seen[-1]
    dropped = (read == UNK) & (ids != UNK)
    assert dropped[:, 2:-5].float().mean().item() == pytest.approx(0.1, abs=0.01)  # 9,000 tokens
    assert not dropped[:, :2].any() and torch.all(read[:, -5:] == PAD)
    assert torch.equal(read[~dropped], ids[~dropped])
    model.eval()
    model(ids, mask)
    assert torch.equal(seen[-1], ids)  # never at evaluation or prediction


def test_unk_dropout_sends_a_gradient_to_the_unk_row():
    from distil.students import add_unk_dropout, word_embeddings

    torch.manual_seed(0)
    model = build_student(student_cfg("bilstm"), vocab_size=40, num_labels=3, task=get_task("classification"))
    ids, mask = model_inputs([list(range(2, 40))] * 4)  # no [UNK] in the input
    model.train()
    model(ids, mask)["logits"].sum().backward()
    assert word_embeddings(model).weight.grad[UNK].abs().sum() == 0  # without word dropout: never trained
    model.zero_grad()
    add_unk_dropout(model, 0.2, keep_ids=[])
    model(ids, mask)["logits"].sum().backward()
    assert word_embeddings(model).weight.grad[UNK].abs().sum() > 0


@pytest.mark.parametrize("rate", [-0.1, 1.0])
def test_unk_dropout_outside_0_to_1_is_a_one_line_error(rate):
    with pytest.raises(DistilError, match=r"student.unk_dropout .* must be at least 0 and below 1"):
        check_student(student_cfg("bilstm", unk_dropout=rate), get_task("classification"))


# A BiLSTM student by hand: vocabulary V, embedding E, H units per direction, C classes. PyTorch's LSTM has
# 4 gates, each with input weights [H, E], recurrent weights [H, H] and two biases [H], per direction.
V, E, H, C, TEACHER_H, TEACHER_V = 10, 4, 3, 2, 5, 30
EMBEDDING = V * E  # 40
LSTM = 2 * 4 * (H * E + H * H + 2 * H)  # 216
CLASSIFIER = 2 * H * C + C  # 14
PROJECTION = 2 * H * TEACHER_H + TEACHER_H  # 35, the representation head gelu(W z + b)


@pytest.mark.parametrize("representation_head", [False, True])
def test_parameter_counts_of_a_small_bilstm_by_hand(representation_head):
    from distil.students import param_counts

    model = build_student(student_cfg("bilstm", embedding_dim=E, hidden_size=H), vocab_size=V, num_labels=C,
                          task=get_task("classification"), teacher_hidden_size=TEACHER_H,
                          representation_head=representation_head)
    counts = param_counts(model, teacher_vocab_size=TEACHER_V)
    assert counts == {
        "deployed": EMBEDDING + LSTM + CLASSIFIER,  # 270: the projection head only serves training
        "full_teacher_vocab": TEACHER_V * E + LSTM + CLASSIFIER,  # 350 (Mukherjee T7, XtremeDistil T16)
        "without_embeddings": LSTM + CLASSIFIER,  # 230 (Wu T2)
        "training_only": PROJECTION if representation_head else 0,
    }
    assert count_params(model) == 270


def test_a_word_student_has_no_count_with_the_teacher_vocabulary():
    from distil.students import param_counts

    model = build_student(student_cfg("rnn", embedding_dim=E, hidden_size=H), vocab_size=V, num_labels=C,
                          task=get_task("classification"))
    assert param_counts(model, teacher_vocab_size=None)["full_teacher_vocab"] is None
    assert param_counts(model, teacher_vocab_size=None)["deployed"] == 270
