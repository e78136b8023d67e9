"""distil-table: every shipped preset builds its sweep without running it; cell keys; the runner end to end."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from distil.cli import table as table_command
from distil.cli.table import main as table_main
from distil.config.schema import without_defaults
from distil.errors import DistilError
from distil.tables import run
from distil.tables.cells import cell_key, cell_specs, collect, expand
from distil.tables.load import PRESET_DIR, load_preset
from distil.tables.preset import Cell
from distil.tables.render import check_renderable

REPO = Path(__file__).resolve().parent.parent
SHIPPED = sorted(PRESET_DIR.glob("*.yaml"))


# every preset at cpu scale with the heavy tests (CI); the paper scale (hub teachers, 41 languages) with
# the slow tests: composing both doubles the cost
@pytest.mark.parametrize("scale", ["cpu", pytest.param("paper", marks=pytest.mark.slow)])
@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
@pytest.mark.heavy
def test_every_shipped_preset_builds_its_sweep(path, scale):
    """The issue's "one test builds every table preset's sweep without running it": each loads,
    and each cell at each scale composes (expand composes it to key it)."""
    preset = load_preset(path.stem)
    assert preset.name == path.stem
    check_renderable(preset)  # its table and plot settings too, before a cell would run
    cells = expand(preset, scale)
    assert len(cells) == len(cell_specs(preset, scale))
    for cell in cells:
        assert re.fullmatch(r"[0-9a-f]{16}", cell.key)
        assert cell.overrides[-1] == f"seed={cell.seed}"
    if preset.kind == "sweep":
        assert cells or scale not in preset.scales


def write_preset(directory: Path, name: str, text: str, first_line: str = "") -> Path:
    path = directory / f"{name}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(first_line + "paper: test\ntable: T\ntitle: a test table\n" + text)
    return path


def test_equal_cells_of_two_tables_share_a_key(tmp_path):
    one = load_preset(write_preset(tmp_path, "one", "scales: {cpu: {base: [debug=smoke], seeds: [1, 2]}}\n"
                                   "rows: [{label: hard, overrides: [schedule=hard]}]\n"))
    # the same runs, written another way: the schedule in the base, the seed given as a row
    two = load_preset(write_preset(tmp_path, "two", "scales: {cpu: {base: [schedule=hard, debug=smoke], seeds: [2]}}\n"
                                   "rows: [{label: H, overrides: {cpu: [trainer.threads=1]}}]\n"
                                   "columns: [{label: c, overrides: [paths.outputs=/elsewhere]}]\n"))
    keys_one = [cell.key for cell in expand(one, "cpu")]
    assert [cell.key for cell in expand(two, "cpu")] == [keys_one[1]]
    assert keys_one[0] != keys_one[1]  # seeds differ
    assert expand(two, "paper") == []  # a scale the preset does not define has no cells


def test_a_key_covers_what_changes_a_result_only():
    key = cell_key(["debug=smoke", "seed=1"])
    same = ["trainer.threads=1", "trainer.speed_examples=0", "trainer.checkpoint_every_seconds=5",
            "paths.outputs=/x", "paths.data_dir=/y", "paths.cache=/z",
            "student.vocabulary=trimmed"]  # a setting at its schema default: keys made before it existed hold
    assert cell_key(["debug=smoke", *same, "seed=1"]) == key
    for different in ("schedule=hard", "trainer.epochs=4", "student.hidden_size=16", "transfer_size=5k",
                      "teacher.name_or_path=/t", "dataset.split.labeled_per_class=3", "student.vocabulary=full"):
        assert cell_key(["debug=smoke", different, "seed=1"]) != key, different
    assert cell_key(["debug=smoke", "seed=2"]) != key


@pytest.mark.parametrize("overrides", [
    ["debug=smoke", "schedule=d4.2", "schedule.stages.0.temperature=2", "trainer.lr=5e-4", "student=sra"],
    ["student.hidden_size=16", "teacher/finetune=bert", "+dataset.files.extra=x.tsv",
     "dataset=sst2", "trainer.epochs=2"],
])
def test_a_cell_composes_as_hydra_does_in_one_step(overrides):
    """Cells compose their groups once and apply value overrides to a copy (distil/tables/cells.py):
    the same config, to the last key, as Hydra composing every override at once."""
    from hydra import compose, initialize_config_dir

    from distil.config.compose import compose_overrides
    from distil.config.schema import CONF_DIR

    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        whole = compose(config_name="config", overrides=overrides)
    two_steps = compose_overrides(overrides, None)
    assert OmegaConf.to_container(two_steps, resolve=False) == OmegaConf.to_container(whole, resolve=False)
    assert OmegaConf.is_struct(two_steps)  # a later typo still fails as in a composed config


@dataclasses.dataclass
class StageV1:
    name: str = "S1"
    epochs: int | None = None


@dataclasses.dataclass
class StageV2(StageV1):
    warmup: float = 0.0  # a setting added later, whose default keeps what v1 did


@dataclasses.dataclass
class RunV1:
    lr: float = 1e-3
    stages: list[StageV1] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class RunV2(RunV1):
    stages: list[StageV2] = dataclasses.field(default_factory=list)
    clip: float | None = None


def test_a_setting_added_to_the_schema_at_its_default_leaves_the_key_data_as_it_was():
    """So adding a setting to distil/config/schema.py re-runs no finished cell; setting it does change the key."""
    def keyed(schema, values):
        node = OmegaConf.merge(OmegaConf.structured(schema), values)
        return without_defaults(OmegaConf.to_container(node, resolve=False), node)

    values = {"lr": 0.01, "stages": [{"name": "S1", "epochs": 3}, {"name": "S2"}]}
    assert keyed(RunV1, values) == keyed(RunV2, values) == {"lr": 0.01, "stages": [{"epochs": 3}, {"name": "S2"}]}
    assert keyed(RunV2, {**values, "clip": 1.0}) != keyed(RunV1, values)


def test_finished_cells_keep_their_keys_when_a_config_group_is_added():
    """b768ae9c0c8e7107 is this cell's key since KEY_VERSION 2, before the `augment` group existed: a group
    at its defaults (augment=none) must not change it, or every finished cell of every table runs again.
    A table's cells carry the teacher recipe of the recorded ones (RECORDED_RECIPE: the default job's
    conf/config.yaml stops its teacher earlier), which keeps the key too."""
    recipe = list(run.RECORDED_RECIPE)
    assert cell_key([*recipe, "debug=smoke", "seed=1"]) \
        == cell_key([*recipe, "debug=smoke", "augment=none", "seed=1"]) == "b768ae9c0c8e7107"
    assert cell_key([*recipe, "debug=smoke", "augment=tang", "seed=1"]) != "b768ae9c0c8e7107"
    assert cell_key(["debug=smoke", "seed=1"]) != "b768ae9c0c8e7107"  # the default job's recipe is another


def test_a_reworded_description_leaves_the_key_as_it_was():
    key = cell_key(["debug=smoke", "seed=1"])
    assert cell_key(["debug=smoke", "student.description=other words", "seed=1"]) == key


LOAD_ERRORS = [  # (test id, preset text, message with {p} for the preset's path)
    ("unknown-kind", "kind: sweeps\n",
     "table preset {p}: unknown kind 'sweeps' (did you mean 'sweep'?); choose one of: sweep, data, bench"),
    ("unknown-format", "kind: data\nformat: percents\n",
     "table preset {p}: unknown format 'percents' (did you mean 'percent'?); "
     "choose one of: percent, number, ratio, count, millions"),
    ("unknown-rows-from", "kind: data\nrows_from: stage\n",
     "table preset {p}: unknown rows_from 'stage' (did you mean 'stages'?); "
     "choose one of: null, stages, languages, epochs"),
    ("unknown-scale", "kind: data\nscales: {gpu: {seeds: [1]}}\n",
     "table preset {p}: unknown scale 'gpu'; choose one of: cpu, paper"),
    ("paper-value-row", "rows: [{label: A, overrides: [schedule=d1]}]\nscales: {cpu: {seeds: [1]}}\n"
     "paper_values: {B: 1.0}\n", "table preset {p}: paper_values names row 'B', which is not a row; rows are: A"),
    ("paper-value-column", "rows: [{label: A}]\ncolumns: [{label: c}]\nscales: {cpu: {seeds: [1]}}\n"
     "paper_values: {A: {d: 1.0}}\n",
     "table preset {p}: paper_values[A] names column 'd', which is not a column; columns are: c"),
    ("empty-row", "rows: [{label: A}]\ncolumns: [{label: c}]\nscales: {cpu: {seeds: [1]}}\nempty: {B: [c]}\n",
     "table preset {p}: empty names row 'B', which is not a row; rows are: A"),
    ("empty-column", "rows: [{label: A}]\ncolumns: [{label: c}]\nscales: {cpu: {seeds: [1]}}\nempty: {A: [d]}\n",
     "table preset {p}: empty[A] names column 'd', which is not a column; columns are: c"),
    ("no-scales", "rows: [{label: A}]\n",
     "table preset {p}: a sweep needs scales, e.g. scales: {cpu: {base: [...], seeds: [1]}}"),
    ("no-rows", "scales: {cpu: {seeds: [1]}}\n",
     "table preset {p}: a sweep needs rows: [{label: ..., overrides: [...]}] (or rows_from)"),
    ("no-seeds", "rows: [{label: A}]\nscales: {cpu: {seeds: []}}\n",
     "table preset {p}: scale cpu has no seeds; give at least one, e.g. seeds: [1]"),
    ("name-not-file", "name: other\nkind: data\n",
     "table preset {p} says name: other; a preset's name is its file name (bad): rename one of them"),
    ("unknown-field", "kind: data\nsweep: []\n",
     "table preset {p}: Key 'sweep' not in 'TablePreset' (at sweep); fix the file"),
    ("bad-axis", "kind: data\nrows: [{name: A}]\n",
     "table preset {p}: rows[0] must be {label: <text>, overrides: [...]} (a sweep's column may add value: "
     "<metrics.json path>, format: <format>); fix the file"),
    ("axis-scale", "kind: data\nrows: [{label: A, overrides: {gpu: [a=1]}}]\n",
     "table preset {p}: rows[0] has overrides for unknown scale(s) gpu; choose from: cpu, paper"),
    ("unknown-compare", "kind: data\ncompare: both\n",
     "table preset {p}: unknown compare 'both'; choose one of: null, columns, rows"),
    ("compare-not-sweep", "kind: bench\ncompare: rows\n",
     "table preset {p}: compare ranks the runs of a sweep; a bench table has none: remove it"),
    # the estimate is the file's first line, not a field: a key is an unknown one
    ("estimate-as-key", "kind: data\ncpu_estimate: ~5 minutes\n",
     "table preset {p}: Key 'cpu_estimate' not in 'TablePreset' (at cpu_estimate); fix the file"),
    ("axis-overrides", "kind: data\nrows: [{label: A, overrides: schedule=d1}]\n",
     "table preset {p}: rows[0]: overrides must be a list of key=value strings, or {cpu: [...], paper: [...]}; "
     "fix the file"),
]


@pytest.mark.parametrize("text,message", [case[1:] for case in LOAD_ERRORS], ids=[case[0] for case in LOAD_ERRORS])
def test_a_bad_preset_is_one_line_naming_the_fix(tmp_path, text, message):
    path = write_preset(tmp_path, "bad", text)
    with pytest.raises(DistilError) as error:
        load_preset(path)
    assert str(error.value) == message.replace("{p}", str(path))


def test_an_unreadable_preset_file_is_one_line(tmp_path):
    listed, broken, missing = tmp_path / "listed.yaml", tmp_path / "broken.yaml", tmp_path / "missing.yaml"
    listed.write_text("- a\n- b\n")
    broken.write_text("rows: [\n")
    messages = []
    for path in (listed, broken, missing):
        with pytest.raises(DistilError) as error:
            load_preset(path)
        messages.append(str(error.value))
    assert messages[0] == f"table preset {listed}: expected a mapping of fields (name, paper, rows, ...); fix the file"
    assert messages[1].startswith(f"table preset {broken}: cannot read it (while parsing a flow node")
    assert messages[1].endswith("); fix the file")
    assert messages[2] == f"table preset file {missing} does not exist; give an existing file or a preset name"


@pytest.mark.parametrize("name,hint", [("xtremedistil-tabel12", " (did you mean 'xtremedistil-table12'?)"),
                                       ("Wu-Table1", " (did you mean 'wu-table1'?)"), ("glue", "")])
def test_an_unknown_preset_name_names_the_closest_and_lists_the_presets(name, hint):
    with pytest.raises(DistilError) as error:
        load_preset(name)
    names = ", ".join(sorted(p.stem for p in SHIPPED))
    assert str(error.value) == (f"unknown table preset '{name}'{hint}; choose one of: {names} "
                                "(distil table --list describes them)")


def test_a_cell_that_cannot_compose_fails_before_anything_runs(tmp_path):
    preset = load_preset(write_preset(tmp_path, "typo", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                                      "rows: [{label: D9, overrides: [schedule=d9]}]\n"))
    with pytest.raises(DistilError) as error:
        expand(preset, "cpu")
    assert str(error.value).startswith("table preset typo, cell D9 seed 1: unknown schedule 'd9'; choose one of: "
                                       "basic, bilstm-soft, d0, d0-s, d1,")
    assert str(error.value).endswith("; fix the preset")


def test_a_crashed_cell_is_recorded(tmp_path, monkeypatch):
    """A cell whose process dies before writing metrics.json gets one saying so; the table goes on."""
    monkeypatch.setattr(run, "console_script", lambda name: "/bin/false")
    cell = Cell(row="r", column=None, seed=1, overrides=["seed=1"], key="k")
    ended, error = run.run_cell(cell, tmp_path)
    log = tmp_path / "cells" / "k" / run.LOG_NAME
    assert ended == error == f"failed: distil exited with code 1 without writing metrics.json (its output: {log})"
    assert json.loads((tmp_path / "cells" / "k" / "metrics.json").read_text()) == {"status": error,
                                                                                  "overrides": ["seed=1"]}
    assert collect([cell], tmp_path)[0].error == error


@pytest.mark.parametrize("signal_number,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_table_is_one_line_and_restores_the_handler(monkeypatch, capsys, signal_number, code):
    def interrupted(args):
        os.kill(os.getpid(), signal_number)
        raise AssertionError(f"signal {signal_number} did not stop the table")

    handler = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(run, "run", interrupted)
    # a terminal's Ctrl-C: a test run started in the background (nohup, `&`) inherits SIGINT ignored
    previous_sigint = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(SystemExit) as ended:
            table_main(["xtremedistil-table4"])
    finally:
        signal.signal(signal.SIGINT, previous_sigint)
    assert ended.value.code == code
    assert capsys.readouterr().err.strip() == table_command.interrupted("distil table")
    assert signal.getsignal(signal.SIGTERM) is handler


def test_collect_says_why_a_cell_has_no_number(tmp_path):
    from distil.tables.cells import waiting

    cells = [Cell(row=r, column=None, seed=1, overrides=["seed=1"], key=r)
             for r in ("ok", "failed", "junk", "none", "stopped")]
    for key, text in (("ok", '{"status": "ok", "x": 1}'), ("failed", '{"status": "failed: no data"}'),
                      ("junk", '{"status": '), ("stopped", '{"status": "failed: interrupted"}')):
        (tmp_path / "cells" / key).mkdir(parents=True)
        (tmp_path / "cells" / key / "metrics.json").write_text(text)
    collect(cells, tmp_path)
    assert [(c.metrics, c.error) for c in cells[:2]] == [({"status": "ok", "x": 1}, None),
                                                         ({"status": "failed: no data"}, "failed: no data")]
    assert cells[2].metrics is None and cells[2].error.startswith("unreadable metrics.json (JSONDecodeError: ")
    assert cells[2].error.endswith(f"; delete {tmp_path / 'cells' / 'junk'} to run it again")
    assert (cells[3].metrics, cells[3].error) == (None, "not run")
    # a run stopped by Ctrl-C or SIGTERM resumes with the next run of the table: waiting, not failed
    assert cells[4].error == "not run (interrupted)"
    assert [waiting(c.error) for c in cells] == [False, False, False, True, True]


def test_make_targets_name_the_presets():
    def dry(target: str) -> str:
        # under `make test` the outer make's flags would add "Entering directory" lines
        env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
        return subprocess.run(["make", "-n", "--no-print-directory", target], cwd=REPO, env=env,
                              capture_output=True, text=True, check=True).stdout

    assert dry("table-xtremedistil-3") == "distil table --scale cpu xtremedistil-table3\n"
    assert dry("table-mukherjee-12") == "distil table --scale cpu mukherjee-table12\n"
    assert dry("tables") == "distil table --all --scale cpu\n"
    assert dry("frontier") == "distil table --all --set frontier --scale cpu --frontier-targets\n"


def table(args: list[str], capsys) -> tuple[int, str, str]:
    """`distil table` in-process (its cells still run as the real `distil` console script)."""
    try:
        table_main(args)
        code = 0
    except SystemExit as exit:
        code = exit.code
    out, err = capsys.readouterr()
    return code, out, err


def test_render_only_writes_the_table_of_the_cells_done_and_runs_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]}]\n")
    hard, d1 = expand(load_preset("tiny"), "cpu")
    done = tmp_path / "outputs" / "cells" / hard.key
    done.mkdir(parents=True)
    (done / "metrics.json").write_text('{"status": "ok", "seconds": 6, "student": {"test": {"accuracy": 0.75}}}')
    code, out, err = table(["tiny", "--render-only"], capsys)
    assert code == 0, err
    assert not (tmp_path / "outputs" / "cells" / d1.key).exists()  # nothing ran
    md = (tmp_path / "outputs" / "tables" / "tiny.md").read_text()
    assert "| hard |   75.00 |\n| D1   | not run |" in md
    assert md.endswith("cells: 1 done (0 still improving), 0 failed, 1 not run.\n")


def test_render_only_skips_a_bench_table_not_measured_here_and_goes_on(tmp_path, monkeypatch, capsys):
    """`distil-table --all --render-only` on a fresh clone: the bench's csv is this machine's own (not
    recorded), so its table is skipped with how to measure it, and the tables after it are written."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "a-bench", "kind: bench\nrows: [{label: bert-base}]\n")
    write_preset(tmp_path / "conf" / "table", "b-tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}]\n")
    code, out, err = table(["a-bench", "b-tiny", "--render-only"], capsys)
    assert code == 0, err
    assert not (tmp_path / "outputs" / "tables" / "a-bench.md").exists()
    assert (tmp_path / "outputs" / "tables" / "b-tiny.md").is_file()
    assert "a-bench: skipped" in out and "`distil table a-bench` measures it" in out.replace("\n", "")


def fake_cells(monkeypatch, name) -> list:
    """Cells that finish at once at 50% instead of running; the list of `name(cell)` of those run, in order."""
    ran = []

    def fake_run(cell, root, extra=(), workers=None):
        ran.append(name(cell))
        directory = root / "cells" / cell.key
        directory.mkdir(parents=True)
        (directory / "metrics.json").write_text('{"status": "ok", "student": {"test": {"accuracy": 0.5}}}')
        return "done", None

    monkeypatch.setattr(run, "run_cell", fake_run)
    return ran


def test_only_runs_the_named_rows_columns_or_where_they_cross_and_writes_the_whole_table(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]}]\n"
                 "columns: [{label: all, overrides: [transfer_size=all]},\n"
                 "          {label: 5k, overrides: [transfer_size=5k]}]\n")
    ran = fake_cells(monkeypatch, lambda cell: (cell.row, cell.column))
    code, _, err = table(["tiny", "--only", "5k", "--only", "hard"], capsys)  # a row and a column: where they cross
    assert code == 0, err
    assert ran == [("hard", "5k")]
    code, _, err = table(["tiny", "--only", "5k"], capsys)  # a column: its cells
    assert code == 0, err
    assert ran == [("hard", "5k"), ("D1", "5k")]
    md = (tmp_path / "outputs" / "tables" / "tiny.md").read_text()
    assert "| D1   | not run | 50.00 |" in md
    assert md.endswith("cells: 2 done (0 still improving), 0 failed, 2 not run.\n")

    code, out, err = table(["tiny", "--only", "D1", "--dry-run"], capsys)  # the cells --only would run, no more
    assert code == 0, err
    assert [line.split(": ")[0].split(maxsplit=1)[1] for line in out.splitlines() if line.startswith("  ") and
            " x " in line] == ["D1 x all seed 1", "D1 x 5k seed 1"]

    code, _, err = table(["tiny", "--only", "5K"], capsys)
    assert code == 2
    assert err.strip() == ("distil table: error: --only '5K' is not a row or column of tiny (did you mean '5k'?); "
                           "its rows: hard, D1; its columns: all, 5k")


def test_seed_runs_only_that_seeds_cells_and_a_seed_the_table_lacks_is_an_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1, 2]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]}]\n")
    ran = fake_cells(monkeypatch, lambda cell: (cell.row, cell.seed))
    code, _, err = table(["tiny", "--seed", "2", "--only", "D1"], capsys)  # both filters apply
    assert code == 0, err
    assert ran == [("D1", 2)]
    code, _, err = table(["tiny", "--seed", "1"], capsys)
    assert code == 0, err
    assert ran == [("D1", 2), ("hard", 1), ("D1", 1)]
    code, _, err = table(["tiny", "--seed", "3"], capsys)
    assert code == 2 and ran == [("D1", 2), ("hard", 1), ("D1", 1)]
    assert err.strip() == "distil table: error: --seed 3 is not a seed of these tables at this scale; their seeds: 1, 2"


def test_a_finished_cell_is_recorded_and_a_fresh_machine_reads_it_instead_of_running_it(tmp_path, monkeypatch,
                                                                                          capsys):
    """outputs/ is not in git: a finished cell is copied to the tracked results (distil.tables.ledger)
    when its table is written, and a machine with empty outputs renders it and does not run it. A
    failed cell is not recorded, and a torn record is no record (the cell runs)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]},\n"
                 "       {label: D0, overrides: [schedule=d0]}]\n", first_line="# cpu scale: ~5 minutes: 3 runs\n")
    hard, d1, d0 = expand(load_preset("tiny"), "cpu")
    ran = []

    def fake_run(cell, root, extra=(), workers=None):
        ran.append((root.name, cell.row))
        directory = root / "cells" / cell.key
        directory.mkdir(parents=True)
        status = "failed: out of memory" if cell.row == "D0" else "ok"
        accuracy = {"hard": 0.75, "D1": 0.5}.get(cell.row)
        seconds = {"hard": 60, "D1": 180}.get(cell.row, 0)
        (directory / "metrics.json").write_text(json.dumps({"status": status, "seconds": seconds,
                                                            "student": {"test": {"accuracy": accuracy}}}))
        return ("done", None) if status == "ok" else (status, status)

    monkeypatch.setattr(run, "run_cell", fake_run)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "first"))
    code, out, _ = table(["tiny"], capsys)
    assert code == 2 and ran == [("first", "hard"), ("first", "D1"), ("first", "D0")]
    ledger = tmp_path / "results" / "cells"
    assert sorted(p.name for p in ledger.iterdir()) == sorted([f"{hard.key}.json", f"{d1.key}.json"])
    assert json.loads((ledger / f"{hard.key}.json").read_text()) == {"status": "ok", "seconds": 60,
                                                                     "student": {"test": {"accuracy": 0.75}}}
    assert f"tiny: 2 finished cell(s) recorded in {ledger}" in out

    (ledger / f"{d1.key}.json").write_text('{"status": "ok", "stud')  # torn: D1 runs again on the new machine
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "second"))
    code, out, _ = table(["tiny"], capsys)
    assert ran[3:] == [("second", "D1"), ("second", "D0")]
    assert "cell 1/3 tiny hard seed 1: skipped (done)" in out
    md = (tmp_path / "second" / "tables" / "tiny.md").read_text()
    assert re.search(r"\| hard \| +75\.00 \|\n\| D1 +\| +50\.00 \|", md)
    assert md.endswith("cells: 2 done (0 still improving), 1 failed, 0 not run.\n")
    assert json.loads((ledger / f"{d1.key}.json").read_text())["student"]["test"]["accuracy"] == 0.5
    code, out, _ = table(["tiny", "--status"], capsys)  # hard is the first machine's record, D1 ran here
    # 1 + 3 minutes for 2 cells: 6 for all 3 at that pace, against the ~5 of the preset's first line
    assert code == 0 and out.splitlines() == ["tiny: 2 of 3 cells done (1 from results/cells), 4 minutes measured, "
                                              "~6 for all 3 at that pace; its preset estimates ~5 minutes",
                                              "all: 2 of 3 distinct cells done"]


@pytest.mark.slow  # ~30 s; with the slow tests, as test_student_timing's timed table end to end
def test_distil_table_end_to_end(tmp_path, monkeypatch, capsys):
    """2 rows x 1 column x 2 seeds run once; a second invocation runs none; a failing cell of another
    table is recorded while the rest of that table finishes, and a cell both tables name runs once."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DISTIL_OUTPUTS", raising=False)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))  # presets found by name there
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1, 2]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]}]\n"
                 "columns: [{label: all, overrides: [transfer_size=all]}]\n")
    code, out, err = table(["tiny"], capsys)
    assert code == 0, err
    assert [line.split(": ")[0] for line in out.splitlines() if line.endswith(" s")] == [
        f"cell {i}/4 tiny {row} x all seed {seed}" for i, (row, seed) in
        enumerate([("hard", 1), ("hard", 2), ("D1", 1), ("D1", 2)], 1)]
    cells = collect(expand(load_preset("tiny"), "cpu"), tmp_path / "outputs")
    assert [cell.error for cell in cells] == [None] * 4
    assert [(c.metrics["choices"]["schedule"], c.metrics["choices"]["seed"]) for c in cells] == [
        ("hard", 1), ("hard", 2), ("d1", 1), ("d1", 2)]

    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "outputs" / "cells").rglob("*") if p.is_file()}
    code, out, err = table(["tiny"], capsys)
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("cell ")] == [
        f"cell {i}/4 tiny {label}: skipped (done)" for i, label in
        enumerate(["hard x all seed 1", "hard x all seed 2", "D1 x all seed 1", "D1 x all seed 2"], 1)]
    assert {p: p.stat().st_mtime_ns for p in files} == files

    missing = tmp_path / "no-teacher"
    write_preset(tmp_path / "conf" / "table", "other", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 f"rows: [{{label: broken, overrides: [teacher.name_or_path={missing}]}},\n"
                 "       {label: hard, overrides: [schedule=hard, transfer_size=all]},\n"
                 "       {label: D0, overrides: [schedule=d0]}]\n")
    code, out, err = table(["other"], capsys)
    broken, shared, d0 = collect(expand(load_preset("other"), "cpu"), tmp_path / "outputs")
    reason = (f"failed: teacher 'tiny' ({missing}) is not available offline: set teacher.name_or_path=/path/to/a/local/"
              "copy (a directory with config.json, weights and tokenizer files), or hub_offline=false where a hub "
              "is reachable")
    assert broken.error == reason
    assert shared.key == cells[0].key and shared.error is None
    assert d0.error is None and d0.metrics["choices"]["schedule"] == "d0"
    assert [line for line in out.splitlines() if line.startswith("cell ") and "running" not in line][:2] == [
        f"cell 1/3 other broken seed 1: {reason}", "cell 2/3 other hard seed 1: skipped (done)"]
    assert code == 2
    assert err.splitlines()[-1] == ("distil table: error: 1 cell(s) failed (status in their metrics.json; the tables "
                                    f"mark them): other broken seed 1 ({tmp_path / 'outputs' / 'cells' / broken.key})")

    code, out, err = table(["other", "--dry-run"], capsys)
    assert code == 0
    assert out.splitlines()[:3] == ["other: 3 cells (sweep)",
                                    f"  {broken.key}  broken seed 1: {reason}  "
                                    f"[debug=smoke teacher.name_or_path={missing} seed=1]",
                                    f"  {shared.key}  hard seed 1: done  [debug=smoke schedule=hard transfer_size=all "
                                    "seed=1]"]
    minutes = (shared.metrics["seconds"] + d0.metrics["seconds"]) / 60
    assert out.splitlines()[-1] == (f"  2 of 3 cells done, {minutes:.1f} minutes measured (their metrics.json "
                                    "seconds, each cell's own teacher fine-tuning and caching included)")


def test_list_counts_runs_not_table_positions(tmp_path):
    """Columns that read other fields of the same run (accuracy, params, speed) add no run."""
    text = ("scales: {cpu: {base: [debug=smoke], seeds: [1, 2]}}\n"
            "rows: [{label: a, overrides: [schedule=hard]}, {label: b, overrides: [schedule=d1]}]\n"
            "columns: [{label: acc, value: student.test.accuracy}, {label: p, value: student.params},"
            " {label: lr, overrides: [trainer.lr=1e-4]}]\n")
    preset = load_preset(write_preset(tmp_path, "fields", text))
    assert len(cell_specs(preset, "cpu")) == 2 * 3 * 2
    assert run.distinct_runs(preset, "cpu") == 2 * 2 * 2  # the lr column is a run of its own; acc and p share one


@pytest.mark.heavy
def test_a_bench_table_passes_its_scales_overrides_to_its_command(tmp_path, monkeypatch, capsys):
    """wu-table5's distil-untuned gets Table 1's student (student.embedding_init=svd at cpu scale), so
    it reuses the task-agnostic SRA student those runs built instead of building a second one."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    commands = []

    def measured(command, **kwargs):
        commands.append(command)
        return subprocess.CompletedProcess(command, 1)  # the table then says the bench failed: nothing to render

    monkeypatch.setattr(run.subprocess, "run", measured)
    table(["wu-table5"], capsys)
    table(["wu-table5", "--scale", "paper"], capsys)
    cpu, paper = ([part for part in command[3:] if part != "--out"][:-1] for command in commands)
    assert [[Path(command[0]).name, *command[1:3]] for command in commands] == [["distil", "paper", "wu-table5"]] * 2
    recipe = list(run.RECORDED_RECIPE)  # the teacher recipe of every table's cells
    assert cpu == [*recipe, *load_preset("wu-table5").scales["cpu"].base] and "student.embedding_init=svd" in cpu
    assert paper == [*recipe, "hub_offline=false", "teacher=bert-base", "agnostic=paper", "transfer_size=all"]
    # what the task-agnostic student's key covers (teacher, agnostic stage, student) is Table 1's
    from distil.tables.cells import compose_cell

    untuned = compose_cell(["dataset=quora", "student=sra", *cpu], None, "wu-table5")
    table1 = compose_cell(expand(load_preset("wu-table1"), "cpu")[0].overrides[:-1], None, "wu-table1")
    for group in ("teacher", "agnostic", "student"):
        assert untuned[group] == table1[group], group


@pytest.mark.heavy
def test_the_readme_pretrain_command_builds_the_wu_presets_student():
    """`distil pretrain student=sra` (the README's command, no other override) composes the teacher and
    student every Wu preset's cells read, so it builds their task-agnostic artifact, not a second."""
    from distil.tables.cells import compose_cell

    readme = compose_cell(["student=sra"], None, "readme")
    for name in ("wu-table1", "wu-table3", "wu-table4", "wu-fig2"):
        cell = compose_cell(expand(load_preset(name), "cpu")[0].overrides[:-1], None, name)
        # the task-agnostic stage reads the pre-trained teacher, not its fine-tuning recipe (which the
        # tables pin to their recorded one: RECORDED_RECIPE)
        pretrained = [{k: v for k, v in c["teacher"].items() if k != "finetune"} for c in (readme, cell)]
        assert (pretrained[0], readme["student"]) == (pretrained[1], cell["student"]), name


def fake_untuned(monkeypatch, model) -> list:
    """distil-untuned's subprocess replaced: it writes untuned.csv with one row, `model(commands so far)`
    at 50%; the list of the commands run."""
    commands = []

    def measured(command, **kwargs):
        commands.append(command)
        out = Path(command[command.index("--out") + 1])
        out.mkdir(parents=True, exist_ok=True)
        (out / "untuned.csv").write_text(f"model,accuracy\n{model(commands)},0.5\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(run.subprocess, "run", measured)
    return commands


def test_a_bench_csv_is_reused_only_for_the_overrides_it_was_measured_with(tmp_path, monkeypatch, capsys):
    """A second wu-table5 at the same scale reuses untuned.csv; the other scale, or a csv that a
    direct `distil-untuned` (its defaults) rewrote since, measures again."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    commands = fake_untuned(monkeypatch, lambda commands: f"run {len(commands)}")
    monkeypatch.setattr(run, "provenance", lambda command: {"command": " ".join(command)})  # no git call
    for args in (["wu-table5"], ["wu-table5"], ["wu-table5", "--scale", "paper"], ["wu-table5", "--scale", "paper"]):
        table(args, capsys)
    assert len(commands) == 2 and "agnostic=paper" in commands[1]
    (tmp_path / "outputs" / "tables" / "untuned.csv").write_text("model,accuracy\ndirect,0.5\n")
    _, out, _ = table(["wu-table5", "--scale", "paper"], capsys)
    assert len(commands) == 3 and "measured with []; measuring again" in out.replace("\n", "")


def test_a_measured_bench_is_recorded_with_its_provenance_and_a_fresh_clone_renders_it(tmp_path, monkeypatch,
                                                                                      capsys):
    """A bench's numbers travel like a cell's: results/bench/<bench>.csv with the command, machine,
    code version and time; a machine without outputs/ renders the table from them and says where they
    came from, and a record whose csv changed since is no record."""
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    commands = fake_untuned(monkeypatch, lambda commands: "run")
    monkeypatch.setattr(run, "provenance", lambda command: {"command": " ".join(command), "machine": "a CPU, 2 cores",
                                                             "code": "abc123", "date": "2026-11-28 15:00 UTC"})
    table(["wu-table5"], capsys)
    saved = json.loads((tmp_path / "results" / "bench" / "untuned.json").read_text())
    assert saved["machine"] == "a CPU, 2 cores" and saved["command"].startswith("distil paper wu-table5 ")
    assert (tmp_path / "results" / "bench" / "untuned.csv").read_text() == "model,accuracy\nrun,0.5\n"

    shutil.rmtree(tmp_path / "outputs")  # a fresh clone: the record alone
    code, out, err = table(["wu-table5", "--render-only"], capsys)
    assert code == 0, err
    assert len(commands) == 1 and "read from" in out
    md = (tmp_path / "outputs" / "tables" / "wu-table5.md").read_text()
    assert "Measured by `distil paper wu-table5 " in md and "on a CPU, 2 cores, 2026-11-28 15:00 UTC, code abc123" in md

    shutil.rmtree(tmp_path / "outputs")
    (tmp_path / "results" / "bench" / "untuned.csv").write_text("model,accuracy\nedited,0.9\n")
    code, out, _ = table(["wu-table5", "--render-only"], capsys)
    assert code == 0 and "wu-table5: skipped" in out


def test_only_cells_run_here_are_timed_a_recorded_cell_keeps_its_recorded_timing(tmp_path, monkeypatch):
    """A cell read from the tracked results ran on another machine: its student is not here to time."""
    import distil.tables.timing

    preset = dataclasses.replace(load_preset("frontier-sst2"), name="timed")
    here, elsewhere = (Cell(row=row, column=None, seed=1, overrides=[], key=key)
                       for row, key in (("here", "a" * 16), ("elsewhere", "b" * 16)))
    finished = {"status": "ok", "artifacts": {"teacher": "minilm-0"}, "student": {"test": {"accuracy": 0.5}}}
    (tmp_path / "cells" / here.key).mkdir(parents=True)
    (tmp_path / "cells" / here.key / "metrics.json").write_text(json.dumps(finished))
    run.ledger.record(elsewhere.key, {**finished, "timing": {"speedup": 3.0}})
    timed = []
    monkeypatch.setattr(distil.tables.timing, "timing_is_current", lambda directories: False)
    monkeypatch.setattr(distil.tables.timing, "time_cells",
                        lambda directories, overrides, root: timed.append(sorted(directories)))
    assert run.run_timing(preset, [here, elsewhere], tmp_path) == []
    assert timed == [[here.key]] and elsewhere.recorded and not here.recorded


@pytest.mark.heavy
def test_the_default_job_stops_its_teacher_on_dev_and_every_table_cell_keeps_the_recorded_recipe():
    """conf/config.yaml's min_steps_while=at_majority is the default job's; a table cell pins the recipe
    its recorded teachers were fine-tuned with, at the schema default, so no cell's key moved."""
    from distil.tables.cells import compose_cell

    assert compose_cell([], None, "default")["teacher"]["finetune"]["min_steps_while"] == "at_majority"
    cell = expand(load_preset("tang-table1"), "cpu")[0]
    assert cell.overrides[0] == "teacher.finetune.min_steps_while=always"
    assert compose_cell(cell.overrides[:-1], None, "tang")["teacher"]["finetune"]["min_steps_while"] == "always"


def test_a_bench_written_into_the_ledger_itself_is_recorded_in_place(tmp_path):
    """`distil bench demo --out results/bench`: the csv is already the recorded one; copying a file
    onto itself failed after the measurement, and the provenance was never written."""
    from distil.tables.ledger import record_bench, recorded_bench

    csv = tmp_path / "bench" / "bench-demo.csv"
    csv.parent.mkdir()
    csv.write_text("code,wall s\nabc,300\n")
    csv.with_suffix(".md").write_text("| code | wall s |\n")
    record_bench(csv, {"command": "distil bench demo --out results/bench"}, root=tmp_path)
    path, provenance = recorded_bench("bench-demo", root=tmp_path)
    assert path == csv and provenance["command"] == "distil bench demo --out results/bench"
    assert csv.read_text() == "code,wall s\nabc,300\n"


def test_a_cell_another_worker_holds_is_skipped_and_a_cell_it_finished_meanwhile_is_not_rerun(tmp_path, monkeypatch,
                                                                                                capsys):
    """Two `distil table` workers on one outputs directory: the cell lock decides who runs a cell. The
    other worker here holds D1's lock (flock conflicts between two opens of the file, in one process
    too) and finished `hard` after this worker listed it."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]},\n"
                 "       {label: D0, overrides: [schedule=d0]}]\n")
    ran = fake_cells(monkeypatch, lambda cell: cell.row)
    hard, d1, _ = expand(load_preset("tiny"), "cpu")
    root = tmp_path / "outputs"
    real_result_of, checks = run.result_of, []

    def result_of(root_, key):  # `hard` is listed as not done, then found done under its lock
        checks.append(key)
        if key == hard.key and checks.count(key) == 2:
            (root / "cells" / key).mkdir(parents=True)
            (root / "cells" / key / "metrics.json").write_text('{"status": "ok"}')
        return real_result_of(root_, key)

    monkeypatch.setattr(run, "result_of", result_of)
    with run.cell_lock(root, d1.key) as held:
        assert held
        code, out, err = table(["tiny"], capsys)
        assert code == 0, err
        _, listing, _ = table(["tiny", "--dry-run"], capsys)
    out = out.replace("\n", "")
    assert ran == ["D0"]
    assert "tiny hard seed 1: skipped (done by another worker)" in out
    assert "tiny D1 seed 1: skipped (another worker is running it)" in out
    assert "D1 seed 1: running (another worker)" in listing


@pytest.mark.slow  # two real table workers: ~20 s (the per-cell lock itself is tested above, in one process)
def test_two_table_workers_started_together_run_each_cell_once(tmp_path):
    """Two real `distil table` processes on one preset (two one-epoch smoke cells): each cell runs once."""
    from distil.common.console import console_script

    write_preset(tmp_path / "conf" / "table", "pair", "scales: {cpu: {base: [debug=smoke, trainer.threads=1, "
                 "trainer.epochs=1], seeds: [1]}}\nrows: [{label: hard, overrides: [schedule=hard]}, "
                 "{label: D1, overrides: [schedule=d1]}]\n")
    env = {**os.environ, "DISTIL_OUTPUTS": str(tmp_path / "outputs"), "DISTIL_CONFIG_DIR": str(tmp_path / "conf"),
           "DISTIL_RESULTS": str(tmp_path / "results")}
    workers = [subprocess.Popen([console_script("distil"), "table", "pair"], env=env, cwd=tmp_path, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [worker.communicate(timeout=600)[0] for worker in workers]
    assert [worker.returncode for worker in workers] == [0, 0], outputs
    ran = [line for out in outputs for line in out.splitlines() if re.search(r": done in \d", line)]
    assert sorted(re.sub(r"^cell \d/2 pair (.*): done in .*", r"\1", line) for line in ran) == [
        "D1 seed 1", "hard seed 1"]


def test_jobs_runs_cells_at_once_each_once_on_a_share_of_the_cores(tmp_path, monkeypatch, capsys):
    """--jobs 2: two workers of one process take the cells in turn (none twice), two at a time, each
    cell told its share of the cores (trainer.threads changes no result, so no key)."""
    import threading
    import time

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1, 2]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}, {label: D1, overrides: [schedule=d1]}]\n")
    ran, running, most = [], set(), [0]
    guard = threading.Lock()

    def fake_run(cell, root, extra=(), workers=None):
        with guard:
            running.add(cell.key)
            most[0] = max(most[0], len(running))
            ran.append((cell.row, cell.seed, tuple(extra)))
        time.sleep(0.3)
        directory = root / "cells" / cell.key
        directory.mkdir(parents=True)
        (directory / "metrics.json").write_text('{"status": "ok", "student": {"test": {"accuracy": 0.5}}}')
        with guard:
            running.discard(cell.key)
        return "done", None

    monkeypatch.setattr(run, "run_cell", fake_run)
    code, out, err = table(["tiny", "--jobs", "2"], capsys)
    assert code == 0, err
    assert sorted(ran) == [("D1", 1, ("trainer.threads=2",)), ("D1", 2, ("trainer.threads=2",)),
                           ("hard", 1, ("trainer.threads=2",)), ("hard", 2, ("trainer.threads=2",))]
    assert most[0] == 2
    # the workers share one queue: each cell is met once, never skipped as its sibling's
    assert out.count(": running") == 4 and out.count(": done in") == 4 and "another worker" not in out
    code, out, _ = table(["tiny", "--jobs", "2"], capsys)  # again: each cell said to be done once
    assert code == 0 and out.count("skipped (done)") == 4


@pytest.mark.parametrize("argv,extra", [([], ()), (["--threads", "1"], ("trainer.threads=1",)),
                                         (["--jobs", "2", "--threads", "1"], ("trainer.threads=1",))])
def test_threads_sets_each_cells_torch_threads(tmp_path, monkeypatch, capsys, argv, extra):
    """--threads N: each cell's trainer.threads (no key changes), with one job or several; by default a
    single job leaves the config's own."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}]\n")
    fake_cells(monkeypatch, lambda cell: cell.key)
    finish, seen = run.run_cell, []

    def fake_run(cell, root, extra=(), workers=None):
        seen.append(tuple(extra))
        return finish(cell, root, extra, workers)

    monkeypatch.setattr(run, "run_cell", fake_run)
    code, _, err = table(["tiny", *argv], capsys)
    assert code == 0, err
    assert seen == [extra]


def test_threads_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_:
        table_main(["tiny", "--threads", "0"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "distil table: error: --threads 0: give 1 or more (see: distil table --help)"]


def test_package_digest_follows_the_code_and_nothing_else(tmp_path):
    from distil.common.provenance import package_digest

    package = tmp_path / "distil"
    (package / "conf").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "conf" / "b.yaml").write_text("k: 1\n")
    first = package_digest(package)
    (package / "notes.md").write_text("not code")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "a.py").write_text("compiled")
    assert package_digest(package) == first
    (package / "conf" / "b.yaml").write_text("k: 2\n")
    assert package_digest(package) != first


def test_a_table_stops_before_a_cell_when_the_code_changed_under_it(tmp_path, monkeypatch, capsys):
    """The incident it prevents: a table run from the checkout being edited trained two cells with the new
    default precision under keys of the old code. Here the code changes between the start and the first cell:
    the cell's process is never started, and the error says what to do."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DISTIL_CONFIG_DIR", str(tmp_path / "conf"))
    monkeypatch.setenv("DISTIL_OUTPUTS", str(tmp_path / "outputs"))
    write_preset(tmp_path / "conf" / "table", "tiny", "scales: {cpu: {base: [debug=smoke], seeds: [1]}}\n"
                 "rows: [{label: hard, overrides: [schedule=hard]}]\n")
    digests = iter(["old", "new"])  # at the start, then before the cell
    monkeypatch.setattr(run, "package_digest", lambda: next(digests))
    launched = []
    monkeypatch.setattr(run.subprocess, "Popen", lambda command, **kwargs: launched.append(command))
    run.code_at_start.cache_clear()
    try:
        code, _, err = table(["tiny"], capsys)
    finally:
        run.code_at_start.cache_clear()
    assert code == 2 and launched == []
    assert err.splitlines()[-1] == (
        "distil table: error: the distil package changed since this command started (a checkout, pull or edit): a "
        "cell run now would be keyed by the old code; rerun the same command to go on (finished cells are kept)")


FOREVER_CELL = """#!{python}
import os, sys, time
with open(os.environ["STARTED"], "a") as started:
    started.write(f"{{os.getpid()}}\\n")
time.sleep(120)
"""


def test_an_interrupt_stops_every_cell_of_a_parallel_table_and_no_worker_starts_another(tmp_path, monkeypatch):
    """`distil table --jobs 2`: Ctrl-C (or SIGTERM) reaches the main thread alone, which used to wait while its
    two workers went on through the table. Now both running cells are stopped (SIGTERM after the grace a
    terminal's own Ctrl-C gets) and neither worker starts a third cell of the four."""
    import sys
    import threading
    import time

    script = tmp_path / "distil"
    script.write_text(FOREVER_CELL.format(python=sys.executable))
    script.chmod(0o755)
    started = tmp_path / "started"
    monkeypatch.setenv("STARTED", str(started))
    monkeypatch.setattr(run, "console_script", lambda name: str(script))
    monkeypatch.setattr(run, "INTERRUPT_GRACE_SECONDS", 0.2)  # the background cell gets no Ctrl-C of its own
    cells = [Cell(row=f"r{i}", column=None, seed=1, overrides=[f"seed={i}"], key=f"k{i}") for i in range(4)]
    preset = load_preset(PRESET_DIR / "tang-table1.yaml")

    def ctrl_c(signum, frame):  # a signal of its own: a test worker may ignore SIGINT
        raise KeyboardInterrupt

    def interrupt_once_two_run() -> None:
        while not started.exists() or len(started.read_text().split()) < 2:
            time.sleep(0.05)
        signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)  # wakes the main thread's wait

    previous = signal.signal(signal.SIGUSR1, ctrl_c)
    threading.Thread(target=interrupt_once_two_run, daemon=True).start()
    begun = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            run.run_sweep(preset, cells, tmp_path / "outputs", jobs=2)
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert time.monotonic() - begun < 60  # not the cells' 120 s
    pids = [int(pid) for pid in started.read_text().split()]
    assert len(pids) == 2  # no third cell
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)  # stopped and reaped
    ended = [json.loads((tmp_path / "outputs" / "cells" / key / "metrics.json").read_text())["status"]
             for key in ("k0", "k1")]
    assert ended == ["failed: distil exited with code -15 without writing metrics.json (its output: "
                     f"{tmp_path / 'outputs' / 'cells' / key / 'distil-table.log'})" for key in ("k0", "k1")]
    assert not (tmp_path / "outputs" / "cells" / "k2").exists()
