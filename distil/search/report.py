"""What a search leaves in its directory once its trials have ended:

  trials.csv    every finished trial: its choices, dev score, latency (ms per text), size (MB), cell
  pareto.md     the Pareto set (dev score against latency; size beside), and only there the test score:
  pareto.csv    test is read after the search, for the students it shows, never to choose one
  pareto.png    every finished trial in grey, the Pareto set highlighted
  best/         the best student within the limits (highest dev score, the faster of equal ones) as a
                student folder: the cell's weights, vocabulary, tokenizer and config, the backend's ONNX
                file where it serves one, its model card (README.md) and search.json (the trial)
"""

from __future__ import annotations

import shutil
from pathlib import Path

from distil.common.atomic import write_atomic, write_json_atomic
from distil.common.markdown import to_markdown
from distil.errors import DistilError
from distil.search.latency import FORMS, served
from distil.search.pareto import best_within, pareto_front
from distil.search.space import cell_of
from distil.search.study import Context, ensure_cell, finished_here
from distil.serve.card import CARD, RunRecord, render_card
from distil.serve.onnx_session import ONNX_FILES
from distil.tables.cells import cell_dir
from distil.tables.timing import deployed_scores

BEST = "best"
STUDENT_PARTS = ("config.json", "vocab.json", "tokenizer", "model.safetensors")
COLUMNS = ["trial", "student", "choices", "backend", "dev", "ms", "vs_reference", "size_mb", "params", "cell"]


def finished_rows(study) -> list[dict]:
    from optuna.trial import TrialState

    rows = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        attrs = trial.user_attrs
        overrides = attrs["overrides"]
        rows.append({"trial": trial.number, "student": overrides[0].partition("=")[2],
                     "choices": " ".join(overrides[1:]), "backend": trial.params["backend"], "dev": attrs["dev"],
                     "ms": attrs["ms"], "vs_reference": attrs["ratio"], "size_mb": attrs["size_mb"],
                     "params": attrs.get("params"), "cell": attrs["cell"], "metric": attrs["metric"],
                     "overrides": overrides})
    return rows


def trained_here(row: dict, ctx: Context) -> None:
    """Train a trial's cell again where it is not in this outputs directory: a search resumed from its
    record (distil.search.saved_study) on a machine that never trained it. Content-keyed, at the trial's
    seed: the same run, so the report serves the student the trial scored."""
    if finished_here(ctx.root, row["cell"]) is not None:
        return
    cell = cell_of(ctx.preset, row["overrides"], f"trial {row['trial']}")
    ctx.say(f"trial {row['trial']}: its cell {row['cell']} is not in {ctx.root}; training it again for the report")
    error = ensure_cell(cell, ctx.root, ctx.extra)
    if error is not None:
        raise DistilError(f"trial {row['trial']}'s cell {row['cell']} failed to train again: {error}")


def test_score(row: dict, ctx: Context) -> float:
    """The Pareto student's test score as served: its run's own (eager), or its exported form's."""
    metrics = finished_here(ctx.root, row["cell"])
    if row["backend"] == "eager":
        return float(metrics["student"]["test"][row["metric"]])
    form = served(cell_dir(ctx.root, row["cell"]) / "student", row["backend"], ctx.preset.threads)
    return float(deployed_scores(form.student, ctx.task, ctx.test, ctx.label_names)[FORMS[row["backend"]]][
        row["metric"]])


def write_report(study, ctx: Context) -> dict:
    """The files above; what was written and the best trial (None: none within the limits)."""
    import pandas as pd

    rows = finished_rows(study)
    out = ctx.search_dir
    frame = pd.DataFrame(rows, columns=[*COLUMNS, "metric"])
    write_atomic(out / "trials.csv", frame.drop(columns="metric").to_csv(index=False))
    front = pareto_front([(row["dev"], row["ms"]) for row in rows])
    limits = ctx.preset.limits
    best = best_within([(row["dev"], row["ms"], row["size_mb"]) for row in rows], limits["max_latency_ms"],
                       limits["max_size_mb"])
    for i in sorted({*front, *([] if best is None else [best])}):
        trained_here(rows[i], ctx)
    pareto = frame.iloc[front].copy()
    pareto["test"] = [test_score(rows[i], ctx) for i in front]
    pareto = pareto.sort_values("ms")
    metric = rows[0]["metric"] if rows else "score"
    shown = pareto.drop(columns="metric").rename(columns={"dev": f"dev {metric}", "test": f"test {metric}"})
    write_atomic(out / "pareto.csv", shown.to_csv(index=False))
    write_atomic(out / "pareto.md", pareto_markdown(ctx, shown, len(rows)))
    plot(rows, front, metric, ctx, out / "pareto.png")
    if best is not None:
        write_best(rows[best], ctx, out / BEST)
    return {"trials": len(rows), "pareto": len(front), "best": None if best is None else rows[best]}


def text_columns(frame) -> list[int]:
    """The text columns' positions: a cell key of digits and one 'e' would otherwise print as a number."""
    if frame.empty:  # tabulate fails on positions of a table without rows
        return []
    return [i for i, column in enumerate(frame.columns) if frame[column].dtype == object]


def pareto_markdown(ctx: Context, shown, finished: int) -> str:
    preset = ctx.preset
    limits = ", ".join(f"{key} {value}" for key, value in preset.limits.items() if value is not None) or "none"
    lines = [f"# Search {preset.name}: the Pareto set", "",
             f"{len(shown)} of {finished} finished trials are on the Pareto front of dev score (up) against "
             f"latency (down). Latency is {preset.latency} on the dev texts, end to end, as the backend serves the "
             f"student: its median per-pass ratio to the reference [{' '.join(preset.reference)}] "
             f"(vs_reference) times the reference's median, {ctx.reference_median:.3f} ms. Every trial trained at "
             f"seed {preset.seed}. Test scores are read after the search, for these students only. Limits: {limits}.",
             "", to_markdown(shown, index=False, floatfmt=".4g", disable_numparse=text_columns(shown) or False), ""]
    return "\n".join(lines)


def plot(rows: list[dict], front: list[int], metric: str, ctx: Context, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([r["ms"] for r in rows], [r["dev"] for r in rows], color="0.7", label="trials")
    chosen = sorted((rows[i] for i in front), key=lambda r: r["ms"])
    ax.plot([r["ms"] for r in chosen], [r["dev"] for r in chosen], "o-", color="C3", label="Pareto set")
    for row in chosen:
        ax.annotate(f"{row['student']} ({row['backend']})", (row["ms"], row["dev"]), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))
    if ctx.preset.limits["max_latency_ms"] is not None:
        ax.axvline(ctx.preset.limits["max_latency_ms"], color="0.4", linestyle="--", label="latency limit")
    ax.set_xscale("log")
    ax.set_xlabel(f"ms per text ({ctx.preset.latency}, log scale)")
    ax.set_ylabel(f"dev {metric}")
    ax.set_title(f"distil search {ctx.preset.name}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=150)
    plt.close(fig)


def write_best(row: dict, ctx: Context, best: Path) -> None:
    """The best trial's student folder, exported where its backend needs it, with its card and the trial."""
    source = cell_dir(ctx.root, row["cell"]) / "student"
    if row["backend"] != "eager":
        served(source, row["backend"], ctx.preset.threads)  # exports it, if its timing has not
    tmp = best.with_name(best.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for part in [*STUDENT_PARTS, *([ONNX_FILES[row["backend"]]] if row["backend"] != "eager" else [])]:
        (shutil.copytree if (source / part).is_dir() else shutil.copy2)(source / part, tmp / part)
    (tmp / CARD).write_text(render_card(RunRecord.read(source.parent), tmp, None))
    write_json_atomic(tmp / "search.json", {**row, "search": ctx.preset.name,
                                            "study": ctx.preset.study_name, "limits": ctx.preset.limits,
                                            "reference_ms": ctx.reference_median, "latency": ctx.preset.latency})
    shutil.rmtree(best, ignore_errors=True)
    tmp.rename(best)
