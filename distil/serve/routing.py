"""Which student folder serves a text: a run's one student, or, for XtremeDistil D0, one per language.

A D0 run (schedule=d0 on a multilingual dataset) saves a student per language in
RUN_DIR/student-<lang>/, and the run directory is the one folder that serves them: students.json
beside them lists the languages and their folders. A text goes to the student of the language
named (`language=`, `distil predict --language`); with none named, to the student whose vocabulary
knows most of the text's tokens (`route_by_vocabulary`), since a text does not say its language.
"""

from __future__ import annotations

import json
from pathlib import Path

from distil.common.atomic import write_json_atomic
from distil.errors import DistilError

ROUTING_FILE = "students.json"
SINGLE = "student"  # a run's one student
PER_LANGUAGE = "student-"  # D0: student-<lang>


def write_routing(run_dir: Path, languages: list[str]) -> None:
    """students.json of a D0 run: its languages, each with its folder (relative to the run directory)."""
    write_json_atomic(run_dir / ROUTING_FILE, {
        "route": "by language: the one named, else the one whose student's vocabulary knows most of the text",
        "languages": {language: f"{PER_LANGUAGE}{language}" for language in languages},
    })


def student_folders(path: Path) -> dict[str | None, Path]:
    """The student folders `path` holds: {None: folder} for one student (a run directory, or a student
    folder itself), {language: folder} for a D0 run's students."""
    path = Path(path)
    if (path / ROUTING_FILE).is_file():
        languages = json.loads((path / ROUTING_FILE).read_text())["languages"]
        return {language: path / folder for language, folder in languages.items()}
    if (path / SINGLE).is_dir():
        return {None: path / SINGLE}
    # a D0 run written before students.json: its student-<lang>/ folders
    per_language = sorted(folder for folder in path.glob(f"{PER_LANGUAGE}*") if folder.is_dir())
    if per_language:
        return {folder.name.removeprefix(PER_LANGUAGE): folder for folder in per_language}
    return {None: path}


def pick_language(folders: dict[str | None, Path], language: str | None) -> dict[str | None, Path]:
    """The folders to load: the named language's alone, or every one (routed text by text)."""
    if language is None:
        return folders
    if list(folders) == [None]:
        raise DistilError(f"language '{language}' was given but {folders[None]} is one student for every "
                          f"language (not a schedule=d0 run); drop the language")
    if language not in folders:
        raise DistilError(f"no student for language '{language}'; this run has: {', '.join(folders)}")
    return {language: folders[language]}
