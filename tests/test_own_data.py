"""A user's own data and presets: config directories on the search path, headerless files,
a replaced files map, and one clear line for each way own data goes wrong."""

import json
import os
import subprocess

import pytest
from omegaconf import OmegaConf

from distil.config.overrides import check_overrides, replace_files_map, with_config_dir_env
from distil.config.schema import CONF_DIR, DatasetConfig
from distil.errors import DistilError
from tests.conftest import compose_config, raw_splits_of
from tests.test_cli import DISTIL, cache_files, distil_in_process

PACKAGE_DATASETS = ("ag_news, bbc-news, conll2002, conll2003, dbpedia, elec, imdb, mnli, mrpc, qqp, quora, sst2, "
                    "toy, toy-ner, toy-pair, toy-sts, wikiann, wnut16")
PACKAGE_EXPERIMENTS = ("mukherjee-dbpedia-cpu, mukherjee-table6-gpu, smoke-pair, sst2-low, tang, "
                       "turc-pretraining-gpu, wu-agnostic-gpu, xtremedistil-cpu, xtremedistil-table3-gpu")
GOOD = ["the cat sat on the mat", "she reads books every day", "we went home early", "they like green apples"]
BAD = ["cat the mat on sat", "books she every reads day", "home we early went the", "apples like they green"]


def write_cola(directory, sizes=(("train", 40), ("dev", 12), ("test", 12))):
    """GLUE CoLA's layout, no header: source, label, original marker, sentence."""
    directory.mkdir(parents=True, exist_ok=True)
    for offset, (split, n) in enumerate(sizes):
        # numbered apart per split: no dev or test text repeats a training one (those are dropped from transfer)
        lines = [f"gj04\t1\t\t{GOOD[i % 4]} {1000 * offset + i}" if i % 2 == 0
                 else f"gj04\t0\t*\t{BAD[i % 4]} {1000 * offset + i}" for i in range(n)]
        (directory / f"{split}.tsv").write_text("\n".join(lines) + "\n")


def user_conf(tmp_path, dataset="mine", **fields):
    """The user's own config directory with dataset/<dataset>.yaml over headerless CoLA-style files."""
    write_cola(tmp_path / "data")
    spec = {"name": dataset, "task": "classification", "format": "tsv", "header": False,
            "path": str(tmp_path / "data"), "files": {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"},
            "text_column": 3, "label_column": 1, "split": {"labeled_per_class": 8}, **fields}
    (tmp_path / "data" / "scores.tsv").write_text("".join(f"gj04\t{score}\t\tsome text {score}\n"
                                                          for score in ("0.0", "1.2", "3.8", "4.6")))
    (tmp_path / "myconf" / "dataset").mkdir(parents=True)
    (tmp_path / "myconf" / "dataset" / f"{dataset}.yaml").write_text(OmegaConf.to_yaml(spec))
    return tmp_path / "myconf"


# Option checking sees every config directory.

def test_own_dataset_on_the_search_path_is_a_valid_option(tmp_path):
    conf = user_conf(tmp_path)
    searchpath = f"hydra.searchpath=[file://{conf}]"
    assert check_overrides([searchpath, "dataset=mine"], CONF_DIR) is None
    assert check_overrides([searchpath, "dataset=mien"], CONF_DIR) == (
        f"unknown dataset 'mien' (did you mean 'mine'?); "
        f"choose one of: {PACKAGE_DATASETS.replace('imdb, ', 'imdb, mine, ')}")
    assert check_overrides(["dataset=mine"], CONF_DIR) == (
        f"unknown dataset 'mine'; choose one of: {PACKAGE_DATASETS}")


@pytest.mark.parametrize("flags", [["--config-dir", "{conf}"], ["--config-dir={conf}"], ["-cd", "{conf}"]])
def test_config_dir_flag_adds_options(tmp_path, flags):
    conf = user_conf(tmp_path)
    assert check_overrides([f.format(conf=conf) for f in flags] + ["dataset=mine"], CONF_DIR) is None


def test_missing_config_directory_is_named(tmp_path):
    assert check_overrides([f"hydra.searchpath=[file://{tmp_path}/nope]", "dataset=mine"], CONF_DIR) == (
        f"config directory file://{tmp_path}/nope (from hydra.searchpath) does not exist")
    assert check_overrides(["-cd", f"{tmp_path}/nope"], CONF_DIR) == (
        f"config directory {tmp_path}/nope (from -cd) does not exist")


def test_package_entries_on_the_search_path(tmp_path):
    assert check_overrides(["hydra.searchpath=[pkg://distil.conf]", "dataset=toy"], CONF_DIR) is None
    assert check_overrides(["hydra.searchpath=[pkg://nope.conf]", "dataset=toy"], CONF_DIR) == (
        "config directory pkg://nope.conf (from hydra.searchpath) does not exist")


def test_experiment_presets_are_checked_including_the_users(tmp_path):
    assert check_overrides(["+experiment=sst2-low"], CONF_DIR) is None
    assert check_overrides(["+experiment=sst2-lo"], CONF_DIR) == (
        f"unknown experiment 'sst2-lo' (did you mean 'sst2-low'?); choose one of: {PACKAGE_EXPERIMENTS}")
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "cola-quick.yaml").write_text("# @package _global_\ntrainer: {epochs: 1}\n")
    assert check_overrides([f"hydra.searchpath=[file://{tmp_path}]", "+experiment=nope"], CONF_DIR) == (
        f"unknown experiment 'nope'; choose one of: cola-quick, {PACKAGE_EXPERIMENTS}")


def test_environment_directories_join_the_users_searchpath(tmp_path):
    args = ["-m", "hydra.searchpath=[file:///a]", "seed=1"]
    value = os.pathsep.join([str(tmp_path / "b"), str(tmp_path / "c")])
    assert with_config_dir_env(args, value) == [
        "-m", "seed=1", f"hydra.searchpath=['file:///a', 'file://{tmp_path}/b', 'file://{tmp_path}/c']"]
    assert with_config_dir_env(args, None) == args and with_config_dir_env(args, "") == args


# A files map on the command line replaces the borrowed one.

def test_a_files_map_override_replaces_the_datasets_map():
    override = "dataset.files={train: a.tsv, test: b.tsv}"
    cfg = compose_config("dataset=mrpc", override)
    assert dict(cfg.dataset.files) == {"train": "a.tsv", "dev": "dev.tsv", "test": "b.tsv"}  # Hydra merges
    replace_files_map(cfg, ["dataset=mrpc", override])
    assert dict(cfg.dataset.files) == {"train": "a.tsv", "test": "b.tsv"}


def test_one_files_key_still_merges():
    cfg = compose_config("dataset=mrpc", "dataset.files.dev=other.tsv")
    replace_files_map(cfg, ["dataset=mrpc", "dataset.files.dev=other.tsv"])
    assert dict(cfg.dataset.files) == {"train": "train.tsv", "dev": "other.tsv", "test": "msr_paraphrase_test.txt"}


# Reading own files.

def dataset_cfg(data_dir, **fields):
    return OmegaConf.merge(OmegaConf.structured(DatasetConfig), {"name": "t", "path": str(data_dir), **fields})


def test_headerless_tsv_names_columns_by_index(tmp_path):
    write_cola(tmp_path, sizes=[("train", 4)])
    cfg = dataset_cfg(tmp_path, header=False, files={"train": "train.tsv"}, text_column=3, label_column=1)
    train = raw_splits_of(cfg, str(tmp_path))["train"]
    assert train["text"][:] == ["the cat sat on the mat 0", "books she every reads day 1",
                                "we went home early 2", "apples like they green 3"]  # the first line is data
    assert train["label"][:] == ["1", "0", "1", "0"]


def test_headerless_tsv_with_a_column_name_lists_the_indices(tmp_path):
    write_cola(tmp_path, sizes=[("train", 4)])
    cfg = dataset_cfg(tmp_path, header=False, files={"train": "train.tsv"}, label_column=1)
    with pytest.raises(DistilError) as error:
        raw_splits_of(cfg, str(tmp_path))
    assert str(error.value) == ("dataset 't': train.tsv has no column 'text'; "
                                "set dataset.text_column to one of: 0, 1, 2, 3")


def test_dev_and_test_must_be_different_files(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [("a b", "x"), ("c d", "y")])
    write("b.tsv", [("a b", "x")])
    cfg = dataset_cfg(data_dir, files={"train": "train.tsv", "dev": "b.tsv", "test": "./b.tsv"})
    with pytest.raises(DistilError) as error:
        raw_splits_of(cfg, str(data_dir))
    assert str(error.value) == (
        f"dataset 't': dev and test are the same file ({data_dir / 'b.tsv'}), so models would be selected on "
        f"the test set; point dataset.files.dev at another file, or leave dev out of dataset.files to carve "
        f"it from train")


@pytest.mark.parametrize("split", ["dev", "test"])
def test_an_eval_file_without_labels_says_so(toy_table, split):
    data_dir, write = toy_table
    write("train.tsv", [("a b", "x"), ("c d", "y")])
    write("labeled.tsv", [("a b", "x")])
    write("unlabeled.tsv", [("a b", "0")], header="text\tid")
    files = {"test": "labeled.tsv", "dev": "labeled.tsv", split: "unlabeled.tsv", "train": "train.tsv"}
    files["test" if split == "dev" else "dev"] = "train.tsv"  # dev and test must differ
    with pytest.raises(DistilError) as error:
        raw_splits_of(dataset_cfg(data_dir, files=files), str(data_dir))
    assert str(error.value) == (
        f"dataset 't': unlabeled.tsv ({split}) has no label column 'label' (its columns: text, id); dev and "
        f"test need gold labels to score the models: point dataset.files.{split} at a labeled file, or leave "
        f"{split} out of dataset.files to carve it from train")


def test_a_wrong_label_column_is_still_a_setting_even_if_dev_comes_first(toy_table):
    data_dir, write = toy_table
    for name in ("train.tsv", "dev.tsv"):
        write(name, [("a b", "x"), ("c d", "y")])
    cfg = dataset_cfg(data_dir, files={"dev": "dev.tsv", "train": "train.tsv"}, label_column="sentiment")
    with pytest.raises(DistilError) as error:
        raw_splits_of(cfg, str(data_dir))
    assert str(error.value) == ("dataset 't': train.tsv has no column 'sentiment'; "
                                "set dataset.label_column to one of: text, label")


@pytest.mark.parametrize("labels,message", [
    (["0.0", "2.5", "4.5", "2.5"], "holds 3 distinct numbers from 0 to 4.5"),
    ([str(i) for i in range(101)], "holds 101 distinct numbers from 0 to 100"),
])
def test_scores_read_as_classes_suggest_regression(toy_table, labels, message):
    data_dir, write = toy_table
    write("train.tsv", [(f"text {i}", label) for i, label in enumerate(labels)])
    with pytest.raises(DistilError) as error:
        raw_splits_of(dataset_cfg(data_dir, files={"train": "train.tsv"}), str(data_dir))
    assert str(error.value) == (
        f"dataset 't': label column 'label' {message}, scores rather than classes; "
        f"set dataset.task=regression (or, if they are class ids, list them in dataset.labels)")


def test_numeric_class_ids_pass(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [(f"text {i}", str(i % 100)) for i in range(200)])  # 100 integer ids: classes
    assert len(raw_splits_of(dataset_cfg(data_dir, files={"train": "train.tsv"}), str(data_dir))["train"]) == 200
    write("train.tsv", [(f"text {i}", str(i)) for i in range(150)])  # 150 ids, listed: the user's classes
    cfg = dataset_cfg(data_dir, files={"train": "train.tsv"}, labels=[str(i) for i in range(150)])
    assert len(raw_splits_of(cfg, str(data_dir))["train"]) == 150


def test_regression_pairs_keep_float_labels(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [("a man plays\ta man is playing", "4.75"), ("a cat\tthe stock fell", "0")],
          header="sentence1\tsentence2\tscore")
    cfg = dataset_cfg(data_dir, task="regression", files={"train": "train.tsv"}, text_column="sentence1",
                      text_pair_column="sentence2", label_column="score")
    train = raw_splits_of(cfg, str(data_dir))["train"]
    assert sorted(train.column_names) == ["label", "language", "text", "text_pair"]
    assert train["text_pair"][:] == ["a man is playing", "the stock fell"]
    assert train["label"][:] == [4.75, 0.0] and train.features["label"].dtype == "float64"


def test_regression_needs_numbers(toy_table):
    data_dir, write = toy_table
    write("train.tsv", [("a man plays", "4.75"), ("a cat", "high")])
    cfg = dataset_cfg(data_dir, task="regression", files={"train": "train.tsv"})
    with pytest.raises(DistilError) as error:
        raw_splits_of(cfg, str(data_dir))
    assert str(error.value) == (f"dataset 't': {data_dir / 'train.tsv'} line 3 has 'high' in label column 'label'; "
                                "a regression task needs a number in every row")


# The whole command, as a user runs it.

def test_borrowed_dataset_with_own_files_map_and_name(tmp_path, monkeypatch, capsys):
    """toy's files without dev: dev is carved from train, not toy's dev.tsv kept by a merge."""
    args = ["debug=smoke", "dataset.name=mine", "dataset.files={train: train.tsv, test: test.tsv}"]
    code, _, err = distil_in_process(args, tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["choices"]["dataset"] == "mine"
    assert metrics["data"]["sizes"] == {"labeled": 24, "transfer": 30, "dev": 6, "test": 24}


@pytest.mark.parametrize("args,message", [
    (["dataset=mien"], "unknown dataset 'mien' (did you mean 'mine'?); choose one of: ag_news, bbc-news, "
                       "conll2002, conll2003, dbpedia, elec, imdb, mine, mnli"),
    (["dataset=mine", "dataset.files={train: train.tsv, dev: test.tsv, test: test.tsv}"],
     "dev and test are the same file"),
    (["dataset=mine", "dataset.label_column=5"], "train.tsv has no column '5'; set dataset.label_column to "
                                                 "one of: 0, 1, 2, 3"),
    (["dataset=mine", "dataset.files.train=scores.tsv"], "label column '1' holds 4 distinct numbers from 0 to 4.6, "
                                                         "scores rather than classes; set dataset.task=regression"),
    (["+experiment=mine"], "unknown experiment 'mine'; choose one of: mukherjee-dbpedia-cpu, mukherjee-table6-gpu, "
                           "smoke-pair"),
])
def test_own_data_mistakes_are_one_line(tmp_path, monkeypatch, capsys, args, message):
    conf = user_conf(tmp_path)
    code, _, err = distil_in_process(["debug=smoke", f"hydra.searchpath=[file://{conf}]", *args],
                                     tmp_path, monkeypatch, capsys)
    assert code == 2
    last_line = err.strip().splitlines()[-1]
    assert last_line.startswith("distil: error:") and message in last_line
    assert "Traceback" not in err
    assert cache_files(tmp_path / "outputs") == []


@pytest.mark.heavy
def test_console_script_runs_own_dataset_by_name(tmp_path):
    """A new user: own directory as a relative DISTIL_CONFIG_DIR, the installed `distil`, their own cwd."""
    user_conf(tmp_path)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "DISTIL_CONFIG_DIR": "myconf"}
    result = subprocess.run([DISTIL, "debug=smoke", "dataset=mine"], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["choices"]["dataset"] == "mine"
    assert metrics["data"]["sizes"] == {"labeled": 16, "transfer": 24, "dev": 12, "test": 12}
    assert metrics["data"]["labels"] == ["0", "1"]


def test_distil_data_reads_own_datasets(tmp_path, monkeypatch, capsys):
    from distil.cli.data import main

    conf = user_conf(tmp_path)
    main(["mine", f"hydra.searchpath=[file://{conf}]", "dataset.files={train: train.tsv, test: test.tsv}"])
    out = capsys.readouterr().out
    assert "mine: splits of a run with seed=1" in out
    # per class: 8 labeled, dev carved from train (2, not dev.tsv's 6: the map was replaced), 6 test
    assert "│ 0     │       8 │   2 │    6 │" in out and "│ 1     │       8 │   2 │    6 │" in out
