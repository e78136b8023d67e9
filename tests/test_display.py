"""The end-of-run tables: one row per stage and unfreezing step, readable in a log file."""

from rich.console import Console

from distil.run.display import stages_table


def _record(name, step, dev, test, losses):
    return {"name": name, "step": step, "losses": losses, "data": ["labeled", "transfer"],
            "trainable_params": 1202, "best_epoch": 1, "epochs_run": 4, "selected_on": "dev accuracy",
            "dev": {"accuracy": dev}, "test": {"accuracy": test}, "dev_loss": 0.5, "seconds": 12.0}


def test_stages_table_has_a_row_per_step_and_fits_a_log_line():
    metrics = {"metric": "accuracy", "choices": {"schedule": "d3.2"}, "student": {"stages": [
        _record("S1", "all", 0.6422, 0.6749, {"repr_kl": 1.0}),
        _record("S2", "classifier", 0.7833, 0.8072, {"ce": 1.0, "logit_mse": 10.0}),
        _record("S2", "embeddings", 0.8005, 0.8018, {"ce": 1.0, "logit_mse": 10.0}),
    ]}}
    console = Console(width=140, record=True)
    console.print(stages_table(metrics))
    lines = console.export_text().splitlines()
    rows = [line for line in lines if line.strip().startswith(("S1", "S2"))]
    assert len(rows) == 3  # one line each: nothing wrapped
    assert "+ classifier" in rows[1] and "ce + 10·logit_mse" in rows[1] and "78.33" in rows[1]
    assert "80.05" in rows[2] and "80.18" in rows[2]


def test_stages_table_is_skipped_for_one_student_per_language():
    metrics = {"metric": "f1", "choices": {"schedule": "d0"}, "student": {"stages": {"en": []}}}
    assert stages_table(metrics) is None


def test_stages_table_shows_table_4_rows_with_the_spread_over_languages():
    """XtremeDistil Table 4: stage, unfreezing layer, F1 and its standard deviation over languages."""
    def record(name, step):
        r = _record(name, step, 0.8, 0.8808, {"ce": 1.0})
        r["dev"], r["test"] = {"f1": 0.80}, {"f1": 0.8808, "f1_std": 0.039}
        return r
    steps = ["classifier", "projection", "bilstm", "embeddings"]
    metrics = {"metric": "f1", "choices": {"schedule": "d4.2"},
               "student": {"stages": [record(stage, step) for stage in ("S2", "S3") for step in steps]}}
    console = Console(width=140, record=True)
    console.print(stages_table(metrics))
    rows = [line for line in console.export_text().splitlines() if line.strip().startswith(("S2", "S3"))]
    assert [row.split()[:3] for row in rows] == [[stage, "+", step] for stage in ("S2", "S3") for step in steps]
    assert all("88.08 ± 3.90" in row for row in rows)
