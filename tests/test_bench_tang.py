"""distil-bench-tang --quick on a few real-format SST-2 lines: Tang Table 2's rows as the paper counts
them, and the augmentation-cost row."""

from __future__ import annotations

import pandas as pd
import pytest

from distil.cli.paper import tang_table2
from distil.errors import DistilError
from distil.papers import tang_table2 as bench_tang

SENTENCES = ["a charming and often affecting journey . ", "unflinchingly bleak and desperate ",
             "allows us to hope that nolan is poised to embark a major career ", "the acting is fine ",
             "it 's slow -- very , very slow . ", "a sometimes tedious film . "] * 2


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("bench_tang")
    (root / "data" / "sst2").mkdir(parents=True)
    (root / "data" / "sst2" / "train.tsv").write_text(
        "sentence\tlabel\n" + "".join(f"{s}\t{i % 2}\n" for i, s in enumerate(SENTENCES)))
    tang_table2(["--quick", "--data-dir", str(root / "data"), "--sentences", "12", "--labeled", "6",
                     "--passes", "1", "--threads", "1", "--out", str(root / "tables")])
    return root / "tables"


def test_the_students_parameters_without_embeddings_follow_the_lstm_formula(bench_run):
    table = pd.read_csv(bench_run / "bench_tang.csv").set_index("model")
    student = table.loc["BiLSTM_SOFT (Tang)"]
    e, h, relu, labels = 300, 150, 200, 2
    lstm = 2 * 4 * (h * (e + h) + 2 * h)  # two directions; four gates with input and hidden biases
    assert student["params_without_embeddings"] == lstm + (2 * h * relu + relu) + (relu * labels + labels) == 603_002
    assert student["params"] == 603_002 + 30_522 * e
    assert student["params_paper_style_m"] == pytest.approx(0.603002)
    teacher = table.loc["BERT Large"]
    # the paper's x: BERT Large with its embeddings over the student without
    assert teacher["compression_paper_style"] == pytest.approx(teacher["params"] / 603_002)
    assert teacher["seconds_all_sst2_train"] == pytest.approx(teacher["seconds_timed"] * 67_349 / 12)
    assert teacher["slowdown"] > 0 and student["slowdown"] == 1


def test_the_augmentation_cost_is_set_against_the_teachers_labelling_of_the_copies(bench_run):
    [row] = pd.read_csv(bench_run / "bench_augment.csv").to_dict("records")
    assert row["source_sentences"] == 6 and row["n_iter"] == 20 and 6 < row["copies"] <= 120
    assert row["augment_share_of_teacher"] == pytest.approx(
        (row["tag_seconds"] + row["generate_seconds"]) / row["teacher_seconds"])
    assert (bench_run / "bench_augment.md").read_text().startswith("# augment=tang cost")


def test_a_missing_sst2_copy_is_one_clear_error(tmp_path):
    with pytest.raises(DistilError, match="give --data-dir the folder that holds sst2/"):
        bench_tang.read_sentences(tmp_path, 4)
