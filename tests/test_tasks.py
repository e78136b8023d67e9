"""Pairs and multilingual NER: loaders, splits, wordpiece alignment, scores, and bad input."""

import pytest
import torch
from omegaconf import OmegaConf
from transformers import BertTokenizer

from distil.config.schema import CONF_DIR, DatasetConfig, TransferSizeConfig
from distil.data.conll import read_conll
from distil.errors import DistilError
from distil.tasks import get_task, make_task
from distil.tasks.tagging import IGNORE
from distil.teacher.load import TINY_VOCAB
from tests.conftest import raw_splits_of, task_data_of

ALL = OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": "all"})


def dataset(name, **overrides):
    raw = OmegaConf.load(CONF_DIR / "dataset" / f"{name}.yaml")
    raw.pop("defaults", None)  # Hydra's own key (the dataset's default transfer size)
    return OmegaConf.merge(OmegaConf.structured(DatasetConfig), raw, overrides)


@pytest.fixture(scope="module")
def tokenizer():
    return BertTokenizer(vocab={w: i for i, w in enumerate(TINY_VOCAB)})


# --- loaders ----------------------------------------------------------------------------

def test_conll_reader(tmp_path):
    path = tmp_path / "a.txt"
    path.write_text("-DOCSTART- O\n\nJohn NNP B-PER\nlives VBZ O\n\nParis NNP B-LOC\n")
    assert read_conll(path) == {"tokens": [["John", "lives"], ["Paris"]], "tags": [["B-PER", "O"], ["B-LOC"]]}


def test_conll_malformed_line_names_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("John B-PER\nlives O\nbroken\n")
    with pytest.raises(DistilError, match=r"bad.txt:3: malformed CoNLL line 'broken'"):
        read_conll(path)


def test_multilingual_ner_splits_per_language():
    data = task_data_of(dataset("toy-ner"), ALL, ".", seed=1)
    assert data.task.name == "tagging" and data.languages == ["aa", "bb"]
    labeled_languages = data.splits["labeled"]["language"][:]
    assert labeled_languages.count("aa") == 10 and labeled_languages.count("bb") == 10
    assert len(data.splits["transfer"]) == 20
    assert all(t == -1 for tags in data.splits["transfer"]["tags"][:] for t in tags)


def test_eval_cap_per_language_is_fixed_across_seeds():
    cfg = dataset("toy-ner", split={"max_eval_per_language": 3})
    one, two = (task_data_of(cfg, ALL, ".", seed=s) for s in (1, 2))
    assert len(one.splits["test"]) == 6
    assert one.fingerprint("dev", "test") == two.fingerprint("dev", "test")


def test_pair_keeps_two_texts():
    data = task_data_of(dataset("toy-pair"), ALL, ".", seed=1)
    row = data.splits["labeled"][0]
    assert row["text"] and row["text_pair"] and row["label"] in (0, 1)


@pytest.mark.parametrize("fmt", ["csv", "tsv", "jsonl", "parquet"])
def test_tabular_formats(tmp_path, fmt):
    import datasets

    rows = {"sentence": [f"s {i}" for i in range(8)], "y": ["a", "b"] * 4}
    ds = datasets.Dataset.from_dict(rows)
    writers = {"csv": lambda path: ds.to_csv(path, index=False),
               "tsv": lambda path: ds.to_csv(path, index=False, sep="\t"),
               "jsonl": ds.to_json, "parquet": ds.to_parquet}
    for split in ("train", "test"):
        writers[fmt](str(tmp_path / f"{split}.{fmt}"))
    cfg = OmegaConf.merge(OmegaConf.structured(DatasetConfig), {
        "name": "t", "format": fmt, "path": str(tmp_path), "text_column": "sentence", "label_column": "y",
        "files": {"train": f"train.{fmt}", "test": f"test.{fmt}"}})
    splits = raw_splits_of(cfg, ".")
    assert splits["train"]["label"][:] == rows["y"] and splits["test"]["text"][0] == "s 0"


def test_transfer_from_the_unlabeled_file(tmp_path):
    (tmp_path / "extra.txt").write_text("one more\n\nand another\nthird line\n")
    cfg = dataset("toy", path=str(tmp_path), unlabeled_file="extra.txt")
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.tsv").write_text((CONF_DIR.parent / "resources/toy" / f"{split}.tsv").read_text())
    source = OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": "file", "source": "file"})
    data = task_data_of(cfg, source, ".", seed=1)
    assert data.splits["transfer"]["text"][:] == ["one more", "and another", "third line"]


def test_a_tagging_task_reads_its_transfer_sentences_from_the_unlabeled_file(tmp_path):
    """One sentence per line, split at whitespace; `<language><TAB>` names its language, a bare line
    is the first language's; every word gets the NO_LABEL tag."""
    import shutil

    shutil.copytree(CONF_DIR.parent / "resources" / "toy-ner", tmp_path, dirs_exist_ok=True)
    (tmp_path / "extra.txt").write_text("Ann  works here\nbb\tBob went\n\naa\tCarl\n")
    cfg = dataset("toy-ner", path=str(tmp_path), unlabeled_file="extra.txt")
    source = OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": "file", "source": "file"})
    transfer = task_data_of(cfg, source, ".", seed=1).splits["transfer"]
    rows = sorted(zip(transfer["tokens"][:], transfer["language"][:], transfer["tags"][:], strict=True))
    assert rows == [(["Ann", "works", "here"], "aa", [-1, -1, -1]), (["Bob", "went"], "bb", [-1, -1]),
                    (["Carl"], "aa", [-1])]


def test_an_unlabeled_line_in_a_language_the_run_does_not_have_names_the_line(tmp_path):
    import shutil

    shutil.copytree(CONF_DIR.parent / "resources" / "toy-ner", tmp_path, dirs_exist_ok=True)
    (tmp_path / "extra.txt").write_text("aa\tfine\nzz\tnot here\n")
    cfg = dataset("toy-ner", path=str(tmp_path), unlabeled_file="extra.txt")
    source = OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": "file", "source": "file"})
    with pytest.raises(DistilError, match=r"extra.txt line 2 is in language 'zz', which is not one of "
                                          r"dataset.languages \(aa, bb\)"):
        task_data_of(cfg, source, ".", seed=1)


# --- wordpiece alignment and scores -----------------------------------------------------

def test_tagging_alignment_marks_continuations_x(tokenizer):
    import datasets

    ds = datasets.Dataset.from_dict({"tokens": [["ab", "c"]], "tags": [[1, 0]], "language": [""]})
    names = [f"T{i}" for i in range(7)]  # 7 tags: 'X' is label 7
    enc = get_task("tagging").prepare("test", tokenizer, ds, max_length=16, names=names)
    # [CLS] a ##b c [SEP]
    assert enc.labels[0].tolist() == [IGNORE, 1, 7, 0, IGNORE]
    assert enc.word_starts[0].tolist() == [1, 3]
    truncated = get_task("tagging").prepare("test", tokenizer, ds, max_length=3, names=names)  # [CLS] a [SEP]
    assert truncated.word_starts[0].tolist() == [1, -1]


def test_pair_encoding_is_one_sequence(tokenizer):
    import datasets

    ds = datasets.Dataset.from_dict({"text": ["ab"], "text_pair": ["c"], "label": [0]})
    prepared = get_task("pair").prepare("test", tokenizer, ds, max_length=16, names=["no", "yes"])
    assert tokenizer.convert_ids_to_tokens(prepared.ids[0]) == ["[CLS]", "a", "##b", "[SEP]", "c", "[SEP]"]
    first, second = prepared.pair[0]  # each sentence alone, for siamese students
    assert tokenizer.convert_ids_to_tokens(first) == ["[CLS]", "a", "##b", "[SEP]"]
    assert tokenizer.convert_ids_to_tokens(second) == ["[CLS]", "c", "[SEP]"]


def test_seqeval_f1_per_language_with_mean_and_std(tokenizer):
    import datasets

    names = ["O", "B-PER", "I-PER"]
    ds = datasets.Dataset.from_dict({"tokens": [["ab", "c"], ["d"]], "tags": [[1, 0], [1]],
                                     "language": ["aa", "bb"]})
    tagging = get_task("tagging")
    enc = tagging.prepare("test", tokenizer, ds, max_length=16, names=names)

    def logits_for(choices):
        rows = []
        for ids, picks in zip(enc.ids, choices, strict=True):
            row = torch.zeros(len(ids), 4)
            for position, label in picks.items():
                row[position, label] = 5.0
            rows.append(row)
        return rows

    perfect = logits_for([{1: 1, 2: 3, 3: 0}, {1: 1}])
    result = tagging.score(perfect, enc, names)
    assert result == {"f1": 1.0, "f1_std": 0.0, "per_language": {"aa": 1.0, "bb": 1.0}}
    # 'X' predicted at a word start counts as 'O': language bb loses its only entity
    half = logits_for([{1: 1, 2: 3, 3: 0}, {1: 3}])
    result = tagging.score(half, enc, names)
    assert result["per_language"] == {"aa": 1.0, "bb": 0.0}
    assert result["f1"] == pytest.approx(0.5) and result["f1_std"] == pytest.approx(0.5)


# --- bad input --------------------------------------------------------------------------

def test_unknown_language_lists_the_available_ones():
    with pytest.raises(DistilError, match="no data for language 'xx'.*languages here: aa, bb"):
        task_data_of(dataset("toy-ner", languages=["aa", "xx"]), ALL, ".", seed=1)


def test_labeled_per_language_larger_than_a_language():
    with pytest.raises(DistilError, match="language 'aa' has 20 training examples, fewer than labeled_per_language=50"):
        task_data_of(dataset("toy-ner", split={"labeled_per_language": 50}), ALL, ".", seed=1)


def test_tag_outside_the_label_set():
    with pytest.raises(DistilError, match=r"train split has tags \['B-LOC'.*outside the tag set"):
        task_data_of(dataset("toy-ner", labels=["O", "B-PER", "I-PER", "B-ORG", "I-ORG"]), ALL, ".", seed=1)


def test_missing_local_copy_with_offline_hub():
    with pytest.raises(DistilError, match="no local copy at .* and the hub is offline"):
        task_data_of(dataset("wikiann"), ALL, "/nonexistent", seed=1)


def test_pair_dataset_needs_its_second_column():
    with pytest.raises(DistilError, match="has no column 'second'; set dataset.text_pair_column"):
        task_data_of(dataset("toy-pair", text_pair_column="second"), ALL, ".", seed=1)


def test_majority_baseline_takes_the_majority_class_from_dev(tokenizer):
    import datasets

    def split(labels):
        ds = datasets.Dataset.from_dict({"text": ["a"] * len(labels), "label": labels, "language": [""] * len(labels)})
        return get_task("classification").prepare("x", tokenizer, ds, 16, ["n", "y"])

    # class 1 dominates dev, so the baseline always predicts 1: right on 3 of 4 test examples
    baseline = get_task("classification").baseline(split([1, 1, 0]), split([1, 0, 1, 1]), ["n", "y"])
    assert baseline == {"accuracy": pytest.approx(0.75)}


def test_hub_path_maps_class_label_ids_to_names(tmp_path):
    """The hub branch, exercised offline: load_dataset also takes a local directory."""
    import datasets

    features = datasets.Features({"sentence": datasets.Value("string"),
                                  "label": datasets.ClassLabel(names=["neg", "pos"])})
    for split in ("train", "test"):
        ds = datasets.Dataset.from_dict({"sentence": [f"{split} {i}" for i in range(6)], "label": [0, 1] * 3},
                                        features=features)
        ds.to_parquet(str(tmp_path / f"{split}.parquet"))
    cfg = OmegaConf.merge(OmegaConf.structured(DatasetConfig), {
        "name": "hubby", "path": None, "text_column": "sentence",
        "hub": {"name": str(tmp_path), "splits": {"train": "train", "test": "test"}}})
    with pytest.raises(DistilError, match="the hub is offline"):
        raw_splits_of(cfg, ".", hub_offline=True)
    splits = raw_splits_of(cfg, ".", hub_offline=False)
    assert splits["train"]["label"][:] == ["neg", "pos"] * 3
    assert splits["test"]["text"][0] == "test 0"


def test_teacher_prediction_variance_as_mukherjee_table9():
    """Var<p_1(x_i) .. p_C(x_i)> averaged over examples, read chunk by chunk, beside its maximum."""
    classification = get_task("classification")
    confident, unsure = torch.tensor([[50.0, -50.0]]), torch.tensor([[0.0, 0.0]])
    # (1, 0) has variance 1/4, (1/2, 1/2) has 0: the mean over the two examples is 1/8
    assert classification.diagnostics(iter([confident, unsure])) == {
        "prediction_variance": pytest.approx(0.125), "max_prediction_variance": 0.25}
    # the maxima of Table 9: 0.250 (2 classes), 0.188 (AG News, 4), 0.066 (DBpedia, 14)
    for classes, table9 in ((4, 0.188), (14, 0.066)):
        one_hot = torch.nn.functional.one_hot(torch.tensor([0]), classes).float() * 100
        result = classification.diagnostics(iter([one_hot]))
        assert round(result["max_prediction_variance"] + 1e-12, 3) == table9  # Table 9 rounds to 3 places
        assert result["prediction_variance"] == pytest.approx(result["max_prediction_variance"])
    assert get_task("tagging").diagnostics(iter([torch.zeros(3, 5)])) == {}


# --- metrics per task as the papers report them ------------------------

class Predicted:
    """The part of a prepared split that class scoring reads."""

    def __init__(self, gold, languages=None):
        self.labels = torch.tensor(gold)
        self.languages = __import__("numpy").asarray(languages or [""] * len(gold))


def one_hot(predicted, classes=2):
    return torch.nn.functional.one_hot(torch.tensor(predicted), classes).float()


# gold 1 1 1 1 0 0 0 0 0 0 against predicted 1 1 0 0 1 0 0 0 0 0: TP 2, FN 2, FP 1, TN 5
GOLD = [1, 1, 1, 1, 0, 0, 0, 0, 0, 0]
GUESS = [1, 1, 0, 0, 1, 0, 0, 0, 0, 0]


def scoring_task(**settings):
    return make_task(dataset("toy-pair", **settings))


def test_f1_of_the_positive_class_against_a_hand_computed_confusion_matrix():
    # positive "1": precision 2/3, recall 2/4, F1 = 2PR / (P + R) = 4/7
    scores = scoring_task(positive_label="1").score(one_hot(GUESS), Predicted(GOLD), ["0", "1"])
    assert scores == {"accuracy": pytest.approx(0.7), "f1": pytest.approx(4 / 7)}
    # positive "0": TP 5, FP 2, FN 1: precision 5/7, recall 5/6, F1 = 10/13
    scores = scoring_task(positive_label="0").score(one_hot(GUESS), Predicted(GOLD), ["0", "1"])
    assert scores["f1"] == pytest.approx(10 / 13)


def test_matthews_correlation_binary_and_multiclass_by_hand():
    task = scoring_task(positive_label="1", metrics=["accuracy", "f1", "mcc"])
    # (TP TN - FP FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (10 - 2) / sqrt(3 * 4 * 6 * 7)
    scores = task.score(one_hot(GUESS), Predicted(GOLD), ["0", "1"])
    assert list(scores) == ["accuracy", "f1", "mcc"]
    assert scores["mcc"] == pytest.approx(8 / 504 ** 0.5)
    # three classes (Gorodkin's R_K): gold 0 0 1 1 2 2, predicted 0 1 1 1 2 0: 4 right of 6,
    # true counts t = 2 2 2, predicted counts p = 2 3 1: (4*6 - sum p t) / sqrt((36 - sum p^2)(36 - sum t^2))
    three = make_task(dataset("toy", metrics=["mcc"]))
    scores = three.score(one_hot([0, 1, 1, 1, 2, 0], 3), Predicted([0, 0, 1, 1, 2, 2]), ["a", "b", "c"])
    assert scores["mcc"] == pytest.approx((24 - 12) / (22 * 24) ** 0.5)
    # one class predicted throughout: the correlation is undefined, reported as 0 (no skill)
    assert three.score(one_hot([1] * 6, 3), Predicted([0, 0, 1, 1, 2, 2]), ["a", "b", "c"])["mcc"] == 0.0


def test_primary_metric_comes_first_and_per_language_scores_it():
    task = scoring_task(positive_label="1", metric="f1")
    assert (task.metric, task.metrics) == ("f1", ["f1", "accuracy"])
    languages = ["aa"] * 5 + ["bb"] * 5  # aa: gold 1 1 1 1 0, predicted 1 1 0 0 1: F1 = 2*2 / (2*2 + 1 + 2)
    scores = task.score(one_hot(GUESS), Predicted(GOLD, languages), ["0", "1"])
    assert scores["per_language"] == {"aa": pytest.approx(4 / 7), "bb": 0.0}


def test_majority_baseline_scores_every_reported_metric(tokenizer):
    import datasets

    def split(labels):
        ds = datasets.Dataset.from_dict({"text": ["a"] * len(labels), "text_pair": ["b"] * len(labels),
                                         "label": labels, "language": [""] * len(labels)})
        return get_task("pair").prepare("x", tokenizer, ds, 16, ["0", "1"])

    # always "1" on test 1 0 1 1: precision 3/4, recall 1, F1 6/7
    baseline = scoring_task(positive_label="1").baseline(split([1, 1, 0]), split([1, 0, 1, 1]), ["0", "1"])
    assert baseline == {"accuracy": pytest.approx(0.75), "f1": pytest.approx(6 / 7)}


def test_shipped_pair_datasets_name_their_positive_class():
    assert dataset("mrpc").positive_label == "1" and dataset("qqp").positive_label == "1"
    assert make_task(dataset("mrpc")).metrics == ["accuracy", "f1"]


@pytest.mark.parametrize("settings,message", [
    ({"metrics": ["accuracy", "auc"]}, r"dataset 'toy-pair': unknown metric 'auc' for a pair task; "
                                       r"choose from: accuracy, f1, mcc$"),
    ({"metric": "pearson"}, r"unknown metric 'pearson' for a pair task; choose from: accuracy, f1, mcc"),
    ({"metrics": ["f1"], "positive_label": None},
     r"metric f1 is the F1 of dataset.positive_label; set it to the positive class"),
])
def test_bad_metric_settings_are_one_line_errors(settings, message):
    with pytest.raises(DistilError, match=message):
        scoring_task(**settings)


def test_metric_names_are_per_task():
    with pytest.raises(DistilError, match=r"unknown metric 'accuracy' for a tagging task; choose from: f1$"):
        make_task(dataset("toy-ner", metric="accuracy"))
    with pytest.raises(DistilError, match=r"positive_label applies to classification and pair data"):
        make_task(dataset("toy-sts", positive_label="1"))
    assert make_task(dataset("toy-sts", metric="spearman")).metrics == ["spearman", "pearson"]


def test_positive_label_outside_the_labels():
    with pytest.raises(DistilError, match=r"positive_label 'yes' is not one of its labels \['0', '1'\]"):
        task_data_of(dataset("toy-pair", positive_label="yes"), ALL, ".", seed=1)


def test_the_metric_that_selects_the_teacher_is_part_of_its_cache_key():
    """Fine-tuning keeps the teacher's best dev epoch by the dataset's metric: a teacher chosen
    on accuracy is not the one `metric: f1` asks for."""
    from distil.teacher.finetune import teacher_spec
    from tests.conftest import compose_config

    teacher = compose_config("debug=smoke").teacher
    on_accuracy, on_f1 = (task_data_of(dataset("toy-pair", metric=metric), ALL, ".", seed=1)
                          for metric in ("accuracy", "f1"))
    assert teacher_spec(teacher, on_accuracy, 1) != teacher_spec(teacher, on_f1, 1)
