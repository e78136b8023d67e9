"""Turc et al. Table 1 from distil-bench-turc: the 24 architectures count what the paper counts, and
the table presets render from the benchmark's csv."""

import pandas as pd
import pytest

from distil.bench import count_params
from distil.bench_turc import LAYERS, WIDTHS, bert, main
from distil.tables.load import load_preset
from distil.tables.render import bench_samples

# Turc et al. Table 1 (a), millions of parameters: rows L = 2..12, columns H = 128, 256, 512, 768
PAPER = {2: (4.4, 9.7, 22.8, 39.2), 4: (4.8, 11.3, 29.1, 53.4), 6: (5.2, 12.8, 35.4, 67.5),
         8: (5.6, 14.4, 41.7, 81.7), 10: (6.0, 16.0, 48.0, 95.9), 12: (6.4, 17.6, 54.3, 110.1)}


@pytest.mark.parametrize("layers", LAYERS)
def test_the_24_students_have_the_papers_parameter_counts(layers):
    counts = [count_params(bert(layers, hidden)) / 1e6 for hidden in WIDTHS]
    assert counts == pytest.approx(PAPER[layers], abs=0.1)  # the paper rounds to 0.1M


def test_the_benchmark_writes_both_table_presets_rows(tmp_path):
    main(["--quick", "--passes", "2", "--length", "16", "--out", str(tmp_path)])
    frame = pd.read_csv(tmp_path / "bench_turc.csv")
    assert frame["model"].tolist() == [f"L={layers}" for layers in LAYERS] + ["BERT Base", "BERT Large"]
    large = frame.set_index("model").loc["BERT Large"]
    assert large["speedup_vs_large"] == 1.0
    for name in ("turc-table1", "turc-table1b"):
        samples = bench_samples(load_preset(name), tmp_path / "bench_turc.csv")
        assert len(samples) == 24 and all(sample.error is None for sample in samples)
