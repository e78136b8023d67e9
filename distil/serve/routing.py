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


def run_students(path: Path) -> tuple[Path, dict[str | None, Path]]:
    """(the run directory, its student folders as `student_folders` gives them) of a run directory or of
    one of its student folders (then that folder alone): what `distil export` and `distil bench deploy`
    read, each folder with the run's configuration (.hydra/config.yaml) beside it. A peer's folder
    (student=peer-*, another tool's model) is refused: it has no graph to export."""
    path = Path(path)
    if not path.is_dir():
        raise DistilError(f"{path} is not a directory; pass a run directory written by `distil` "
                          f"(outputs/runs/<date>/<time>)")
    if (path / "config.json").is_file() and (path.parent / ".hydra").is_dir():  # a run's student folder
        run_dir = path.parent
        named = {language: folder for language, folder in student_folders(run_dir).items()
                 if folder.resolve() == path.resolve()}
        folders = named or {None: path}
    elif not (path / ".hydra" / "config.yaml").is_file():
        raise DistilError(f"{path} is not a run directory (it has no .hydra/config.yaml, the run's configuration); "
                          f"pass one written by `distil`, e.g. outputs/runs/<date>/<time>")
    else:
        run_dir, folders = path, student_folders(path)
        if folders == {None: path}:
            raise DistilError(f"{path} holds no saved student ({SINGLE}/ or {PER_LANGUAGE}<lang>/): the run did not "
                              f"finish (see the status in its metrics.json); rerun it, then export")
    for folder in folders.values():
        check_not_peer(folder)
    return run_dir, folders


def check_not_peer(folder: Path) -> None:
    """A peer's folder (student=peer-*) holds another tool's model, which has no graph to export."""
    try:
        student = json.loads((folder / "config.json").read_text())["student"]
    except (OSError, ValueError, KeyError, TypeError):
        return  # SavedStudent says what is wrong with the folder
    if isinstance(student, dict) and student.get("kind") == "peer":
        raise DistilError(f"{folder} holds a peer (student={student.get('name')}), another tool's model, not a "
                          f"distil student; export a run of a distil student (bilstm, static, transformer, ...)")


def pick_language(folders: dict[str | None, Path], language: str | None) -> dict[str | None, Path]:
    """The folders to load: the named language's alone, or every one (routed text by text)."""
    if language is None:
        return folders
    if list(folders) == [None]:
        raise DistilError(f"language '{language}' was given but {folders[None]} is one student for every "
                          f"language (a student per language is what schedule=d0 saves on a dataset of several "
                          f"languages); drop --language (language= in Python)")
    if language not in folders:
        raise DistilError(f"no student for language '{language}'; this run has: {', '.join(folders)}")
    return {language: folders[language]}
