"""Reproduction runs on real data (marked slow: minutes each, not in the default suite).

    make test-slow
"""

import json

import pytest

from tests.conftest import REPO
from tests.test_cli import DISTIL, run

pytestmark = pytest.mark.slow
SST2_LOW = ["+experiment=sst2-low"]  # the SST-2 low-resource reference, as `make schedules-xd`


def distil_metrics(tmp_path, *args) -> dict:
    out = tmp_path / "outputs"
    # The repository's cache: the fine-tuned MiniLM and its targets are shared with `make schedules-*`.
    # A fresh clone also fine-tunes and caches the teacher in the first run: allow an hour.
    run([DISTIL, *args, f"paths.outputs={out}", f"paths.cache={REPO / 'outputs' / 'cache'}"], cwd=REPO, timeout=3600)
    return json.loads(max(out.rglob("metrics.json"), key=lambda p: p.stat().st_mtime).read_text())


def test_d1_reaches_the_reference_and_beats_labels_only_on_sst2(tmp_path):
    """Issue 6: a minimal BiLSTM with labels + logit MSE reached 0.780 dev accuracy here, labels only 0.667."""
    d1 = distil_metrics(tmp_path, *SST2_LOW, "schedule=d1")
    d0 = distil_metrics(tmp_path, *SST2_LOW, "schedule=d0")
    # 20k drawn; the one that is also a test sentence is dropped (dataset.split.drop_eval_overlap)
    assert d1["data"]["sizes"]["labeled"] == 1000 and d1["data"]["overlap"]["transfer_dropped"] == 1
    assert d1["data"]["sizes"]["transfer"] == 20000 - 1
    assert d1["student"]["dev"]["accuracy"] >= 0.780
    assert d1["student"]["test"]["accuracy"] > d0["student"]["test"]["accuracy"] + 0.05
