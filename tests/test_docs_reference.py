"""The site's generated reference pages (scripts/docs_reference.py) cover everything they are generated from:
every config group and option under distil/conf, every schema key, every `distil` subcommand's --help."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import pytest
import yaml

from distil.cli.main import SUBCOMMANDS
from distil.config.schema import CONF_DIR, Config, TrainerConfig
from tests.conftest import load_script

ROOT = Path(__file__).resolve().parent.parent


docs_reference = load_script("docs_reference")


def sections(page: str, level: str) -> dict[str, str]:
    """heading text -> the text up to the next heading of the same level (`##` or `###`)."""
    parts = re.split(rf"^{level} (.+)$", page, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def plain(text: str) -> str:
    """Markdown text as read: escapes undone, whitespace collapsed."""
    return " ".join(re.sub(r"\\(.)", r"\1", text.replace("&lt;", "<")).split())


@pytest.fixture(scope="module")
def config_page() -> str:
    return docs_reference.config_reference(CONF_DIR)


@pytest.fixture(scope="module")
def cli_page() -> str:
    return docs_reference.cli_reference()


def option_files() -> list[Path]:
    return sorted(path for path in CONF_DIR.rglob("*.yaml") if path.parent != CONF_DIR)


def test_every_option_appears_under_its_group(config_page):
    groups = sections(config_page, "##")
    assert option_files()
    missing = []
    for path in option_files():
        group = path.parent.relative_to(CONF_DIR).as_posix()
        if group not in groups:
            missing.append(f"group {group} (for {path.relative_to(ROOT)})")
            continue
        options = sections(groups[group], "###")
        heading = next((h for h in options if re.fullmatch(rf".*[= ]{re.escape(path.stem)}", h)), None)
        if heading is None:
            missing.append(f"{group}: option {path.stem}")
            continue
        data = yaml.safe_load(path.read_text()) or {}
        body = plain(options[heading])
        if isinstance(data.get("description"), str):
            assert plain(data["description"]) in body, f"{path}: description missing"
        for key in data:
            if key not in ("description", "defaults"):
                assert re.search(rf"(^|\.){re.escape(key)}[.:]", options[heading], re.M), f"{path}: key {key} missing"
        if "defaults" in data:
            assert "defaults: " in options[heading], f"{path}: its defaults list is missing"
    assert not missing, "not in reference/config.md: " + "; ".join(missing)


def test_every_schema_key_of_the_run_groups_appears(config_page):
    groups = sections(config_page, "##")
    for field in dataclasses.fields(Config):
        schema = docs_reference.group_schema(field.name)
        if schema is None:  # seed, hub_offline: top-level keys
            assert f"`{field.name}`" in config_page
            continue
        keys = sections(groups[field.name], "###")[f"{field.name}: every key"]
        for key in dataclasses.fields(schema):
            assert f"| `{field.name}.{key.name}` |" in keys, f"{field.name}.{key.name}"
    # nested dataclasses, as users set them
    for key in ("dataset.split.labeled_count", "dataset.split.labeled_per_class", "teacher.finetune.min_steps",
                "schedule.stages.N.losses", "dataset.hub.name"):
        assert f"| `{key}` |" in config_page, key
    epochs = next(f for f in dataclasses.fields(TrainerConfig) if f.name == "epochs")
    row = f"| `trainer.epochs` | `int` | `{epochs.default}` | {epochs.metadata['range']} |"
    assert row in config_page  # type, default and allowed range


def test_a_new_group_appears_without_changing_the_generator(tmp_path):
    """Nothing lists the groups by hand: a group added to the config folder is documented."""
    conf = tmp_path / "conf"
    shutil.copytree(CONF_DIR, conf)
    (conf / "widget").mkdir()
    (conf / "widget" / "spinner.yaml").write_text("description: a new option\nspeed: 3\n")
    (conf / "student" / "extra").mkdir()
    (conf / "student" / "extra" / "deep.yaml").write_text("# A nested group's option.\nwidth: 2\n")
    groups = sections(docs_reference.config_reference(conf), "##")
    widget = sections(groups["widget"], "###")
    assert "a new option" in widget["+widget=spinner"] and "widget.speed: 3" in widget["+widget=spinner"]
    deep = sections(groups["student/extra"], "###")["student/extra=deep"]
    assert "A nested group's option." in deep and "student.extra.width: 2" in deep


def test_every_subcommand_and_member_has_its_help(cli_page):
    helps = {**sections(cli_page, "##"), **sections(cli_page, "###")}
    assert "== Configuration groups ==" in helps["distil"] and "usage: distil [run]" in helps["distil"]
    for name in SUBCOMMANDS:
        assert f"usage: distil {name}" in helps[f"distil {name}"], name
    for prog in ("distil cache list", "distil cache prune", "distil bench students", "distil bench all",
                 "distil paper tang-table2", "distil paper wu-table5"):
        assert f"usage: {prog}" in helps[prog], prog
    assert "--older-than AGE" in helps["distil cache prune"]  # the options, not only the usage line

