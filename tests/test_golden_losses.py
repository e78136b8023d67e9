"""Golden losses: the first epoch's training loss of every step of four schedules on the tiny
fixtures, pinned to a relative 1e-5 (as torchtune pins its recipes' losses). A silent change in a loss, a
sampler, an initialisation, a batch rule or a schedule's steps fails here, whatever else passes.

The numbers were recorded on the code before the package layout moved, so the move is
shown to change nothing. Issue 54 gave XtremeDistil's schedules a W^r of its own beside W^s: d4.2's
and ner-d4.2's stage 2 and 3 moved (stage 2 trains a fresh W^r, stage 3 a W^s stage 2 left untouched);
their stage 1 did not (W^r draws from its own generator), and the "-shared" runs
(schedule.shared_output_layer=true) keep every number recorded before. To re-pin after an intended
change: `python -m tests.test_golden_losses` prints the table to paste, and the commit says why the
losses moved."""

from __future__ import annotations

import json

import pytest

from tests.test_cli import distil_in_process

# (schedule, dataset, student, extra overrides): XtremeDistil D1 and D4.2, Mukherjee & Awadallah's soft
# (logit MSE), and a tagging schedule (D4.2 on the toy NER set: per-token representation and logit
# losses). D4.2 has its own W^r beside W^s; the "-shared" runs keep one output layer for
# both (schedule.shared_output_layer=true) and are pinned to the numbers recorded before that change.
GOLDEN_RUNS = {
    "d1": ("d1", "toy", "bilstm", ()),
    "d4.2": ("d4.2", "toy", "bilstm", ()),
    "d4.2-shared": ("d4.2", "toy", "bilstm", ("schedule.shared_output_layer=true",)),
    "soft": ("soft", "toy", "bilstm", ()),
    "ner-d4.2": ("d4.2", "toy-ner", "bilstm-tagger", ()),
    "ner-d4.2-shared": ("d4.2", "toy-ner", "bilstm-tagger", ("schedule.shared_output_layer=true",)),
}

# (stage, step) -> the first epoch's mean training loss, one entry per step in the order they run
GOLDEN = {
    'd1': [
        ('S1', 'all', 1.11510274),
    ],
    'd4.2': [
        ('S1', 'projection', 0.401891788),
        ('S1', 'bilstm', 0.398358931),
        ('S1', 'embeddings', 0.394173284),
        ('S2', 'classifier', 0.00721392501),
        ('S2', 'projection', 0.00681208959),
        ('S2', 'bilstm', 0.00589766928),
        ('S2', 'embeddings', 0.00464589195),
        ('S3', 'classifier', 1.09672689),
        ('S3', 'projection', 1.09704393),
        ('S3', 'bilstm', 1.10176629),
        ('S3', 'embeddings', 1.09675062),
    ],
    'd4.2-shared': [
        ('S1', 'projection', 0.401891788),
        ('S1', 'bilstm', 0.398358931),
        ('S1', 'embeddings', 0.394173284),
        ('S2', 'classifier', 0.000395309379),
        ('S2', 'projection', 0.00032082265),
        ('S2', 'bilstm', 0.000234344707),
        ('S2', 'embeddings', 0.000240672647),
        ('S3', 'classifier', 1.0981254),
        ('S3', 'projection', 1.09970337),
        ('S3', 'bilstm', 1.09935296),
        ('S3', 'embeddings', 1.094199),
    ],
    'soft': [
        ('S1', 'all', 0.00311456559),
    ],
    'ner-d4.2': [
        ('S1', 'projection', 0.441349521),
        ('S1', 'bilstm', 0.44342719),
        ('S1', 'embeddings', 0.440525576),
        ('S2', 'classifier', 0.0153928488),
        ('S2', 'projection', 0.0147143831),
        ('S2', 'bilstm', 0.0137606189),
        ('S2', 'embeddings', 0.0127344541),
        ('S3', 'classifier', 2.06680155),
        ('S3', 'projection', 1.98153526),
        ('S3', 'bilstm', 1.67931616),
        ('S3', 'embeddings', 0.916540056),
    ],
    'ner-d4.2-shared': [
        ('S1', 'projection', 0.441349521),
        ('S1', 'bilstm', 0.44342719),
        ('S1', 'embeddings', 0.440525576),
        ('S2', 'classifier', 0.0134991133),
        ('S2', 'projection', 0.0129031236),
        ('S2', 'bilstm', 0.0121371802),
        ('S2', 'embeddings', 0.0113117225),
        ('S3', 'classifier', 2.0745697),
        ('S3', 'projection', 1.99009424),
        ('S3', 'bilstm', 1.69339097),
        ('S3', 'embeddings', 0.926468462),
    ],
}


def first_epoch_losses(tmp_path, monkeypatch, capsys, name: str) -> list[tuple[str, str, float]]:
    schedule, dataset, student, extra = GOLDEN_RUNS[name]
    code, _, err = distil_in_process(["debug=smoke", f"schedule={schedule}", f"dataset={dataset}",
                                      f"student={student}", "trainer.epochs=1", *extra], tmp_path, monkeypatch, capsys)
    assert code == 0, err
    metrics = json.loads(next((tmp_path / "outputs" / "runs").rglob("metrics.json")).read_text())
    return [(record["name"], record["step"], record["history"][1]["train_loss"])
            for record in metrics["student"]["stages"]]


@pytest.mark.parametrize("name", GOLDEN_RUNS)
def test_first_epoch_losses_are_pinned(tmp_path, monkeypatch, capsys, name):
    losses = first_epoch_losses(tmp_path, monkeypatch, capsys, name)
    assert [(stage, step) for stage, step, _ in losses] == [(stage, step) for stage, step, _ in GOLDEN[name]]
    assert [loss for *_, loss in losses] == pytest.approx([loss for *_, loss in GOLDEN[name]], rel=1e-5, abs=1e-8)


if __name__ == "__main__":  # print GOLDEN as measured now, to paste above
    import sys
    from pathlib import Path
    from tempfile import TemporaryDirectory

    class Capsys:
        def readouterr(self):
            return type("Captured", (), {"out": "", "err": ""})()

    mp = pytest.MonkeyPatch()
    measured = {}
    for run in GOLDEN_RUNS:
        with TemporaryDirectory() as tmp:
            mp.setenv("DISTIL_RESULTS", str(Path(tmp) / "results"))
            measured[run] = first_epoch_losses(Path(tmp), mp, Capsys(), run)
    mp.undo()
    lines = ["GOLDEN = {"]
    for run, rows in measured.items():
        lines += [f"    {run!r}: [", *(f"        ({stage!r}, {step!r}, {loss:.9g})," for stage, step, loss in rows),
                  "    ],"]
    print("\n".join([*lines, "}"]), file=sys.stderr)
