"""A student folder's model card, README.md, rendered from its run's record.

It says what the student does (task, labels), where it came from (teacher and its fine-tuned
artifact, the cached targets, the transfer set's fingerprint, schedule, seed), how good it is (test
scores beside the teacher's), how big and fast, and the command that trains it again. It reads
metrics.json, and where they exist the run's .hydra/config.yaml (the teacher's source), a frontier
table's timing.json and the student folder's export.json (what `distil export` measured); what none of
them records is said to be unrecorded or not measured, never guessed.

How big and fast is said for each served form, PyTorch (eager), ONNX fp32 and ONNX int8: its file and
size, its one-text latency, its throughput and its test score, one row per source that measured it,
each naming its source: the run (the trained student's test scores and throughput), the frontier's
interleaved timing (timing.json: each form end to end, against the teacher) or distil export
(export.json: each form's model time on the test split, and its test score).

A run writes the cards when it ends (distil/run/pipeline.py); `distil card RUN_DIR` renders them again.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from distil import __version__
from distil.errors import DistilError
from distil.serve.onnx_session import EXPORT_RECORD, ONNX_FILES
from distil.serve.routing import student_folders

CARD = "README.md"
NOT_RECORDED = "not recorded"
# the Hub's pipeline for each task (a regression student's single output is text-classification there)
PIPELINES = {"classification": "text-classification", "pair": "text-classification",
             "regression": "text-classification", "tagging": "token-classification"}
INPUTS = {"classification": "one text", "pair": "a pair of texts, `(first, second)`", "regression": "one text",
          "tagging": "a sentence, tagged word by word (whitespace-split)"}
WEIGHTS = ("*.safetensors", "*.onnx")  # the files a card gives the size of
# what serves each of them (`distil export RUN_DIR [--int8]` writes the ONNX files), in the order listed
SERVED_BY = {"model.safetensors": "PyTorch", ONNX_FILES["onnx"]: "ONNX Runtime, `backend=\"onnx\"`",
             ONNX_FILES["onnx-int8"]: "ONNX Runtime int8, `backend=\"onnx-int8\"`"}
# each served form (timing.json's and export.json's key) -> (its name on the card, its file, its backend)
FORMS = {"eager": ("PyTorch (eager)", "model.safetensors", "torch"),
         "onnx": ("ONNX fp32", ONNX_FILES["onnx"], "onnx"), "int8": ("ONNX int8", ONNX_FILES["onnx-int8"], "onnx-int8")}
BY_RUN = "the run (metrics.json)"
BY_FRONTIER = "the frontier's interleaved timing (timing.json)"
BY_EXPORT = "distil export (export.json)"
NOT_MEASURED = "not measured"


@dataclass
class RunRecord:
    """What a finished run left: metrics.json, and its composed config and timing where they exist."""

    run_dir: Path
    metrics: dict
    config: dict | None  # .hydra/config.yaml
    timing: dict | None  # timing.json (a frontier table's cell)

    @classmethod
    def read(cls, run_dir: Path) -> RunRecord:
        path = run_dir / "metrics.json"
        if not path.is_file():
            raise DistilError(f"{run_dir} has no metrics.json; pass the directory of a finished run")
        metrics = json.loads(path.read_text())
        if metrics.get("status") != "ok":
            raise DistilError(f"{run_dir} did not finish (status: {metrics.get('status')}); its student has no card")
        config_path, timing_path = run_dir / ".hydra" / "config.yaml", run_dir / "timing.json"
        return cls(run_dir, metrics, yaml.safe_load(config_path.read_text()) if config_path.is_file() else None,
                   json.loads(timing_path.read_text()) if timing_path.is_file() else None)

    def get(self, *keys: str, source: str = "metrics"):
        """A nested field, or None where the record lacks it."""
        value = getattr(self, source)
        for key in keys:
            if not isinstance(value, dict) or key not in value:
                return None
            value = value[key]
        return value


def write_cards(run_dir: Path) -> list[Path]:
    """README.md in every student folder of a finished run; a schedule=d0 run's directory gets one too,
    for the students of every language it serves together."""
    run_dir = Path(run_dir)
    record = RunRecord.read(run_dir)
    folders = student_folders(run_dir)
    if folders == {None: run_dir}:
        raise DistilError(f"{run_dir} holds no student folder (student/ or student-<lang>/)")
    written = []
    for language, folder in folders.items():
        (folder / CARD).write_text(render_card(record, folder, language))
        written.append(folder / CARD)
    if None not in folders:
        (run_dir / CARD).write_text(render_card(record, run_dir, None, languages=list(folders)))
        written.append(run_dir / CARD)
    return written


def render_card(record: RunRecord, folder: Path, language: str | None, languages: list[str] | None = None) -> str:
    """The card of the student in `folder` (`language`: one of a schedule=d0 run's; `languages`: all of
    them, for the run directory's card)."""
    choices = record.get("choices") or {}
    task = record.get("task")
    title = f"{choices.get('student', 'student')} distilled from {choices.get('teacher', 'a teacher')} " \
            f"on {choices.get('dataset', 'a dataset')}{f' ({language})' if language else ''}"
    parts = [front_matter(task, language), f"# {title}", summary(record, language, languages),
             task_section(record, task), scores_section(record, language), provenance_section(record),
             size_section(record, folder, language), use_section(record, folder, languages),
             reproduce_section(record), warnings_section(record), footer(record, folder)]
    return "\n\n".join(part for part in parts if part) + "\n"


def front_matter(task: str | None, language: str | None) -> str:
    lines = ["---", "library_name: distil", "tags: [distil, knowledge-distillation]"]
    if task in PIPELINES:
        lines.append(f"pipeline_tag: {PIPELINES[task]}")
    if language:
        lines.append(f"language: [{language}]")
    return "\n".join([*lines, "---"])


def summary(record: RunRecord, language: str | None, languages: list[str] | None) -> str:
    choices = record.get("choices") or {}
    text = (f"A `{choices.get('student', NOT_RECORDED)}` student distilled by distil from "
            f"the fine-tuned teacher `{choices.get('teacher', NOT_RECORDED)}` with schedule "
            f"`{choices.get('schedule', NOT_RECORDED)}`, on the `{choices.get('dataset', NOT_RECORDED)}` data.")
    if languages:
        text += (f" It is one student per language ({', '.join(languages)}), each trained on its language alone "
                 f"(XtremeDistil D0): each `student-<lang>/` folder holds one, and `students.json` lists them.")
    elif language:
        text += f" It is the `{language}` student of a per-language set (XtremeDistil D0)."
    return text


def task_section(record: RunRecord, task: str | None) -> str:
    labels = record.get("data", "labels")
    if task == "regression":
        outputs = "a score"
    elif labels:
        outputs = ", ".join(f"`{label}`" for label in labels)
        if task == "tagging":
            outputs += " (IOB2 tags; word pieces after a word's first carry `X`, read as `O`)"
    else:
        outputs = NOT_RECORDED
    return "\n".join(["## Task", "", f"- task: {task or NOT_RECORDED}; input: {INPUTS.get(task, NOT_RECORDED)}",
                      f"- {'output' if task == 'regression' else 'labels'}: {outputs}"])


def scores_section(record: RunRecord, language: str | None) -> str:
    metrics = record.get("metrics") or []
    primary = record.get("metric")
    splits = ["test", *(record.get("extra_tests") or [])]
    lines = ["## Scores", "", f"Held-out splits, in % ({primary or 'the primary metric'} selected the student on "
                              f"dev; test was never used to choose). The teacher is the fine-tuned model it "
                              f"learned from.", ""]
    if language:  # one language's student: the primary metric per language is what the run records
        lines += ["| split | metric | student | teacher |", "|---|---|---|---|"]
        for split in splits:
            lines.append(f"| {split} | {primary} | {percent(record.get('student', split, 'per_language', language))} | "
                         f"{percent(record.get('teacher', split, 'per_language', language))} |")
        return "\n".join(lines)
    lines += ["| split | metric | student | teacher | majority class |", "|---|---|---|---|---|"]
    for split in splits:
        for metric in metrics:
            lines.append(f"| {split} | {metric} | {percent(record.get('student', split, metric))} | "
                         f"{percent(record.get('teacher', split, metric))} | "
                         f"{percent(record.get('majority_baseline', split, metric))} |")
    per_language = record.get("student", "test", "per_language")
    if per_language:
        lines += ["", f"Test {primary} per language: " + ", ".join(
            f"{lang} {percent(value)} (teacher {percent(record.get('teacher', 'test', 'per_language', lang))})"
            for lang, value in per_language.items()) + "."]
    return "\n".join(lines)


def provenance_section(record: RunRecord) -> str:
    teacher_source = record.get("teacher", "name_or_path", source="config")
    fingerprint = record.get("artifacts", "transfer_fingerprint")
    sizes = record.get("data", "sizes") or {}
    rows = [
        ("teacher", f"`{record.get('choices', 'teacher')}` "
                    + (f"(from `{teacher_source}`)" if teacher_source else f"(its source: {NOT_RECORDED})")),
        ("fine-tuned teacher (artifact key)", code(record.get("artifacts", "teacher"), "teachers/")),
        ("teacher targets (cache key)", code(record.get("artifacts", "targets"), "targets/")),
        ("transfer set", f"{sizes.get('transfer', NOT_RECORDED)} examples, fingerprint "
                         + (f"`sha256:{fingerprint}`" if fingerprint else f"{NOT_RECORDED} (a run before the "
                                                                          f"fingerprint was recorded)")),
        ("data", f"`{record.get('choices', 'dataset')}`: " + ", ".join(f"{k} {v}" for k, v in sizes.items())),
        ("schedule", schedule_text(record)),
        ("seed", str(record.get("choices", "seed") if record.get("choices", "seed") is not None else NOT_RECORDED)),
        ("trained on", runtime_text(record.get("runtime"))),
    ]
    return "\n".join(["## How it was made", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)])


def schedule_text(record: RunRecord) -> str:
    stages = record.get("student", "stages")
    if isinstance(stages, dict):  # a student per language: the stages are alike, the first language's tell them
        stages = next(iter(stages.values()), [])
    described = "; ".join(f"{stage.get('name')}: {' + '.join(stage.get('losses') or {})} on "
                          f"{' + '.join(stage.get('data') or [])}" for stage in stages or [])
    return f"`{record.get('choices', 'schedule')}`" + (f" ({described})" if described else "")


def runtime_text(runtime: dict | None) -> str:
    if not runtime:
        return NOT_RECORDED
    return f"{runtime.get('device')} ({runtime.get('name')}), {runtime.get('precision')}"


def size_section(record: RunRecord, folder: Path, language: str | None) -> str:
    counts = record.get("student", "param_counts") or {}
    params = (counts.get("per_model") or {}).get(language, {}).get("deployed") if language \
        else record.get("student", "params")
    teacher = record.get("teacher", "params")
    ratio = f" ({size_ratio(params, teacher)} the teacher's {teacher:,})" if params and teacher else ""
    rows = [("parameters (deployed)", f"{params:,}{ratio}" if params else NOT_RECORDED),
            ("files", files_text(folder))]
    return "\n".join(["## Size and speed", "", "| | |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), "",
                      forms_text(record, folder, language, per_language=bool(counts.get("per_model")))])


def forms_text(record: RunRecord, folder: Path, language: str | None, per_language: bool) -> str:
    """Each served form's file, one-text latency, throughput and test score, a row per source that
    measured it (the form's row says "not measured" where none did); a schedule=d0 run's directory
    points to its students' own cards."""
    if per_language and language is None:
        return "Each `student-<lang>/` folder's card gives its student's served forms, sizes and speed."
    metric = record.get("metric") or NOT_RECORDED
    export_path = folder / EXPORT_RECORD
    export = json.loads(export_path.read_text()) if export_path.is_file() else {}
    timing = record.timing if language is None else None  # a frontier table's cell: one student, no languages
    lines = [f"| served as | file | one text | throughput | test {metric} | measured by |", "|---|---|---|---|---|---|"]
    for form, (name, file, backend) in FORMS.items():
        path = folder / file
        shown = f"`{file}` {megabytes(path)}" if path.is_file() else "not in the folder"
        rows = [*([run_measures(record, language, per_language)] if form == "eager" else []),
                *([frontier_measures(timing, form, metric, record, language)] if timing and (
                    form == "eager" or timing.get(form)) else []),
                *([export_measures(export[form], metric)] if export.get(form) else [])]
        for one, rate, test, source in rows or [(NOT_MEASURED, NOT_MEASURED, NOT_MEASURED, "nothing yet")]:
            lines.append(f"| {name}, `backend=\"{backend}\"` | {shown} | {one} | {rate} | {test} | {source} |")
    return "\n".join([*lines, "", FORMS_NOTE])


FORMS_NOTE = ("The frontier's timing serves each form end to end (text in, logits out, tokenisation included) in "
              "one interleaved run with the teacher, on the table's threads; distil export times the model alone "
              "on inputs encoded before the clock, the fastest pass over the test split; the run times its "
              "trained student, model time only. Not measured: `distil export RUN_DIR --int8` measures the exports, a "
              "frontier table's timing writes timing.json, then `distil card RUN_DIR` shows them.")


def run_measures(record: RunRecord, language: str | None, per_language: bool) -> tuple[str, str, str, str]:
    """The trained student as the run measured it: its throughput and its test score."""
    test = record.get("student", "test", "per_language", language) if language else \
        record.get("student", "test", record.get("metric") or "")
    rate = throughput_text(record.get("speed") or {}, record.get("runtime"), per_language)
    return NOT_MEASURED, rate, percent_or_not(test), BY_RUN


def frontier_measures(timing: dict, form: str, metric: str, record: RunRecord,
                      language: str | None) -> tuple[str, str, str, str]:
    """A form as the frontier's timing measured it (timing.json: the eager student's fields at its top,
    each deployed form's under its key, its test scores with it)."""
    block = timing if form == "eager" else timing[form]
    one = (f"{block['single_ms']:.3f} ms end to end ({block.get('single_speedup', 0):.1f}x the teacher's)"
           if block.get("single_ms") is not None else NOT_MEASURED)
    rate = (f"{block['batch32_ex_per_s']:,.0f} examples/s end to end, batches of 32 "
            f"({block.get('speedup', 0):.1f}x the teacher's)" if block.get("batch32_ex_per_s") is not None
            else NOT_MEASURED)
    if form == "eager":  # the timing scores the deployed forms; the trained student's score is the run's
        test = f"{percent_or_not(record.get('student', 'test', metric))} (the run's)"
    else:
        test = percent_or_not((block.get("test") or {}).get(metric))
    return one, rate, test, BY_FRONTIER


def export_measures(block: dict, metric: str) -> tuple[str, str, str, str]:
    """A form as `distil export` measured it (export.json): model time in batches of 32, its test score."""
    rate = f"{block['ex_per_s']:,.0f} examples/s, model time only, batches of 32" \
        if block.get("ex_per_s") is not None else NOT_MEASURED
    return NOT_MEASURED, rate, percent_or_not((block.get("test") or {}).get(metric)), BY_EXPORT


def percent_or_not(value) -> str:
    return percent(value) if isinstance(value, int | float) else NOT_MEASURED


def files_text(folder: Path) -> str:
    """Each weights file with its size and what serves it; the int8 export beside the fp32 one."""
    found = sorted((path for pattern in WEIGHTS for path in folder.rglob(pattern)),
                   key=lambda path: (list(SERVED_BY).index(path.name) if path.name in SERVED_BY else len(SERVED_BY),
                                     str(path)))
    fp32 = folder / ONNX_FILES["onnx"]
    described = []
    for path in found:
        notes = [SERVED_BY[path.name]] if path.parent == folder and path.name in SERVED_BY else []
        if path == folder / ONNX_FILES["onnx-int8"] and fp32.is_file():
            notes.append(f"{path.stat().st_size / fp32.stat().st_size:.2f}x the fp32 file")
        described.append(f"`{path.relative_to(folder)}` {megabytes(path)}"
                         + (f" ({'; '.join(notes)})" if notes else ""))
    return ", ".join(described) or "none yet"


def size_ratio(params: int, teacher: int) -> str:
    return f"{teacher / params:.1f}x fewer than" if params <= teacher else f"{params / teacher:.1f}x as many as"


def throughput_text(speed: dict, runtime: dict | None, per_language: bool) -> str:
    if not speed.get("student_ex_per_s"):
        return NOT_MEASURED
    return (f"{speed['student_ex_per_s']:,.0f} examples/s, teacher {speed.get('teacher_ex_per_s', 0):,.0f} "
            f"({speed.get('speedup', 0):.1f}x), in batches of {speed.get('batch_size')} on "
            f"{(runtime or {}).get('device', NOT_RECORDED)}, model time only"
            + (" on its first language's student" if per_language else ""))


def use_section(record: RunRecord, folder: Path, languages: list[str] | None) -> str:
    path = "."  # the card's own folder: a student folder, or a schedule=d0 run's directory
    exported = [backend for backend in ("onnx-int8", "onnx") if any(folder.rglob(ONNX_FILES[backend]))]
    backend = (f"backend=\"{exported[0]}\" serves its ONNX export" if exported
               else "backend=\"onnx\" after `distil export RUN_DIR`")
    pick = f", language=\"{languages[0]}\"" if languages else ""
    example = {"pair": '[("first sentence", "second sentence")]', "tagging": '["Anna lives in Paris"]'} \
        .get(record.get("task"), '["a text to label"]')
    lines = ["## Use", "", "```python", "from distil import Student", "",
             f"student = Student.load(\"{path}\"{pick})   # {backend}",
             f"student.predict({example})", "```", "", "```bash",
             f"distil predict {path} --file texts.txt --jsonl" + (f" --language {languages[0]}" if languages else ""),
             "```"]
    if languages:
        lines += ["", "Without `language`, each text goes to the student whose vocabulary knows most of its tokens."]
    return "\n".join(lines)


def reproduce_section(record: RunRecord) -> str:
    overrides = record.get("overrides")
    if overrides is None:
        return f"## Reproduce\n\nThe command line: {NOT_RECORDED}."
    command = " ".join(["distil", *(shlex.quote(override) for override in overrides)])
    return "\n".join(["## Reproduce", "", "```bash", command, "```", "",
                      "with the same code, data and configuration directory (the code's version is not recorded "
                      "in metrics.json); the fine-tuned teacher and its targets are reused from the cache when "
                      "their keys match."])


def warnings_section(record: RunRecord) -> str:
    warnings = [*(record.get("warnings") or [])]
    if record.get("teacher", "finetune", "warning"):
        warnings.append(record.get("teacher", "finetune", "warning"))
    return "\n".join(["## Warnings", "", *(f"- {warning}" for warning in warnings)]) if warnings else ""


def footer(record: RunRecord, folder: Path) -> str:
    read = ["metrics.json", *([".hydra/config.yaml"] if record.config else []),
            *(["timing.json"] if record.timing else [])]
    exported = f" and the folder's {EXPORT_RECORD}" if (folder / EXPORT_RECORD).is_file() else ""
    return (f"---\n\nRendered by distil {__version__} from the run's {', '.join(read)}{exported}. The folder is "
            f"laid out for `huggingface_hub.upload_folder(folder_path=..., repo_id=...)`; uploading was not tested "
            f"(distil runs offline).")


def percent(value) -> str:
    return f"{100 * value:.2f}" if isinstance(value, int | float) else "-"


def code(key: str | None, prefix: str) -> str:
    return f"`{prefix}{key}`" if key else NOT_RECORDED


def megabytes(path: Path) -> str:
    return f"{path.stat().st_size / 1e6:.2f} MB"
