"""The documentation site's generated reference pages, written from the code so they cannot drift from it:

- reference/cli.md: `distil --help` and every subcommand's --help, from the parsers in distil/cli/;
- reference/config.md: every config group of distil/conf/, each option with its description and the keys it
  sets, and the keys the schema (distil/config/schema.py) gives each group, with types, defaults and notes.

mkdocs-gen-files runs this file at build time (mkdocs.yml); `python scripts/docs_reference.py OUTDIR` writes
the two pages to OUTDIR instead, to read them or test them.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import importlib
import inspect
import io
import os
import re
import sys
import tokenize
import types
import typing
from pathlib import Path

import yaml

from distil.cli.main import SUBCOMMANDS, overview
from distil.config.schema import CONF_DIR, Config

HELP_WIDTH = "100"  # argparse wraps to $COLUMNS: fixed, so the page does not depend on the terminal that built it
MAX_OPTION_LINES = 30  # more (a table preset: hundreds of keys) and an option shows one line per top-level key
MAX_VALUE_CHARS = 160  # ... each value cut to this length
# Option folders that are not groups of the run config, with the schema of their files and how one is used.
NOT_RUN_GROUPS = {"table": ("distil.tables.preset", "TablePreset", "distil table {option}"),
                  "search": ("distil.search.preset", "SearchPreset", "distil search {option}")}
GENERATED = "Generated from {source} by scripts/docs_reference.py at every build: do not edit it by hand."


# ---------------------------------------------------------------------------------------------------- CLI


def captured(command, argv: list[str], prog: str) -> str:
    """What a `distil` command prints for these arguments (its --help): run in-process, stdout kept."""
    out = io.StringIO()
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_WIDTH
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):  # --help exits 0
            command(argv, prog=prog)
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns
    return out.getvalue()


def hydra_help() -> str:
    """The Hydra app's help, which `distil --help` prints after the subcommand overview: the header and
    footer of distil/conf/config.yaml's hydra.help, the groups and the default config. Hydra makes it only
    inside its main; its internals (as distil/config/compose.py uses them) make it here without a process."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path, get_args_parser
    from hydra.core.global_hydra import GlobalHydra

    from distil.config.run_dir import register_run_dir_resolver
    from distil.config.schema import register_configs

    register_configs()
    register_run_dir_resolver()
    parser = get_args_parser()
    GlobalHydra.instance().clear()  # Hydra makes one app at a time
    hydra = Hydra.create_main_hydra2(task_name="distil", config_search_path=create_config_search_path(str(CONF_DIR)))
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            hydra.app_help(config_name="config", args_parser=parser, args=parser.parse_args(["--help"]))
    finally:
        GlobalHydra.instance().clear()  # later in-process compositions (distil.config.compose) initialise their own
    return out.getvalue()


def members(module, prog: str) -> list[str]:
    """The commands under a subcommand: `distil bench students`, `distil cache list`, ..."""
    if hasattr(module, "COMMANDS"):  # bench, paper: distil.cli.parsing.run_group
        return list(module.COMMANDS)
    if hasattr(module, "build_parser"):  # cache: argparse subparsers
        parser = module.build_parser(prog)
        return [name for action in parser._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices]
    return []


def help_texts() -> dict[str, str]:
    """prog -> its --help text, for `distil`, each `distil SUB` and each `distil SUB MEMBER`."""
    texts = {"distil": overview() + hydra_help()}
    for name, (module_name, function, _) in SUBCOMMANDS.items():
        module = importlib.import_module(f"distil.cli.{module_name}")
        prog = f"distil {name}"
        command = getattr(module, function)
        texts[prog] = captured(command, ["--help"], prog)
        for member in members(module, prog):
            texts[f"{prog} {member}"] = captured(command, [member, "--help"], prog)
    return texts


def cli_reference() -> str:
    lines = ["# Command line", "", GENERATED.format(source="the parsers in `distil/cli/`"), "",
             "One command, `distil`: with `key=value` overrides (or none) it runs the default pipeline, or a sweep "
             "with `-m`; `distil SUB` runs a subcommand. Each section below is what `--help` prints.", ""]
    lines += [f"- [`{name}`](#{slug(name)}): {what}" for name, what in
              [("distil", "one run, or a sweep with -m"), *((f"distil {sub}", what)
                                                           for sub, (_, _, what) in SUBCOMMANDS.items())]]
    lines.append("")
    for prog, text in help_texts().items():
        lines += [f"{'##' if prog.count(' ') < 2 else '###'} {prog}", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


def slug(heading: str) -> str:
    """The anchor Python-Markdown's toc gives a plain heading."""
    return re.sub(r"[-\s]+", "-", re.sub(r"[^\w\s-]", "", heading).strip().lower())


# ------------------------------------------------------------------------------------------------- config


def config_groups(conf_dir: Path) -> dict[str, list[Path]]:
    """group (its folder under conf_dir, nested ones as teacher/finetune) -> its option files."""
    groups = {}
    for folder in sorted({path.parent for path in conf_dir.rglob("*.yaml")} - {conf_dir}):
        groups[folder.relative_to(conf_dir).as_posix()] = sorted(folder.glob("*.yaml"), key=lambda p: p.stem)
    return groups


def default_options(conf_dir: Path) -> dict[str, str | None]:
    """group -> the option config.yaml's defaults list picks (None: the group is off unless chosen)."""
    defaults = yaml.safe_load((conf_dir / "config.yaml").read_text())["defaults"]
    return {group: option for entry in defaults if isinstance(entry, dict) for group, option in entry.items()}


def is_global(path: Path) -> bool:
    """A `# @package _global_` option sets keys anywhere in the config (experiment/, debug/)."""
    return any(line.strip().replace(" ", "") == "#@package_global_" for line in path.read_text().splitlines())


def first_comment(path: Path) -> str:
    """The first sentence of the comment block at the top of an option file (after `# @package`)."""
    block = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text.startswith("#"):
            if block or text:
                break
            continue
        text = text.lstrip("#").strip()
        if text.startswith("@package"):
            continue
        if not text or (block and line.lstrip("#").startswith("   ")):  # a blank line or an indented example
            break
        block.append(text)
    # a sentence ends at ". " but not after an abbreviation such as "et al." or "e.g."
    return re.split(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<=\.)\s+(?=[A-Z])", " ".join(block))[0]


def description(path: Path, data: dict) -> str:
    """The option's `description`, else its `title` (a table preset's), else its first comment's sentence."""
    text = data.get("description") or data.get("title") or first_comment(path)
    return " ".join(str(text).split())


def prose(text: str) -> str:
    """Comment or description text as Markdown shows it as written: `<run dir>`, `[CLS]`, `wu-sra*`, `r_s`
    and `none | tang` are not HTML, links, emphasis or a table's cell border. Code spans stay as they are
    (a pipe in one does not end a table cell)."""
    parts = re.split(r"(`[^`]*`)", text)
    return "".join(part if part.startswith("`") else re.sub(r"([\\*_\[\]|])", r"\\\1", part).replace("<", "&lt;")
                   for part in parts)


def inline(value) -> str:
    """A value as YAML writes it on one line."""
    if isinstance(value, str):
        value = " ".join(value.split())  # a block of notes: one line
    text = yaml.safe_dump(value, default_flow_style=True, width=10**6, sort_keys=False, allow_unicode=True)
    text = text.strip().removesuffix("...").strip()
    return text if len(text) <= MAX_VALUE_CHARS else text[:MAX_VALUE_CHARS - 1] + "…"


def flatten(value, prefix: str) -> list[tuple[str, str]]:
    """(dotted key, value) for every leaf; a list of mappings by index (schedule.stages.0.losses.ce), as
    an override names it."""
    if isinstance(value, dict) and value:
        return [pair for key, item in value.items() for pair in flatten(item, f"{prefix}.{key}" if prefix else key)]
    if isinstance(value, list) and any(isinstance(item, dict) for item in value):
        return [pair for i, item in enumerate(value) for pair in flatten(item, f"{prefix}.{i}")]
    return [(prefix, inline(value))]


def option_keys(source: str, data: dict, prefix: str) -> list[str]:
    """The `key: value` lines an option sets (its defaults list first), keys as overrides name them."""
    lines = [f"defaults: {inline(data['defaults'])}"] if "defaults" in data else []
    body = {key: value for key, value in data.items() if key not in ("defaults", "description")}
    pairs = flatten(body, prefix) if body else []
    if len(pairs) > MAX_OPTION_LINES:  # a table preset: one line per top-level key, long values shortened
        pairs = [(f"{prefix}.{key}" if prefix else key, inline(value)) for key, value in body.items()]
        lines.append(f"# shortened: the whole file is {source}")
    return lines + [f"{key}: {value}" for key, value in pairs]


def group_schema(group: str) -> type | None:
    """The dataclass a group's options are typed by: a field of Config, nested groups through their
    parent's field (teacher/finetune: TeacherConfig.finetune); None for a group of global presets."""
    if group in NOT_RUN_GROUPS:
        module, name, _ = NOT_RUN_GROUPS[group]
        return getattr(importlib.import_module(module), name)
    schema = Config
    for part in group.split("/"):
        hint = typing.get_type_hints(schema).get(part)
        schema = nested(hint)[0] if hint is not None and nested(hint) else None
        if schema is None:
            return None
    return schema


def nested(hint) -> tuple[type, str] | None:
    """The dataclass a field holds (and the key suffix its items take): X, X | None, list[X], dict[str, X]."""
    if dataclasses.is_dataclass(hint):
        return hint, ""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [nested(arg) for arg in args if arg is not type(None)]
        return inner[0] if len(inner) == 1 else None
    if origin is list and args and dataclasses.is_dataclass(args[0]):
        return args[0], ".N"
    if origin is dict and len(args) == 2 and dataclasses.is_dataclass(args[1]):
        return args[1], ".NAME"
    return None


def field_notes(schema: type) -> dict[str, str]:
    """field -> the comments above and beside it: the schema documents its keys in comments."""
    source = Path(inspect.getsourcefile(schema)).read_text()
    comments = {token.start[0]: (token.string.lstrip("#").strip(), token.line.lstrip().startswith("#"))
                for token in tokenize.generate_tokens(io.StringIO(source).readline) if token.type == tokenize.COMMENT}
    cls = next(node for node in ast.walk(ast.parse(source))
               if isinstance(node, ast.ClassDef) and node.name == schema.__name__)
    notes = {}
    for statement in cls.body:
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
            above, line = [], statement.lineno - 1
            while line in comments and comments[line][1]:
                above.insert(0, comments[line][0])
                line -= 1
            beside = [comments[n][0] for n in range(statement.lineno, statement.end_lineno + 1)
                      if n in comments and not comments[n][1]]
            notes[statement.target.id] = " ".join(above + beside)
    return notes


def default_text(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "required"
    if value == "???":  # omegaconf's MISSING: an option must set it
        return "required"
    return "" if dataclasses.is_dataclass(value) else f"`{inline(value)}`"


def schema_rows(schema: type, prefix: str) -> list[str]:
    """One table row per key, nested dataclasses (dataset.split, schedule.stages.N) after their parent."""
    hints, notes, rows = typing.get_type_hints(schema), field_notes(schema), []
    for field in dataclasses.fields(schema):
        key = f"{prefix}{field.name}"
        allowed = str(field.metadata.get("range", ""))  # distil/config/ranges.py
        cells = [f"`{key}`", f"`{field.type}`", default_text(field), prose(allowed), prose(notes.get(field.name, ""))]
        rows.append("| " + " | ".join(cells) + " |")
        inner = nested(hints[field.name])
        if inner:
            rows += schema_rows(inner[0], f"{key}{inner[1]}.")
    return rows


def group_section(group: str, paths: list[Path], defaults: dict[str, str | None]) -> list[str]:
    schema = group_schema(group)
    run_group = group not in NOT_RUN_GROUPS
    lines = [f"## {group}", ""]
    if schema is not None and schema.__doc__ and not schema.__doc__.startswith(schema.__name__ + "("):
        lines += [prose(" ".join(inspect.cleandoc(schema.__doc__).split())), ""]
    if group in NOT_RUN_GROUPS:
        lines += [f"Presets of `{NOT_RUN_GROUPS[group][2].format(option='NAME')}`, not of a run.", ""]
    elif defaults.get(group) is not None:
        lines += [f"Default: `{group}={defaults[group]}`.", ""]
    elif group in defaults:
        lines += [f"Off unless chosen: `{group}=NAME`.", ""]
    for path in paths:
        data = yaml.safe_load(path.read_text()) or {}
        option = path.stem
        if not run_group:
            usage = NOT_RUN_GROUPS[group][2].format(option=option)
        elif group in defaults or "/" in group:
            usage = f"{group}={option}"
        else:
            usage = f"+{group}={option}"  # not in config.yaml's defaults list: added, not replaced
        glob = run_group and is_global(path)
        prefix = "" if glob or not run_group else group.replace("/", ".")
        lines += [f"### {usage}", "", prose(description(path, data)) or "(no description)", ""]
        if glob:
            lines += ["Sets keys anywhere in the config (`# @package _global_`):", ""]
        lines += ["```yaml", *option_keys(f"distil/conf/{group}/{path.name}", data, prefix), "```", ""]
    if schema is not None:
        prefix = "" if not run_group else group.replace("/", ".") + "."
        lines += [f"### {group}: every key", "",
                  f"Typed by `{schema.__name__}` in `{schema.__module__.replace('.', '/')}.py`; "
                  "a key an option does not set keeps this default.", "",
                  "| key | type | default | allowed | note |", "| --- | --- | --- | --- | --- |",
                  *schema_rows(schema, prefix), ""]
    return lines


def config_reference(conf_dir: Path = CONF_DIR) -> str:
    groups = config_groups(conf_dir)
    defaults = default_options(conf_dir)
    # config.yaml's order (the pipeline's), each nested group after its parent, then the rest
    order = [g for g in defaults if g in groups]
    order = [n for g in order for n in [g, *sorted(x for x in groups if x.startswith(g + "/"))]]
    order += sorted(g for g in groups if g not in order)
    lines = ["# Configuration", "", GENERATED.format(source="`distil/conf/` and `distil/config/schema.py`"), "",
             "A run composes one option of each group (`distil student=rnn`); any key can be changed on the command "
             "line (`distil student.hidden_size=150`), and `distil --cfg job` prints the composed config without "
             "running. Each option lists the keys its file sets, named as an override names them.", "",
             "| group | options | default |", "| --- | --- | --- |"]
    lines += [f"| [{g}](#{slug(g)}) | {len(groups[g])} | {defaults.get(g) or '–'} |" for g in order]
    hints = typing.get_type_hints(Config)
    top = [f for f in dataclasses.fields(Config) if nested(hints[f.name]) is None]  # seed, hub_offline
    lines += ["", "Top-level keys: " + ", ".join(f"`{f.name}` (`{f.type}`, default {default_text(f)})" for f in top),
              ""]
    for group in order:
        lines += group_section(group, groups[group], defaults)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ writing


def pages() -> dict[str, str]:
    return {"reference/cli.md": cli_reference(), "reference/config.md": config_reference()}


if __name__ == "__main__":
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "site-reference")
    for name, text in pages().items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
        print(out / name)
elif __name__ == "<run_path>":  # run by mkdocs-gen-files (runpy) at build time: the pages exist in the site only
    import mkdocs_gen_files

    for name, text in pages().items():
        with mkdocs_gen_files.open(name, "w") as page:
            page.write(text)
        mkdocs_gen_files.set_edit_path(name, "scripts/docs_reference.py")
