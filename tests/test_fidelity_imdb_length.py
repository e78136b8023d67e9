"""Issue 54, IMDB's length: reviews are cut to teacher.max_length wordpieces (128 with the teacher
presets) for teacher and student alike, dataset=imdb says so, and teacher.max_length=256 is the
256-wordpiece setting: it reaches the tokenised splits the teacher fine-tunes on, caches and is scored
on, and that the student reads."""

from __future__ import annotations

import gzip
from types import SimpleNamespace

import pytest

from distil.run.pipeline import prepare_data, student_tokens
from distil.tables.cells import cell_key
from distil.tasks import make_task
from tests.conftest import REPO, compose_config

IMDB_YAML = REPO / "distil" / "conf" / "dataset" / "imdb.yaml"


def review(i: int, label: int) -> str:
    """~400 words, longer than 256 wordpieces (a real review averages ~300)."""
    mood = "great" if label else "awful"
    return f"review {i} says the film was {mood}.<br /><br />" + " ".join(
        f"the {mood} scene number {k} of film {i} goes on and on" for k in range(40))


@pytest.fixture
def imdb_dir(tmp_path):
    """A tiny IMDB in the real files' layout (id, rating, label, text)."""
    root = tmp_path / "data" / "imdb"
    root.mkdir(parents=True)
    header = "id\trating\tlabel\ttext\n"
    train = header + "".join(f"train_{i}\t{8 if i % 2 else 2}\t{i % 2}\t{review(i, i % 2)}\n" for i in range(100))
    with gzip.open(root / "train.tsv.gz", "wt") as f:
        f.write(train)
    (root / "test_5k.tsv").write_text(
        header + "".join(f"test_{i}\t{8 if i % 2 else 2}\t{i % 2}\t{review(1000 + i, i % 2)}\n" for i in range(10)))
    with gzip.open(root / "unsup.txt.gz", "wt") as f:
        f.write("".join(review(2000 + i, 0) + "\n" for i in range(5)))
    return tmp_path / "data"


def imdb_cfg(data_dir, *overrides):
    cfg = compose_config("dataset=imdb", "teacher=minilm", "dataset.split.labeled_per_class=4", *overrides)
    cfg.paths.data_dir = str(data_dir)
    return cfg


@pytest.mark.parametrize("length", [128, 256])
def test_teacher_max_length_is_the_length_every_imdb_split_is_cut_to(imdb_dir, tmp_path, length):
    overrides = [] if length == 128 else [f"teacher.max_length={length}"]  # 128: the teacher preset's own
    cfg = imdb_cfg(imdb_dir, *overrides)
    cfg.paths.cache = str(tmp_path / "cache")
    assert cfg.teacher.max_length == length
    task = make_task(cfg.dataset)
    data, prepared = prepare_data(cfg, task)
    for name in ("labeled", "transfer", "dev", "test"):
        lengths = [len(ids) for ids in prepared[name].ids]
        assert lengths and max(lengths) == length, name  # every review is longer: each is cut to the length
    # the student reads the teacher's tokenised splits (wordpiece students) or the first `length` words
    wordpieces = SimpleNamespace(reads_words=False, task=task, reads_pairs_apart=False)
    assert max(len(ids) for ids in student_tokens(wordpieces, prepared["test"], length)) == length
    words = SimpleNamespace(reads_words=True, task=task, reads_pairs_apart=False)
    assert max(len(ws) for ws in student_tokens(words, prepared["test"], length)) == length


def test_the_256_setting_makes_its_own_cells():
    """A preset that sets teacher.max_length=256 gets new runs, never the 128 ones' numbers."""
    base = ["dataset=imdb", "teacher=minilm", "schedule=d0"]
    assert cell_key([*base, "seed=1"]) != cell_key([*base, "teacher.max_length=256", "seed=1"])


def test_imdb_yaml_states_the_cut_and_the_256_setting():
    text = IMDB_YAML.read_text()
    assert "128" in text and "teacher.max_length=256" in text
    assert "235 words" in text  # Mukherjee & Awadallah's Table 3, the paper's figure for the length
