"""Turc et al. Table 1 from distil-bench-turc: the 24 architectures count what the paper counts, and
the table presets render from the benchmark's csv."""

import pandas as pd
import pytest

from distil.bench.harness import count_params
from distil.cli.paper import turc_table1 as main
from distil.papers.turc_table1 import LAYERS, WIDTHS, bert
from distil.tables.load import load_preset
from distil.tables.render import bench_samples

# Turc et al. Table 1 (a), millions of parameters: rows L = 2..12, columns H = 128, 256, 512, 768
PAPER = {2: (4.4, 9.7, 22.8, 39.2), 4: (4.8, 11.3, 29.1, 53.4), 6: (5.2, 12.8, 35.4, 67.5),
         8: (5.6, 14.4, 41.7, 81.7), 10: (6.0, 16.0, 48.0, 95.9), 12: (6.4, 17.6, 54.3, 110.1)}


# the shallowest and deepest with the heavy tests (CI); the four between with the slow tests
@pytest.mark.parametrize("layers", [layers if layers in (2, 12) else pytest.param(layers, marks=pytest.mark.slow)
                                    for layers in LAYERS])
@pytest.mark.heavy
def test_the_24_students_have_the_papers_parameter_counts(layers):
    counts = [count_params(bert(layers, hidden)) / 1e6 for hidden in WIDTHS]
    assert counts == pytest.approx(PAPER[layers], abs=0.1)  # the paper rounds to 0.1M


@pytest.mark.heavy
def test_the_benchmark_writes_both_table_presets_rows(tmp_path):
    main(["--quick", "--passes", "2", "--length", "16", "--out", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "bench_turc.csv")
    assert frame["model"].tolist() == [f"L={layers}" for layers in LAYERS] + ["BERT Base", "BERT Large"]
    large = frame.set_index("model").loc["BERT Large"]
    assert large["speedup_vs_large"] == 1.0
    for name in ("turc-table1", "turc-table1b"):
        samples = bench_samples(load_preset(name), tmp_path / "bench_turc.csv")
        assert len(samples) == 24 and all(sample.error is None for sample in samples)


def test_wu_table2_benchmark_writes_its_rows(tmp_path, monkeypatch):
    """distil-bench-wu on a few Quora-shaped pairs: the four rows, BiLSTM_SRA the unit of both
    ratios, and the parameters without the word embeddings (the students' are exact at any scale)."""
    from distil.cli.paper import wu_table2 as bench_wu

    data = tmp_path / "data" / "quora-pairs"
    data.mkdir(parents=True)
    rows = ["question1\tquestion2\tis_duplicate"] + [f"how do i learn {i}?\twhat is {i}?\t{i % 2}" for i in range(8)]
    (data / "quora_dev_balanced10k.tsv").write_text("\n".join(rows) + "\n")
    bench_wu(["--data-dir", str(tmp_path / "data"), "--pairs", "4", "--batch", "4", "--quick", "--out", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "bench_wu.csv").set_index("model")
    assert frame.index.tolist() == ["BERT Large", "BERT Base", "BiLSTM_KD", "BiLSTM_SRA"]
    assert frame.loc["BiLSTM_SRA", ["params_x", "time_x"]].tolist() == [1.0, 1.0]
    # by hand: BiLSTM E300 -> 2 x 512 (PyTorch's two bias vectors) 2 x (4*512*(300+512) + 8*512) = 3,334,144;
    # 1024 -> 768 without bias 786,432; MLP 4*768 -> 256 -> 2 787,202: 4.908M (Wu counts 4.8)
    assert frame.loc["BiLSTM_SRA", "params_m"] == pytest.approx(4.907778, abs=1e-6)
    samples = bench_samples(load_preset("wu-table2"), tmp_path / "bench_wu.csv")
    assert len(samples) == 16 and all(sample.error is None for sample in samples)
