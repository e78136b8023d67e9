"""Rich tables printed at the end of a run."""

from __future__ import annotations

import math

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text


def percent(value: float | None, missing: str = "-") -> str:
    """A score in percent; NaN (the correlation of a constant prediction) is shown as what it is."""
    if value is None:
        return missing
    return "undefined" if math.isnan(value) else f"{100 * value:.2f}"


def _params(n: int | None) -> str:
    return "-" if n is None else f"{n / 1e6:.2f}M"


def _count(n: int | None) -> str:
    if n is None:
        return "-"
    return f"{n / 1e6:.2f}M" if n >= 1e6 else f"{n / 1e3:.1f}k" if n >= 1e3 else str(n)


def _compression(teacher: dict, student: dict) -> str:
    """Deployed parameters (no training-only projection head), then as the papers count: with the
    teacher's full vocabulary (Mukherjee & Awadallah T7, XtremeDistil T16), without embeddings (Wu T2)."""
    text = f"{teacher['params'] / student['params']:.1f}x smaller"
    t, s = teacher.get("param_counts"), student.get("param_counts")
    if not (t and s):  # metrics.json written before parameter accounting
        return text
    counted = {"full_teacher_vocab": "with the teacher's full vocabulary", "without_embeddings": "without embeddings"}
    ratios = [f"{t[key] / s[key]:.1f}x {label}" for key, label in counted.items() if s[key]]
    if s.get("models", 1) > 1:
        ratios.append(f"all {s['models']} per-language students counted")
    return f"{text} ({', '.join(ratios)})" if ratios else text


FLOOR_ROWS = {"mean_predictor": "mean predictor", "all_O": "all O", "word_lookup": "word lookup"}


def run_table(metrics: dict) -> Table:
    """Teacher, student and majority class on dev, test and any extra test split (MNLI's
    mismatched), one column per reported metric (e.g. MRPC's accuracy and F1)."""
    choices, metric = metrics["choices"], metrics["metric"]
    teacher, student, speed = metrics["teacher"], metrics["student"], metrics.get("speed", {})
    columns = [(split, name) for split in ("dev", "test", *metrics.get("extra_tests", []))
               for name in metrics.get("metrics", [metric])]
    table = Table(title=f"{choices['teacher']} -> {choices['student']} | schedule {choices['schedule']}"
                        f" | {choices['dataset']} (test split, held out; {metric} selects on dev)")
    for column in ("model", "params", *(f"{split} {name} %" for split, name in columns), "examples/s (batch 32)"):
        table.add_column(column, justify="left" if column == "model" else "right")

    def scores(of: dict) -> list[str]:
        return [percent(of[split].get(name)) if split in of else "-" for split, name in columns]

    def floor_scores(floor: dict) -> list[str]:  # None: a score the floor has no value for (undefined)
        return [("undefined" if floor[split].get(name) is None else percent(floor[split][name]))
                if isinstance(floor.get(split), dict) else "-" for split, name in columns]

    table.add_row(f"teacher {choices['teacher']}", _params(teacher["params"]), *scores(teacher),
                  f"{speed.get('teacher_ex_per_s', 0):.0f}" if speed else "-")
    table.add_row(f"student {choices['student']}", _params(student["params"]), *scores(student),
                  f"{speed.get('student_ex_per_s', 0):.0f}" if speed else "-")
    if "majority_baseline" in metrics:
        table.add_row("majority class", "-", *scores(metrics["majority_baseline"]), "-")
    for name, floor in metrics.get("floors", {}).items():  # the majority class has its row above
        if name != "majority_class":
            table.add_row(FLOOR_ROWS.get(name, name), "-", *floor_scores(floor), "-")
    caption = f"student is {_compression(teacher, student)}"
    if speed:
        caption += f" and {speed['speedup']:.1f}x faster at inference"
    if math.isfinite(teacher["test"][metric]) and teacher["test"][metric]:
        caption += (f"; it keeps {100 * student['test'][metric] / teacher['test'][metric]:.1f}% "
                    f"of the teacher's test {metric}")
    table.caption = caption
    return table


def language_table(metrics: dict) -> Table | None:
    """Teacher vs student test score per language, for multilingual datasets."""
    metric = metrics["metric"]
    teacher, student = metrics["teacher"]["test"], metrics["student"]["test"]
    if "per_language" not in teacher or "per_language" not in student:
        return None
    table = Table(title=f"test {metric} % per language")
    for column in ("language", "teacher", "student"):
        table.add_column(column, justify="left" if column == "language" else "right")
    for lang, value in teacher["per_language"].items():
        table.add_row(lang, percent(value), percent(student["per_language"].get(lang)))
    std = f"{metric}_std"
    if std in teacher:
        table.add_row("mean ± std", f"{percent(teacher[metric])} ± {percent(teacher[std])}",
                      f"{percent(student[metric])} ± {percent(student.get(std))}")
    return table


def _with_spread(scores: dict, metric: str) -> str:
    """The score, and its standard deviation over languages where there is one (Table 4's Std. Dev.)."""
    spread = scores.get(f"{metric}_std")
    return percent(scores[metric]) if spread is None else f"{percent(scores[metric])} ± {percent(spread)}"


def stages_table(metrics: dict) -> Table | None:
    """The student's progression through its schedule: one row per stage and unfreezing
    step, as XtremeDistil Table 4 reports it (stage, unfreezing layer, test score and its
    spread over languages; test is shown, never used to choose)."""
    records, metric = metrics["student"].get("stages"), metrics["metric"]
    if not isinstance(records, list):  # one student per language: see metrics.json
        return None
    # Compact (no vertical rules, short headers, metric in the title) so that a run logged
    # to a file, which rich renders 80 columns wide, stays readable.
    table = Table(title=f"schedule {metrics['choices']['schedule']}: every stage and unfreezing step "
                        f"({metric} %, dev selects, test only reported)", box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("stage", "step", "losses", "data", "trains", "epoch best/run", "selected on",
                   "dev", "dev loss", "test", "s"):
        table.add_column(column, justify="left" if column in ("stage", "step", "losses", "data") else "right")
    for r in records:
        losses = " + ".join(name if weight == 1 else f"{weight:g}·{name}" for name, weight in r["losses"].items())
        table.add_row(r["name"], "all" if r["step"] == "all" else f"+ {r['step']}", losses,
                      " + ".join(r["data"]), _count(r.get("trainable_params")), f"{r['best_epoch']}/{r['epochs_run']}",
                      r.get("selected_on", "-").removeprefix("dev "), percent(r["dev"][metric]),
                      f"{r.get('dev_loss', float('nan')):.3f}", _with_spread(r["test"], metric), f"{r['seconds']:.0f}")
    return table


def print_run(metrics: dict) -> None:
    console = Console()
    if not console.is_terminal:  # a log file has no width: do not squeeze the tables to 80 columns
        console.width = max(console.width, 140)
    stages = stages_table(metrics)
    if stages is not None:
        console.print(stages)
    console.print(run_table(metrics))
    for warning in metrics.get("warnings", []):  # distil.run.flags: status ok, result suspect
        console.print(Text.assemble(("warning: ", "bold red"), warning))
    languages = language_table(metrics)
    if languages is not None:
        console.print(languages)
