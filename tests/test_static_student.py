"""The static-embedding student (model2vec-style) and its model2vec initialisation.

Each equation is checked against numbers computed here by hand or by an independent library
(scikit-learn's PCA, transformers' BertModel run on the sequences model2vec builds).
"""

from __future__ import annotations

import json

import pytest
import torch
from sklearn.decomposition import PCA
from transformers import BertConfig, BertModel, BertTokenizerFast

from distil.data.batching import model_inputs
from distil.errors import DistilError
from distil.students.embeddings import check_embedding_init, initial_embeddings, sif_weights
from distil.students.heads import WithRepresentation
from distil.students.static import StaticStudent, bag_means, with_context
from distil.teacher.token_vectors import token_output_vectors
from tests.test_cli import distil_in_process


def static(inputs: str, mlp: int = 0, window: int = 0, dim: int = 2, labels: int = 2) -> StaticStudent:
    torch.manual_seed(0)
    return StaticStudent(vocab_size=10, embedding_dim=dim, num_labels=labels, dropout=0.0, mlp_hidden_size=mlp,
                         inputs=inputs, context_window=window).eval()


def set_rows(model: StaticStudent, rows: dict[int, list[float]]) -> None:
    with torch.no_grad():
        for row, values in rows.items():
            model.embedding.weight[row] = torch.tensor(values)


def test_text_logits_are_the_relu_layer_of_the_mean_of_the_real_tokens():
    model = static("text", mlp=2)
    set_rows(model, {3: [1.0, 2.0], 4: [3.0, -2.0], 5: [2.0, 6.0]})
    with torch.no_grad():
        linear, output = model.mlp[1], model.classifier
        linear.weight.copy_(torch.tensor([[1.0, 0.0], [0.0, -1.0]]))
        linear.bias.copy_(torch.tensor([0.0, 1.0]))
        output.weight.copy_(torch.tensor([[1.0, 1.0], [2.0, -1.0]]))
        output.bias.copy_(torch.tensor([0.5, 0.0]))
    # mean of rows 3, 4, 5 = (2, 2); ReLU layer: relu(2, -2 + 1) = (2, 0); output: (2.5, 4)
    logits = model(*model_inputs([[3, 4, 5], [3, 4, 5, 0, 0, 0], [3]]))["logits"]
    torch.testing.assert_close(logits[0], torch.tensor([2.5, 4.0]))
    # row 3 alone: (1, 2) -> relu(1, -1) = (1, 0) -> (1.5, 2)
    torch.testing.assert_close(logits[2], torch.tensor([1.5, 2.0]))


def test_pair_features_are_u_v_their_absolute_difference_and_product():
    model = static("pair", labels=8)  # no ReLU layer: the classifier reads the 8 features directly
    set_rows(model, {3: [1.0, 2.0], 4: [3.0, 0.0], 5: [-1.0, 4.0]})
    with torch.no_grad():
        model.classifier.weight.copy_(torch.eye(8))
        model.classifier.bias.zero_()
    out = model(*model_inputs([([3, 4], [5])]))
    u, v = [2.0, 1.0], [-1.0, 4.0]
    torch.testing.assert_close(out["logits"][0], torch.tensor([*u, *v, 3.0, 3.0, -2.0, 4.0]))
    torch.testing.assert_close(out["sentences"][0], torch.tensor([u, v]))  # each sentence's own vector


def test_serving_follows_a_layer_replaced_after_the_first_request():
    """forward_bags reads the layers' parameters directly (no module call); a classifier swapped in
    after a first request is the one served next, not the one looked up then."""
    model = static("text", mlp=0, dim=4).eval()
    bags = (torch.tensor([2, 3]), torch.zeros(1, dtype=torch.long))
    model.forward_bags(*bags)
    model.classifier = torch.nn.Linear(4, model.classifier.out_features)
    torch.testing.assert_close(model.forward_bags(*bags)["logits"], model(*model_inputs([[2, 3]]))["logits"])


@pytest.mark.parametrize("inputs,projection,mlp", [("text", None, 3), ("pair", None, 3), ("text", "path", 3),
                                                   ("pair", "side", 3), ("text", None, 0), ("text", "side", 0),
                                                   ("pair", None, 0)])
def test_bags_of_wordpieces_give_the_padded_batches_logits(inputs, projection, mlp):
    """Serving (forward_bags, or a folded table: ids laid end to end + offsets) computes what training's
    padded forward does, also through a projection to the teacher's width in the path (d4.2) or
    beside it (side), and for a linear model on the mean (mlp 0), whose classifier a server folds
    into the table (folded_classifier)."""
    model = static(inputs, mlp=mlp, dim=4)
    if projection:
        model = WithRepresentation(model, teacher_hidden_size=5, place=projection).eval()
    sentences = [[2, 3, 4], [5], [6, 7, 8, 9, 2], [3, 3]]
    if inputs == "text":
        padded = model(*model_inputs(sentences))["logits"]
        columns = [sentences]
    else:
        padded = model(*model_inputs(list(zip(sentences, sentences[::-1], strict=True))))["logits"]
        columns = [sentences, sentences[::-1]]
    bags = []
    for column in columns:
        lengths = torch.tensor([len(s) for s in column])
        bags += [torch.tensor([t for s in column for t in s]), torch.cat([torch.zeros(1, dtype=torch.long),
                                                                           lengths.cumsum(0)[:-1]])]
    folded = model.folded_classifier()
    assert (folded is not None) == (mlp == 0 and inputs == "text" and projection != "path")
    one_request = model.one_request() if isinstance(model, StaticStudent) else None  # a wrapped one keeps torch
    assert (one_request is not None) == (inputs == "text" and projection is None)
    torch.testing.assert_close(model.forward_bags(*bags)["logits"], padded)
    if folded:
        torch.testing.assert_close(bag_means(folded[0], *bags) + folded[1], padded)
    for row in range(len(sentences)):  # one sentence per call, as a single request is served
        alone = [torch.tensor(column[row]) for column in columns]
        bags = [part for ids in alone for part in (ids, torch.zeros(1, dtype=torch.long))]
        torch.testing.assert_close(model.forward_bags(*bags)["logits"], padded[row:row + 1])
        if folded:
            torch.testing.assert_close(bag_means(folded[0], *bags) + folded[1], padded[row:row + 1])
        if one_request:  # the numpy forward a server answers one request with
            torch.testing.assert_close(torch.from_numpy(one_request(alone[0].numpy())), padded[row:row + 1])


def test_a_tagger_reads_its_neighbours_and_zeros_beyond_the_sentence():
    vectors = torch.tensor([[[1.0], [2.0], [3.0], [9.0]]])  # one sentence of 3 tokens, then padding
    mask = torch.tensor([[1, 1, 1, 0]])
    expected = torch.tensor([[[0.0, 1.0, 2.0], [1.0, 2.0, 3.0], [2.0, 3.0, 0.0], [3.0, 0.0, 0.0]]])
    torch.testing.assert_close(with_context(vectors, mask, 1), expected)
    model = static("tokens", window=1, dim=1, labels=3)
    assert model(*model_inputs([[3, 4, 5]]))["logits"].shape == (1, 3, 3)


def test_sif_weights_follow_zipf_over_the_vocabulary_order_without_unused_tokens():
    tokens = ["[PAD]", "[unused0]", "[unused1]", "[UNK]", "the", "film"]
    # ranks without [unusedN]: [PAD] 0, [UNK] 1, the 2, film 3; p(r) = (1 / (r + 2)) / (1/2 + 1/3 + 1/4 + 1/5)
    total = 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5
    p_the, p_film = (1 / 4) / total, (1 / 5) / total
    weights = sif_weights([4, 5], tokens, 0.1)
    torch.testing.assert_close(weights, torch.tensor([0.1 / (0.1 + p_the), 0.1 / (0.1 + p_film)],
                                                     dtype=torch.float64))


def test_model2vec_init_is_pca_of_the_teacher_vectors_then_sif():
    generator = torch.Generator().manual_seed(0)
    outputs = torch.randn(6, 5, generator=generator, dtype=torch.float64) * torch.tensor([5.0, 3, 1, 0.5, 0.1],
                                                                                       dtype=torch.float64)
    ids = [10, 11, 12, 13, 14, 15]
    tokens = [f"t{i}" for i in range(20)]
    weights = initial_embeddings("model2vec", 2, ids, teacher_tokens=tokens, token_vectors=lambda asked: outputs,
                                 sif_coefficient=1e-2)
    reduced = torch.from_numpy(PCA(n_components=2, svd_solver="full").fit_transform(outputs.numpy()))
    expected = reduced * sif_weights(ids, tokens, 1e-2).unsqueeze(1)
    rows = weights[2:].double()
    signs = torch.sign((rows * expected).sum(dim=0))  # PCA's sign per component is a convention
    torch.testing.assert_close(rows, expected * signs, atol=1e-5, rtol=1e-5)
    assert weights[0].abs().sum() == 0  # [PAD]
    torch.testing.assert_close(weights[1], weights[2:].mean(dim=0))  # [UNK]: the mean of the rows


def test_token_vectors_are_the_mean_of_the_encoder_over_sep_token_cls(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good"]
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    tokenizer = BertTokenizerFast(str(tmp_path / "vocab.txt"))
    torch.manual_seed(0)
    model = BertModel(BertConfig(vocab_size=len(vocab), hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                                 intermediate_size=16)).eval()
    vectors = token_output_vectors(model, tokenizer, [5, 8], batch_size=1)
    for row, token in enumerate([5, 8]):
        sequence = torch.tensor([[3, token, 2]])  # [SEP] token [CLS], model2vec's order
        with torch.no_grad():
            expected = model(input_ids=sequence).last_hidden_state[0].mean(dim=0)
        torch.testing.assert_close(vectors[row], expected)


@pytest.mark.parametrize("dim,words,message", [
    (40, False, "student.embedding_init=model2vec: embedding_dim 40 is larger than the teacher's hidden size 32; "
                "lower student.embedding_dim to at most 32"),
    (16, True, "student.embedding_init=model2vec reduces the teacher's wordpiece vectors, but this student reads "
               "whitespace words; use random or file"),
])
def test_model2vec_init_that_cannot_work_is_one_line_before_training(dim, words, message):
    with pytest.raises(DistilError) as error:
        check_embedding_init("model2vec", dim, 32, None, words)
    assert str(error.value) == message


@pytest.mark.parametrize("args,message", [
    (["student=tang", "student.mlp_hidden_size=0"],
     "student 'tang' classifies through a ReLU layer of student.mlp_hidden_size units, and 0 leaves it none; set "
     "student.mlp_hidden_size to 1 or more (Tang: 200 or 400)"),
    (["student=static", "dataset=toy-pair", "schedule=d4.2"],
     "schedule.projection=path puts the projection under the classifier, but StaticStudent projects each sentence "
     "of a pair apart while its classifier reads both; use schedule.projection=side"),
], ids=["no-relu-layer", "path-on-pairs-apart"])
def test_a_student_that_cannot_be_built_is_one_line(tmp_path, monkeypatch, capsys, args, message):
    from tests.test_errors import one_line_error

    assert one_line_error(args, tmp_path, monkeypatch, capsys) == f"distil: error: {message}"


# one task in the default suite; pairs and tagging (the same path) with the slow tests
@pytest.mark.parametrize("dataset,schedule", [("toy", "d3.2"), pytest.param("toy-pair", "d1", marks=pytest.mark.slow),
                                              pytest.param("toy-ner", "d4.1", marks=pytest.mark.slow)])
def test_static_student_runs_end_to_end(tmp_path, monkeypatch, capsys, dataset, schedule):
    """The CLI's main: text with gradual unfreezing and representations, pairs, tagging."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    code, _, err = distil_in_process(["debug=smoke", "student=static", f"dataset={dataset}", f"schedule={schedule}",
                            "student.embedding_dim=16", "student.mlp_hidden_size=8"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok" and metrics["choices"]["student"] == "static"
    if dataset != "toy-ner":
        served_as_trained(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent / "student")
    steps = [stage.get("step") for stage in metrics["student"]["stages"]]
    if schedule == "d3.2":  # gradual unfreezing walks the static student's own layers, top first
        assert steps == ["projection", "mlp", "embeddings", "classifier", "projection", "mlp", "embeddings"], steps


def test_a_word_level_linear_static_student_serves_as_it_was_trained(tmp_path, monkeypatch, capsys):
    """student=static-words: whitespace words, a linear model on their mean, served from its folded
    table (folded_classifier); its served logits are the padded training path's, one text or many."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    code, _, err = distil_in_process(["debug=smoke", "student=static-words", "dataset=toy", "schedule=d1",
                                      "student.embedding_dim=16"], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    directory = next((tmp_path / "outputs" / "runs").rglob("metrics.json")).parent / "student"
    config = json.loads((directory / "config.json").read_text())["student"]
    assert (config["tokens"], config["mlp_hidden_size"]) == ("words", 0)
    from distil.serve.student import SavedStudent

    saved = SavedStudent(directory)
    assert saved.folded is not None  # served from the folded table
    # one request is served from the table's rows by word (WordRows), in Python: the words are its inputs
    assert saved.encode_batch(["A fine  film"]) == (["a", "fine", "film"],)
    table, bias = saved.folded
    empty_bag = torch.nn.functional.embedding_bag(torch.zeros(0, dtype=torch.int64), table,
                                                  torch.zeros(1, dtype=torch.int64), mode="mean") + bias
    torch.testing.assert_close(saved.logits(([],)), empty_bag)  # no words: the bias, as an empty bag gives
    served_as_trained(directory)


def served_as_trained(directory):
    """The saved student serves batches as bags of wordpieces from the Rust tokenizer; its logits are
    those of the path it was trained and evaluated on (the transformers tokenizer, padded batches),
    truncation, accents, unseen wordpieces and pairs included."""
    from distil.serve.student import SavedStudent
    from distil.students import reads_words
    from distil.tasks.text import encode_user_texts

    saved = SavedStudent(directory)
    assert saved.bags
    texts = ["a fine film", "dull and long " * 80, "Über café naïve, 東京", "zyzzyva qwxq", "x"]
    pair = saved.task.inputs == "pair"
    if pair:
        texts = [f"{a} ||| {b}" for a, b in zip(texts, texts[::-1], strict=True)]
    if reads_words(saved.cfg):  # student.tokens=words: lower-cased whitespace words
        ids = [text.lower().split()[:saved.config["max_length"]] for text in texts]
    else:
        ids = encode_user_texts(saved.tokenizer, texts, saved.config["max_length"], pair, apart=True)
    padded = model_inputs([tuple(saved.vocab.map(part) for part in example) if pair else saved.vocab.map(example)
                           for example in ids])
    with torch.inference_mode():
        expected = saved.model(*padded)["logits"]
        torch.testing.assert_close(saved.logits(saved.encode_batch(texts)), expected)
        for row, text in enumerate(texts):  # one request at a time, as single-text latency is timed
            torch.testing.assert_close(saved.logits(saved.encode_batch([text])), expected[row:row + 1])
    assert max(map(len, ids if not pair else [a for a, _ in ids])) == saved.config["max_length"]  # truncated

