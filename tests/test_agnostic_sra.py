"""Wu et al.'s task-agnostic SRA: the pre-trained teacher's sentence vectors (eq. 1's T_x), the
distilled student as an artifact every task reuses, and fine-tuning starting from it."""

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import BertConfig, BertModel

from distil.pretrain.sra import load_agnostic, sentence_vectors
from distil.students.pretrained import PretrainedStart
from distil.students.sra import SRAStudent
from distil.students.vocab import PAD, UNK, TrimmedVocab


def test_teacher_sentence_vector_is_cls_or_the_mean_over_real_wordpieces():
    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                                   intermediate_size=32)).eval()
    ids = [[2, 7, 9, 3], [2, 11, 3]]
    cls = sentence_vectors(encoder, ids, 0, "cls")
    mean = sentence_vectors(encoder, ids, 0, "mean")
    for row, sentence in enumerate(ids):  # each sentence alone, no padding: the reference
        states = encoder(input_ids=torch.tensor([sentence])).last_hidden_state[0]
        assert torch.allclose(cls[row], states[0], atol=1e-5)
        assert torch.allclose(mean[row], states.mean(0), atol=1e-5)


def test_untuned_teacher_rows_read_each_sentence_list_once_for_both_poolings(tmp_path):
    """Table 5's [CLS] and averaged rows score the same pairs: one encoder pass serves both, and
    each pooling is the one sentence_vectors gives on its own."""
    from transformers import BertTokenizerFast

    from distil.papers.wu_table5 import teacher_encoders

    torch.manual_seed(0)
    encoder = BertModel(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=1,
                                   intermediate_size=32)).eval()
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "cat", "dog", "sat", "ran"]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("\n".join(tokens))
    tokenizer = BertTokenizerFast(vocab_file=str(vocab_file))
    passes = []
    encoder.register_forward_hook(lambda module, args, output: passes.append(1))
    encode = teacher_encoders(encoder, tokenizer, max_length=16)
    texts = ["cat sat", "dog ran cat", "dog"]
    cls, mean = encode["cls"](texts), encode["mean"](texts)
    assert len(passes) == 1
    ids = tokenizer(texts)["input_ids"]
    assert torch.allclose(cls, sentence_vectors(encoder, ids, 0, "cls"), atol=1e-6)
    assert torch.allclose(mean, sentence_vectors(encoder, ids, 0, "mean"), atol=1e-6)
    assert not torch.allclose(cls, mean)


def test_fine_tuning_starts_from_the_agnostic_encoder_with_a_fresh_head():
    torch.manual_seed(0)
    agnostic = SRAStudent(12, 8, 6, 2, 0.0, 5, 4, pair=False)  # vocabulary: [PAD], [UNK], teacher ids 0..9
    weights = {k: v for k, v in agnostic.state_dict().items() if not k.startswith("classifier.")}
    start = PretrainedStart(weights, 1, 6, PAD, UNK, "test", embedding_key="encoder.embedding.weight", offset=2)
    vocab = TrimmedVocab([3, 7])
    task = SRAStudent(len(vocab), 8, 6, 3, 0.0, 5, 4, pair=True)  # a pair task, three classes
    head = {k: v.clone() for k, v in task.state_dict().items() if k.startswith("classifier.")}
    start.apply(task, vocab)
    state = task.state_dict()
    rows = weights["encoder.embedding.weight"]
    assert torch.equal(state["encoder.embedding.weight"], rows[[PAD, UNK, 3 + 2, 7 + 2]])
    assert torch.equal(state["to_sentence.weight"], weights["to_sentence.weight"])
    assert torch.equal(state["encoder.lstm.weight_hh_l0"], weights["encoder.lstm.weight_hh_l0"])
    assert all(torch.equal(state[k], v) for k, v in head.items())  # Wu §3.2: the MLP starts at random


def distil(tmp_path, corpus, monkeypatch, capsys, *args):
    """A run in process (the console script's own main), the agnostic stage set as the pretrain command's."""
    from tests.test_cli import distil_in_process

    return distil_in_process(["debug=smoke", f"paths.outputs={tmp_path / 'out'}", "student=sra",
                              f"agnostic.corpus={corpus}", "agnostic.batch_size=64", "agnostic.epochs=3", *args],
                             tmp_path, monkeypatch, capsys)


@pytest.mark.heavy
def test_one_command_builds_the_agnostic_student_and_two_tasks_reuse_it(tmp_path, monkeypatch, capsys):
    """`distil pretrain student=sra` builds it (its loss falls); a single-sentence task and a pair
    task then fine-tune it without running the teacher's vectors or the distillation again."""
    rng = random.Random(0)
    words = "the a cat dog sat ran on in park mat sun rose hill bird sang tree rain fell town".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(300)))
    from tests.test_cli import distil_in_process

    code, out, err = distil_in_process(["pretrain", "debug=smoke", "student=sra", f"paths.outputs={tmp_path / 'out'}",
                                        f"agnostic.corpus={corpus}", "agnostic.batch_size=64", "agnostic.epochs=3"],
                                       tmp_path, monkeypatch, capsys)
    assert code == 0, err[-2000:]
    assert "task-agnostic SRA student (Wu et al.): built" in out
    built = list((tmp_path / "out" / "cache" / "agnostic").iterdir())
    code, out, err = distil(tmp_path, corpus, monkeypatch, capsys, "schedule=wu-sra",
                            f"hydra.run.dir={tmp_path / 'single'}")
    assert code == 0, err[-2000:]
    assert "reusing task-agnostic SRA student" in err + out
    assert len(built) == 1
    history = json.loads((built[0] / "manifest.json").read_text())["info"]["history"]
    # the mean eq. 1 loss of each epoch on the 270 training lines and on the 30 held out, pinned
    # (deterministic on CPU; in length-bucketed batches, from the SVD-initialised embeddings that are
    # sra's default: student.embedding_init=random gave 0.43, 0.23, 0.11 and 0.312, 0.159, 0.069)
    assert [round(h["loss"], 2) for h in history] == [0.42, 0.24, 0.12]
    assert [round(h["validation_loss"], 3) for h in history] == [0.311, 0.164, 0.072]
    # the run says where its student started and how well the stage approximated the teacher
    single = json.loads((tmp_path / "single" / "metrics.json").read_text())
    pretrained = single["student"]["pretrained"]
    assert pretrained["source"] == f"agnostic/{built[0].name}"
    assert (pretrained["sentences"], round(pretrained["validation_loss"], 3)) == (270, 0.072)
    # read from the cache, with its build's seconds: what the findings count once (distil.tables.costs)
    manifest = json.loads((built[0] / "manifest.json").read_text())["info"]
    assert (pretrained["reused"], pretrained["seconds"]) == (True, manifest["seconds"])
    assert list(single["phases"]) == ["data", "teacher", "targets", "pretrained", "student"]
    weights = load_agnostic(built[0])

    def no_pretrained_teacher(*_args, **_kwargs):
        raise AssertionError("the pre-trained teacher was loaded although its agnostic student is built")
    # a task that finds the artifact never loads the pre-trained teacher's weights
    monkeypatch.setattr("distil.teacher.load.load_encoder", no_pretrained_teacher)
    code, out, err = distil(tmp_path, corpus, monkeypatch, capsys, "schedule=wu-sra-kd", "dataset=toy-pair",
                            f"hydra.run.dir={tmp_path / 'pair'}")
    assert code == 0, err[-2000:]
    assert "reusing task-agnostic SRA student" in err + out
    assert list((tmp_path / "out" / "cache" / "agnostic").iterdir()) == built
    assert torch.equal(load_agnostic(built[0])["to_sentence.weight"], weights["to_sentence.weight"])
    stages = json.loads((tmp_path / "pair" / "metrics.json").read_text())["student"]["stages"]
    assert list(stages[0]["losses"]) == ["ce", "logit_mse"] and stages[0]["data"] == ["labeled", "transfer"]


def test_untuned_threshold_is_chosen_on_dev_alone():
    """Dev's best threshold is 0.5 (dev accuracy 1.0); test's labels would prefer 0.85 (accuracy
    1.0 there), but the score uses dev's: test accuracy 0.5, F1 of the positive class 2/3."""
    import numpy as np

    from distil.papers.wu_table5 import evaluate

    vectors = {"a": [1.0, 0.0], "b": [0.6, 0.8], "c": [0.0, 1.0], "d": [0.8, 0.6], "e": [0.9, 0.436]}

    def encode(texts):
        return torch.tensor([vectors[t] for t in texts])

    # cos: a-b 0.6, a-c 0.0, a-d 0.8, a-e 0.9
    dev = (["a", "a"], ["b", "c"], np.array([True, False]))
    test = (["a", "a"], ["d", "e"], np.array([False, True]))
    result = evaluate(encode, dev, test)
    assert abs(result["threshold"] - 0.3) < 1e-6  # the midpoint of dev's cosines 0.0 and 0.6
    assert (result["dev_accuracy"], result["accuracy"]) == (1.0, 0.5)
    assert abs(result["f1"] - 2 / 3) < 1e-9


@pytest.mark.slow  # four smoke runs (~7 s)
def test_distil_untuned_writes_the_four_rows(tmp_path):
    rng = random.Random(0)
    words = "the a cat dog sat ran on in park mat sun rose hill bird sang tree rain fell town".split()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))) for _ in range(300)))
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "distil.cli.main", "paper", "wu-table5", "debug=smoke",
                          "dataset=toy-pair", f"agnostic.corpus={corpus}", "agnostic.batch_size=64",
                          f"paths.outputs={tmp_path / 'out'}",
                          "--out", str(tmp_path / "tables")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    # a quiet step of several minutes on the Quora pairs says what it is doing, in a log too
    logged = run.stdout + run.stderr
    assert "BiLSTM_KD (cosine) epoch 3/3: mean squared cosine error" in logged
    assert logged.count("threshold on dev") == 4
    import pandas as pd

    from distil.tables.load import load_preset
    from distil.tables.render import bench_samples

    frame = pd.read_csv(tmp_path / "tables" / "untuned.csv")
    assert frame["model"].tolist() == ["teacher (CLS)", "teacher (averaged)", "BiLSTM_KD (cosine)", "BiLSTM_SRA"]
    samples = bench_samples(load_preset("wu-table5"), tmp_path / "tables" / "untuned.csv")
    assert len(samples) == 8 and all(sample.error is None for sample in samples)


def test_untuned_refuses_a_task_without_pairs(tmp_path, monkeypatch, capsys):
    from distil.cli.paper import wu_table5 as main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["debug=smoke", "dataset=toy"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("distil paper wu-table5: error: distil paper wu-table5 scores sentence pairs")


FIX = ("<a text file with one sentence per line>, absolute or under paths.data_dir (now '{data}': run from the "
       "project directory or set paths.data_dir or DISTIL_DATA_DIR to the data directory)")


@pytest.mark.parametrize("args,message", [
    (["student=sra", "agnostic.corpus=no/such.txt"],
     "agnostic.corpus: {data}/no/such.txt does not exist; give agnostic.corpus=" + FIX),
    (["student=transformer-tiny", "pretrain.corpus=no/such.txt"],
     "pretrain.corpus: {data}/no/such.txt does not exist; give pretrain.corpus=" + FIX),
], ids=["sra", "mlm"])
def test_a_missing_corpus_names_its_own_setting_and_the_data_directory(tmp_path, monkeypatch, capsys, args, message):
    """The SRA stage and the MLM pre-training read their corpus with one reader: its error names the
    setting the user gave (not the other command's) and the data directory a relative path is read from."""
    from tests.test_cli import cache_files, distil_in_process

    data = tmp_path / "data"
    code, _, err = distil_in_process(["pretrain", "debug=smoke", f"paths.data_dir={data}", *args],
                                     tmp_path, monkeypatch, capsys)
    assert code == 2
    assert err.strip().splitlines()[-1] == "distil pretrain: error: " + message.format(data=data)
    assert cache_files(tmp_path / "outputs") == []


def test_a_pair_is_classified_from_wu_s_concatenate_compare():
    """Wu et al. §3.2: the MLP reads [H1, H2, |H1 - H2|, H1 ⊙ H2] of the two sentence vectors."""
    torch.manual_seed(0)
    student = SRAStudent(12, 8, 6, 2, 0.0, 5, 4, pair=True).eval()
    read = []
    student.classifier.register_forward_pre_hook(lambda module, args: read.append(args[0]))
    ids_a, ids_b = torch.tensor([[2, 3, 4]]), torch.tensor([[5, 6, 0]])
    mask_a, mask_b = torch.ones_like(ids_a), (ids_b != 0).long()
    out = student(ids_a, mask_a, ids_b, mask_b)
    h1, h2 = out["sentence"][0]
    torch.testing.assert_close(read[0][0], torch.cat([h1, h2, (h1 - h2).abs(), h1 * h2]))


def test_length_buckets_cover_every_row_once_in_batches_of_like_length():
    """An epoch of bucketed batches is still each row exactly once; a batch spans a narrow band
    of lengths (what it pads to), and the batches of a pool come in a random order."""
    from distil.data.batching import length_bucketed_batches

    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 65, size=1000)
    batches = length_bucketed_batches(lengths, 50, np.random.default_rng(1), pool_batches=10)
    assert sorted(np.concatenate(batches).tolist()) == list(range(1000))
    assert [len(b) for b in batches] == [50] * 20
    widest = max(int(lengths[b].max() - lengths[b].min()) for b in batches)
    assert widest <= 12  # a random batch of 50 spans nearly all of 1..64
    first_rows = [int(lengths[b].min()) for b in batches]
    assert first_rows != sorted(first_rows)
