"""Every command that README.md and the tutorials (docs/tutorial/*.md) show in a ```bash block still parses,
without running anything:

- `distil key=value ...` and `distil -m ...`: the config composes (each value of a sweep);
- `distil SUB ...`: its parser takes the arguments (the overrides of `data`, `pretrain`, `paper wu-table5`
  compose; the presets `table` names exist, and the rows and columns its --only names);
- `make TARGET ...`: `make -n` knows the target, and the `distil` commands it would run pass the above.

The docs' own config folder (```yaml blocks that name their file, `# myconf/dataset/cola.yaml`) is written
to a project directory, $PWD of the commands, so `dataset=cola` composes as a reader's would.
A failure names the file, the line and why.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import itertools
import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs" / "tutorial").glob("*.md"))]
SHELL_FENCES = {"bash", "sh", "shell", "console"}
YAML_FILE = re.compile(r"^#\s*(\S+\.ya?ml)\b")  # a yaml block's comment naming its file
PLACEHOLDER = re.compile(r"<([^<>\n]+)>")  # <run dir>, <date>/<time>: a value the reader fills in


@dataclass
class Command:
    path: Path
    line: int
    text: str

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}: {self.text}"


def fenced_blocks(path: Path) -> list[tuple[str, int, list[str]]]:
    """(language, line number of its first line, lines) of every fenced block."""
    blocks, language, start, lines = [], None, 0, []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        fence = re.match(r"^\s*(```+|~~~+)\s*([\w-]*)", line)
        if fence and language is None:
            language, start, lines = fence.group(2) or "text", number + 1, []
        elif fence and language is not None:
            blocks.append((language, start, lines))
            language = None
        elif language is not None:
            lines.append(line)
    return blocks


def shell_lines(path: Path) -> list[Command]:
    """The lines of a doc's shell blocks, a line ending in `\\` joined with the next."""
    commands = []
    for language, start, lines in fenced_blocks(path):
        if language not in SHELL_FENCES:
            continue
        pending, first = "", 0
        for offset, line in enumerate(lines):
            if not pending:
                first = start + offset
            if line.rstrip().endswith("\\"):
                pending += line.rstrip()[:-1] + " "
                continue
            text = (pending + line).strip()
            pending = ""
            if text and not text.startswith("#"):
                commands.append(Command(path, first, text))
    return commands


def doc_config_files() -> dict[str, str]:
    """relative path -> text of every ```yaml block in the docs that names its file in a first comment."""
    files = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for language, _, lines in fenced_blocks(path):
            if language in ("yaml", "yml"):
                for line in lines[:3]:
                    named = YAML_FILE.match(line.strip())
                    if named and not named.group(1).startswith(("/", "distil/")):
                        files[named.group(1)] = "\n".join(lines) + "\n"
                        break
    return files


class Parsed(Exception):
    """A subcommand's parser took the arguments: stop before the command does anything."""

    def __init__(self, namespace: argparse.Namespace) -> None:
        self.namespace = namespace


@contextlib.contextmanager
def parse_only():
    """Every argparse parser raises Parsed once it has parsed, so a subcommand parses and runs nothing."""
    patches = []
    for name in ("parse_args", "parse_intermixed_args"):
        original = getattr(argparse.ArgumentParser, name)

        def parse(self, *args, _original=original, **kwargs):
            raise Parsed(_original(self, *args, **kwargs))

        patches.append(mock.patch.object(argparse.ArgumentParser, name, parse))
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


@contextlib.contextmanager
def environment(env: dict[str, str]):
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.update({key: value})


def sweep_variants(overrides: list[str]) -> list[list[str]]:
    """A sweep's runs to compose: the first value of every swept key, then each other value of one key at
    a time (every value composes without composing the whole grid)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    choices = []
    for override in overrides:
        key = override.partition("=")[0]
        parsed = parser.parse_override(override)
        values = list(parsed.sweep_string_iterator()) if parsed.is_sweep_override() else None
        choices.append([f"{key}={value}" for value in values] if values else [override])
    first = [options[0] for options in choices]
    variants = [first]
    for i, options in enumerate(choices):
        variants += [first[:i] + [option] + first[i + 1:] for option in options[1:]]
    return variants


def compose_problem(overrides: list[str]) -> str | None:
    """Composed as `distil` would (DISTIL_CONFIG_DIR included), by the two-step composition the tables use:
    runs that differ only in values share one composition of their groups."""
    from distil.config.compose import compose_overrides
    from distil.config.overrides import CONFIG_DIR_ENV
    from distil.config.schema import check_config

    try:
        cfg = compose_overrides(overrides, os.environ.get(CONFIG_DIR_ENV))
    except Exception as error:  # ComposeProblem (a bad override or value); anything else is as bad
        return f"does not compose: {error}"
    try:
        check_config(cfg)  # what a run checks before it reads data: every value in its range
    except Exception as error:
        return f"a run would stop at once: {error}"
    return None


def run_problem(args: list[str], project: Path) -> str | None:
    """`distil [run] ...`: Hydra's own parser takes the flags, and the config composes."""
    from hydra._internal.utils import get_args_parser

    args = args[1:] if args[:1] == ["run"] else args
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            parser = get_args_parser()
            parser.prog = "distil"
            flags = parser.parse_args(args)
    except SystemExit:
        return f"distil does not take these arguments: {err.getvalue().strip().splitlines()[-1]}"
    overrides = list(flags.overrides)
    if flags.config_dir:  # what Hydra does with --config-dir: one more config folder to search
        overrides.append(f"hydra.searchpath=[file://{(project / flags.config_dir).resolve()}]")
    for variant in sweep_variants(overrides) if flags.multirun else [overrides]:
        if problem := compose_problem(variant):
            return problem
    return None


def table_problem(namespace: argparse.Namespace) -> str | None:
    """The presets `distil table` names exist, and each --only label is a row or column of one of them."""
    from distil.tables.load import load_preset

    labels = set()
    for name in namespace.names:
        try:
            preset = load_preset(name)
        except Exception as error:
            return str(error)
        labels |= {axis.label for axis in [*preset.rows, *preset.columns]}
    unknown = [label for label in namespace.only if namespace.names and label not in labels]
    return f"--only {unknown[0]!r} is no row or column of {', '.join(namespace.names)}" if unknown else None


def subcommand_problem(name: str, args: list[str]) -> str | None:
    from distil.cli.main import SUBCOMMANDS

    help_asked = any(arg in ("-h", "--help") for arg in args)
    if name == "data" and args and not args[0].startswith("-"):  # `distil data DATASET key=value ...`
        return compose_problem([f"dataset={args[0].removeprefix('dataset=')}", *args[1:]])
    if name == "pretrain" and not help_asked:  # `distil pretrain key=value ...`
        return compose_problem(args)
    module, function, _ = SUBCOMMANDS[name]
    command = getattr(importlib.import_module(f"distil.cli.{module}"), function)
    try:
        with parse_only(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()) as err:
            command(args, prog=f"distil {name}")
    except Parsed as parsed:
        if name == "table":
            return table_problem(parsed.namespace)
        if getattr(parsed.namespace, "overrides", None):  # distil paper wu-table5 key=value ...
            return compose_problem(parsed.namespace.overrides)
        return None
    except SystemExit as exit_:
        if exit_.code in (0, None) and help_asked:
            return None
        return (err.getvalue().strip().splitlines() or [f"exit {exit_.code}"])[-1]
    # a subcommand that reads its arguments without argparse ran (data and pretrain are handled above)
    return None if help_asked else f"distil {name} ran without parsing its arguments (the test cannot check it)"


def distil_problem(args: list[str], project: Path) -> str | None:
    from distil.cli.main import SUBCOMMANDS

    if args and args[0] in SUBCOMMANDS:
        return subcommand_problem(args[0], args[1:])
    return run_problem(args, project)


def make_problem(args: list[str], project: Path) -> str | None:
    """`make -n` knows the targets; the `distil` commands it would run are checked as above."""
    done = subprocess.run(["make", "-n", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    if done.returncode:
        return f"make -n: {(done.stderr.strip().splitlines() or ['failed'])[-1]}"
    for line in done.stdout.splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["distil"] and (problem := distil_problem(words[1:], project)):
            return f"it runs `{line.strip()}`, which {problem}"
    return None


def problem_of(command: Command, project: Path, exported: dict[str, str]) -> str | None:
    """Why the command would not parse, or None; `export VAR=...` lines set VAR for the file's later lines."""
    env = {"PWD": str(project), **exported}
    text = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), os.environ.get(m.group(1), m.group(0))),
                  command.text)
    text = PLACEHOLDER.sub(lambda m: m.group(1).replace(" ", "-"), text)  # <run dir> -> run-dir
    try:
        words = shlex.split(text, comments=True)
    except ValueError as error:
        return f"the shell cannot split it ({error})"
    if words[:1] == ["export"]:
        exported.update(word.split("=", 1) for word in words[1:] if "=" in word)
        return None
    # `a && b`, `a; b`: each; `a | b`: a
    pieces = [list(group) for is_separator, group in itertools.groupby(words, lambda w: w in ("&&", ";", "||"))
              if not is_separator]
    for piece in pieces:
        piece = piece[:piece.index("|")] if "|" in piece else piece
        assignments = {}
        while piece and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", piece[0]):  # `VAR=value distil ...`
            key, _, value = piece.pop(0).partition("=")
            assignments[key] = value
        while piece[:1] in (["$"], ["time"]):  # a prompt, a timing
            piece = piece[1:]
        with environment({**exported, **assignments}):
            if piece[:1] == ["distil"]:
                problem = distil_problem(piece[1:], project)
            elif piece[:1] == ["make"]:
                problem = make_problem(piece[1:], project)
            else:
                problem = None  # pip, cd, python ...: not the project's commands
        if problem:
            return problem
    return None


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The reader's project directory: the config files the docs write, where the docs' commands run."""
    root = tmp_path_factory.mktemp("project")
    for relative, text in doc_config_files().items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    return root


def test_the_docs_show_commands():
    """A renamed fence or file would otherwise leave nothing to check."""
    for path in DOCS:
        assert path.is_file(), path
    assert sum(1 for path in DOCS for c in shell_lines(path) if c.text.startswith(("distil", "make"))) >= 10


@pytest.mark.heavy
def test_every_documented_command_parses(project, monkeypatch):
    monkeypatch.chdir(project)  # relative config folders (--config-dir myconf) are the reader's
    monkeypatch.delenv("DISTIL_CONFIG_DIR", raising=False)
    failures = []
    for path in DOCS:
        exported: dict[str, str] = {}
        for command in shell_lines(path):
            if problem := problem_of(command, project, exported):
                failures.append(f"{command.where()}\n    -> {problem}")
    assert not failures, f"{len(failures)} documented command(s) do not parse:\n" + "\n".join(failures)
