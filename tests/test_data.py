"""Loading, deterministic splits, transfer sizes, and one clear error per kind of bad input."""

import pytest
from omegaconf import OmegaConf

from distil.config.schema import DatasetConfig, TransferSizeConfig
from distil.errors import DistilError
from tests.conftest import task_data_of


def dataset_cfg(**overrides):
    base = OmegaConf.structured(DatasetConfig)
    return OmegaConf.merge(base, {"name": "t", "format": "tsv", "path": ".", **overrides})


def transfer(name="all", **kw):
    return OmegaConf.merge(OmegaConf.structured(TransferSizeConfig), {"name": name, **kw})


def rows(n_per_class, classes=("a", "b"), split="train"):
    """Texts differ between splits: a dev or test text found in train would be dropped from the transfer set."""
    return [(f"{c} {split} example number {i}", c) for c in classes for i in range(n_per_class)]


@pytest.fixture
def three_files(toy_table):
    data_dir, write = toy_table
    write("train.tsv", rows(20))
    write("dev.tsv", rows(3, split="dev"))
    write("test.tsv", rows(4, split="test"))
    return data_dir, {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}


def test_shipped_splits_are_kept_and_labeled_subset_drawn_per_class(three_files):
    data_dir, files = three_files
    cfg = dataset_cfg(files=files, split={"labeled_per_class": 5})
    data = task_data_of(cfg, transfer(), str(data_dir), seed=1)
    assert data.summary() == {"labeled": 10, "transfer": 30, "dev": 6, "test": 8}
    assert sorted(data.splits["labeled"]["label"]) == [0] * 5 + [1] * 5
    assert set(data.splits["transfer"]["label"]) == {-1}
    labeled, pool = set(data.splits["labeled"]["text"]), set(data.splits["transfer"]["text"])
    assert not labeled & pool


def test_splits_are_deterministic_given_the_seed(three_files):
    data_dir, files = three_files
    cfg = dataset_cfg(files=files, split={"labeled_per_class": 5})
    first = task_data_of(cfg, transfer(), str(data_dir), seed=1)
    again = task_data_of(cfg, transfer(), str(data_dir), seed=1)
    other = task_data_of(cfg, transfer(), str(data_dir), seed=2)
    assert first.fingerprint("labeled", "transfer") == again.fingerprint("labeled", "transfer")
    assert first.fingerprint("labeled") != other.fingerprint("labeled")
    assert first.fingerprint("test") == other.fingerprint("test")


def test_dev_and_test_are_carved_from_train_when_missing(toy_table):
    data_dir, write = toy_table
    write("train.tsv", rows(50))
    cfg = dataset_cfg(files={"train": "train.tsv"},
                      split={"test_fraction": 0.2, "dev_fraction": 0.1, "labeled_per_class": 10})
    data = task_data_of(cfg, transfer(), str(data_dir), seed=1)
    sizes = data.summary()
    assert sizes["test"] == 20 and sizes["dev"] == 8
    assert sum(sizes.values()) == 100
    texts = [set(data.splits[s]["text"]) for s in ("labeled", "transfer", "dev", "test")]
    assert sum(len(t) for t in texts) == len(set().union(*texts))  # disjoint


@pytest.mark.parametrize("size,expected", [({"multiple": 2}, 20), ({"count": 7}, 7), ({"multiple": 0}, 0)])
def test_transfer_size(three_files, size, expected):
    data_dir, files = three_files
    cfg = dataset_cfg(files=files, split={"labeled_per_class": 5})
    data = task_data_of(cfg, transfer("x", **size), str(data_dir), seed=1)
    assert len(data.splits["transfer"]) == expected


def test_bbc_news_folders_load():
    from distil.config.schema import CONF_DIR

    cfg = OmegaConf.merge(OmegaConf.structured(DatasetConfig),
                          OmegaConf.load(CONF_DIR / "dataset" / "bbc-news.yaml"))
    data = task_data_of(cfg, transfer(), "unused", seed=1)
    assert data.num_labels == 5 and len(data.splits["labeled"]) == 250
    # BBC News repeats articles: 35 training copies of dev/test texts leave the transfer set
    assert data.overlap["transfer_dropped"] == 35 and sum(data.summary().values()) == 2225 - 35
    assert data.overlap["dev"] == {"labeled": 3, "transfer": 7}
    assert data.overlap["test"] == {"labeled": 2, "transfer": 28}


# --- bad input: one clear error each -------------------------------------------------

def test_missing_file(three_files):
    data_dir, files = three_files
    with pytest.raises(DistilError, match="not found; check paths.data_dir"):
        task_data_of(dataset_cfg(files={**files, "dev": "nope.tsv"}), transfer(), str(data_dir), 1)


def test_missing_directory():
    with pytest.raises(DistilError, match="does not exist; set paths.data_dir"):
        task_data_of(dataset_cfg(path="/no/such/dir", files={"train": "x"}), transfer(), ".", 1)


def test_empty_dataset(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [])
    with pytest.raises(DistilError, match="train.tsv has no examples"):
        task_data_of(dataset_cfg(files={"train": "train.tsv"}), transfer(), str(data_dir), 1)


def test_label_column_that_does_not_exist(three_files):
    data_dir, files = three_files
    cfg = dataset_cfg(files=files, label_column="sentiment")
    expected = "no column 'sentiment'; set dataset.label_column to one of: text, label"
    with pytest.raises(DistilError, match=expected):
        task_data_of(cfg, transfer(), str(data_dir), 1)


def test_label_outside_the_label_set(three_files):
    data_dir, files = three_files
    with pytest.raises(DistilError, match="outside the label set"):
        task_data_of(dataset_cfg(files=files, labels=["a"]), transfer(), str(data_dir), 1)


def test_too_many_labels_per_class(three_files):
    data_dir, files = three_files
    with pytest.raises(DistilError, match="fewer than labeled_per_class=50"):
        task_data_of(dataset_cfg(files=files, split={"labeled_per_class": 50}), transfer(),
                        str(data_dir), 1)


def test_transfer_larger_than_pool(three_files):
    data_dir, files = three_files
    cfg = dataset_cfg(files=files, split={"labeled_per_class": 5})
    with pytest.raises(DistilError, match="choose a smaller transfer_size"):
        task_data_of(cfg, transfer("x", count=1000), str(data_dir), 1)


# --- extra evaluation splits, only reported (MNLI matched / mismatched) --------------------

MNLI_HEADER = "idx\tpremise\thypothesis\tlabel\tlabel_id"
NLI = ("entailment", "neutral", "contradiction")


def write_mnli(directory, per_class=10, mismatched_per_class=3):
    """An MNLI-shaped toy: GLUE's two dev files, as /work/shared/data/mnli holds them."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, n, topic in (("dev_matched.tsv", per_class, "fiction"), ("dev_mismatched.tsv", mismatched_per_class,
                                                                         "letters")):
        lines = [MNLI_HEADER] + [f"{i}\t{topic} premise {label} {i}\t{topic} hypothesis {i}\t{label}\t{k}"
                                 for k, label in enumerate(NLI) for i in range(n)]
        (directory / name).write_text("\n".join(lines) + "\n")
    return directory


def mnli_cfg(path, **overrides):
    from distil.config.schema import CONF_DIR

    raw = OmegaConf.load(CONF_DIR / "dataset" / "mnli.yaml")
    return OmegaConf.merge(OmegaConf.structured(DatasetConfig), raw, {"path": str(path), **overrides})


def test_mnli_reports_mismatched_beside_matched(tmp_path):
    cfg = mnli_cfg(write_mnli(tmp_path / "mnli"), split={"labeled_per_class": 2})
    data = task_data_of(cfg, transfer(), ".", seed=1)
    assert list(data.splits) == ["labeled", "transfer", "dev", "test", "test_mismatched"]
    assert data.extra_tests == ["test_mismatched"]
    mismatched = data.splits["test_mismatched"]
    assert len(mismatched) == 9 and all(text.startswith("letters") for text in mismatched["text"][:])
    assert sorted(mismatched["label"][:]) == [0] * 3 + [1] * 3 + [2] * 3  # gold labels kept, as ids
    # matched test and dev are carved from the matched file: 20% and 10% of each class
    assert len(data.splits["test"]) == 6 and len(data.splits["dev"]) == 3
    assert all(text.startswith("fiction") for name in ("labeled", "dev", "test")
               for text in data.splits[name]["text"][:])


def test_extra_test_splits_are_capped_like_test(tmp_path):
    cfg = mnli_cfg(write_mnli(tmp_path / "mnli"), split={"labeled_per_class": 2, "max_eval_per_language": 4})
    data = task_data_of(cfg, transfer(), ".", seed=1)
    assert len(data.splits["test"]) == 4 and len(data.splits["test_mismatched"]) == 4


def test_a_split_name_that_is_neither_train_dev_test_nor_test_extra(three_files):
    data_dir, files = three_files
    cfg = dataset_cfg(files={**files, "tset": "test.tsv"})
    with pytest.raises(DistilError, match=r"dataset 't': dataset.files: unknown split 'tset' \(did you mean "
                                          r"'test'\?\); choose one of: train, dev, test, or test_<name> for a "
                                          r"split that is only reported"):
        task_data_of(cfg, transfer(), str(data_dir), seed=1)


def test_a_stratified_count_keeps_an_imbalanced_class_mix_where_per_class_balances_it(toy_table):
    """69/31 data (as CoLA): labeled_per_class=10 makes a 50/50 set; labeled_count=20 with
    labeled_draw=stratified keeps 69/31 as closely as whole numbers can (14/6: 13.8 and 6.2, the larger
    remainder rounding up)."""
    data_dir, write = toy_table
    write("train.tsv", [(f"a train {i}", "a") for i in range(69)] + [(f"b train {i}", "b") for i in range(31)])
    write("dev.tsv", rows(3, split="dev"))
    write("test.tsv", rows(4, split="test"))
    files = {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}
    balanced = task_data_of(dataset_cfg(files=files, split={"labeled_per_class": 10}), transfer(), str(data_dir), 1)
    assert sorted(balanced.splits["labeled"]["label"]) == [0] * 10 + [1] * 10
    kept = task_data_of(dataset_cfg(files=files, split={"labeled_count": 20, "labeled_draw": "stratified"}),
                        transfer(), str(data_dir), seed=1)
    assert sorted(kept.splits["labeled"]["label"]) == [0] * 14 + [1] * 6
    assert kept.summary()["transfer"] == 80


def test_stratified_draw_counts_add_up_with_the_largest_remainders():
    import numpy as np

    from distil.data.split import stratified_draw

    labels = np.array([0] * 5 + [1] * 3 + [2] * 2)  # shares of 7: 3.5, 2.1, 1.4 -> 3, 2, 1 and the 0.5 to class 0
    chosen = stratified_draw(labels, 7, np.random.default_rng(0))
    assert len(set(chosen)) == 7 and np.bincount(labels[chosen]).tolist() == [4, 2, 1]


def test_a_stratified_draw_without_classes_is_one_line(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [(f"train {i}", str(i % 5)) for i in range(20)])
    write("test.tsv", [(f"test {i}", str(i % 5)) for i in range(4)])
    cfg = dataset_cfg(files={"train": "train.tsv", "test": "test.tsv"}, task="regression",
                      split={"labeled_count": 5, "labeled_draw": "stratified"})
    with pytest.raises(DistilError, match="labeled_draw=stratified keeps the class mix, but regression data has "
                                          "no classes; use dataset.split.labeled_draw=random"):
        task_data_of(cfg, transfer(), str(data_dir), seed=1)
