"""`distil cache list | verify | prune` against hand-built caches, and once against a real one."""

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from distil.cli.cache import main
from distil.common.diskspace import human_bytes as human_size
from distil.store.admin import ago, parse_duration, parse_size

DAY = 86400
HINT = "(the next run that needs it rebuilds it; or: distil cache prune --damaged)"
TEACHER = "minilm-0123456789abcdef"
TARGETS = "minilm-fedcba9876543210"


def make_artifact(root: Path, kind: str, key: str, files: dict[str, bytes], *, days_unused: float = 0,
                  describe: dict | None = None, spec: dict | None = None) -> Path:
    """An artifact as the store writes it: files, a manifest with their real sizes and SHA-256s,
    and the manifest's mtime as its last use."""
    path = root / kind / key
    path.mkdir(parents=True)
    for rel, data in files.items():
        (path / rel).write_bytes(data)
    manifest = {"key": key, "kind": kind, "format": 1, "spec": spec or {}, "info": {},
                "files": {rel: {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
                          for rel, data in files.items()}}
    if describe is not None:
        manifest["describe"] = describe
    (path / "manifest.json").write_text(json.dumps(manifest))
    used = time.time() - days_unused * DAY
    os.utime(path / "manifest.json", (used, used))
    return path


def on_disk(path: Path) -> int:
    """Size on disk as the tool counts it: every file in the directory, manifest included."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def make_build(root: Path, name: str, days_unwritten: float = 0) -> Path:
    path = root / "tmp" / name
    path.mkdir(parents=True)
    (path / "test-00000.safetensors").write_bytes(b"x" * 100)
    written = time.time() - days_unwritten * DAY
    for p in (path / "test-00000.safetensors", path):
        os.utime(p, (written, written))
    return path


class HeldLock:
    """A build in progress, as the store holds it: an exclusive flock on locks/<key>.lock."""

    def __init__(self, root: Path, key: str):
        (root / "locks").mkdir(parents=True, exist_ok=True)
        self.handle = (root / "locks" / f"{key}.lock").open("a")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def release(self):
        self.handle.close()


@pytest.fixture
def cache(tmp_path):
    """A teacher (new manifest with `describe`), its targets (old manifest, no `describe`), both intact."""
    root = tmp_path / "cache"
    make_artifact(root, "teachers", TEACHER, {"model.safetensors": b"w" * 3000, "config.json": b"{}"},
                  days_unused=2, describe={"teacher": "minilm", "dataset": "sst2", "task": "classification",
                                           "examples": {"labeled": 1000, "dev": 872}})
    make_artifact(root, "targets", TARGETS,
                  {"test-00001.safetensors": b"t" * 500, "dev-00001.safetensors": b"d" * 500},
                  days_unused=40, spec={"teacher": TEACHER, "layer": 6, "data": "f00"})
    return root


def cli(root, capsys, *args) -> tuple[int, str, str]:
    code = main([*args, "--cache-dir", str(root)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ----------------------------------------------------------------------------- list


def test_list_shows_what_size_and_last_use(cache, capsys):
    code, out, _ = cli(cache, capsys, "list")
    lines = out.splitlines()
    teacher_size, targets_size = on_disk(cache / "teachers" / TEACHER), on_disk(cache / "targets" / TARGETS)
    assert code == 0
    assert lines[0].split() == ["kind", "key", "what", "size", "last", "used"]
    assert lines[1].split()[:2] == ["teachers", TEACHER]
    assert "teacher minilm, sst2, classification, 1,872 examples" in lines[1]
    assert f"  {human_size(teacher_size)}  2 days ago (" in lines[1]
    # an old manifest without `describe`: the teacher from the spec's teacher key, the layer from the spec
    assert lines[2].split()[:2] == ["targets", TARGETS]
    assert "teacher minilm, layers 6" in lines[2] and f"  {human_size(targets_size)}  40 days ago (" in lines[2]
    assert lines[3] == (f"total: 2 artifact(s), {human_size(teacher_size + targets_size)} "
                        f"(teachers 1, {human_size(teacher_size)}; targets 1, {human_size(targets_size)})")


def test_list_json_for_scripts(cache, capsys):
    code, out, _ = cli(cache, capsys, "list", "--json", "--verify")
    listing = json.loads(out)
    assert code == 0
    by_key = {row["key"]: row for row in listing["artifacts"]}
    assert by_key[TEACHER]["describe"]["dataset"] == "sst2"
    assert by_key[TEACHER]["bytes"] == on_disk(cache / "teachers" / TEACHER)
    assert by_key[TARGETS]["describe"] == {"teacher": "minilm", "layers": [6]}
    assert by_key[TARGETS]["teacher_key"] == TEACHER and by_key[TARGETS]["status"] == "ok"
    assert listing["total_bytes"] == on_disk(cache) and listing["builds"] == []


def test_list_shows_running_and_stale_builds(cache, capsys):
    make_build(cache, "bert-1111111111111111")
    make_build(cache, "bert-2222222222222222", days_unwritten=3)
    lock = HeldLock(cache, "bert-1111111111111111")
    try:
        code, out, _ = cli(cache, capsys, "list")
        builds = {row["key"]: row["state"] for row in json.loads(cli(cache, capsys, "list", "--json")[1])["builds"]}
    finally:
        lock.release()
    assert code == 0 and "running (lock held)" in out and "stale: the next run resumes it" in out
    assert builds == {"bert-1111111111111111": "running", "bert-2222222222222222": "stale"}


def test_list_says_which_stale_builds_nothing_resumes(cache, capsys):
    from tests.test_store import dead_pid

    make_build(cache, "bert-2222222222222222")  # a killed build: resumable
    make_build(cache, TEACHER)  # its artifact is complete: no build of it runs again
    make_build(cache, f"bert-3333333333333333.{dead_pid()}")  # an old version's build
    code, out, _ = cli(cache, capsys, "list")
    states = {line.split()[0]: " ".join(line.split()[1:]) for line in out.splitlines() if "stale" in line}
    resumable = {row["key"]: row["resumable"] for row in json.loads(cli(cache, capsys, "list", "--json")[1])["builds"]}
    assert code == 0
    assert states["bert-2222222222222222"].startswith("stale: the next run resumes it, or prune --stale")
    assert states[TEACHER].startswith("stale: nothing resumes it, the next run removes it, or prune --stale")
    assert states["bert-3333333333333333"].startswith("stale: nothing resumes it, the next run removes it")
    assert resumable == {"bert-2222222222222222": True, TEACHER: False, "bert-3333333333333333": False}


def test_list_verify_marks_damage_and_exits_1(cache, capsys):
    (cache / "targets" / TARGETS / "dev-00001.safetensors").write_bytes(b"d" * 10)
    code, out, _ = cli(cache, capsys, "list", "--verify")
    assert code == 1
    assert "DAMAGED: dev-00001.safetensors is truncated (10 of 500 bytes)" in out


# ----------------------------------------------------------------------------- verify


def test_verify_intact_cache(cache, capsys):
    code, out, err = cli(cache, capsys, "verify")
    assert code == 0
    assert out.splitlines() == [f"ok  teachers/{TEACHER}", f"ok  targets/{TARGETS}"]
    assert "2 artifact(s) checked: 2 ok, 0 damaged" in err


def flip_a_byte(path: Path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage,problem", [
    (flip_a_byte, "checksum mismatch in test-00001.safetensors"),
    (lambda p: p.write_bytes(p.read_bytes()[:123]), "test-00001.safetensors is truncated (123 of 500 bytes)"),
    (lambda p: p.unlink(), "missing test-00001.safetensors"),
    (lambda p: (p.parent / "manifest.json").write_text("{not json"), "unreadable manifest.json"),
    (lambda p: (p.parent / "manifest.json").unlink(), "no manifest.json"),
])
def test_verify_reports_damage_in_one_line(cache, capsys, damage, problem):
    damage(cache / "targets" / TARGETS / "test-00001.safetensors")
    code, out, _ = cli(cache, capsys, "verify")
    assert code == 1
    assert out.splitlines() == [f"ok  teachers/{TEACHER}", f"DAMAGED targets/{TARGETS}: {problem} {HINT}"]


def test_verify_ignores_files_the_manifest_does_not_list(cache, capsys):
    (cache / "teachers" / TEACHER / "notes.txt").write_text("left by a user")
    assert cli(cache, capsys, "verify")[0] == 0


def test_verify_named_entries_by_key_kind_key_or_prefix(cache, capsys):
    code, out, _ = cli(cache, capsys, "verify", f"targets/{TARGETS}", "minilm-01")
    assert code == 0 and out.splitlines() == [f"ok  targets/{TARGETS}", f"ok  teachers/{TEACHER}"]
    code, _, err = cli(cache, capsys, "verify", "minilm")
    assert code == 2 and "'minilm' matches 2 artifacts" in err


# ----------------------------------------------------------------------------- prune


def keys(root: Path) -> set[str]:
    return {p.name for kind in ("teachers", "targets", "tmp") if (root / kind).is_dir()
            for p in (root / kind).iterdir()}


def test_prune_older_than_keeps_recent_and_reports_kept_targets(cache, capsys):
    old_teacher = "bert-aaaaaaaaaaaaaaaa"
    make_artifact(cache, "teachers", old_teacher, {"model.safetensors": b"m" * 2048}, days_unused=31)
    make_artifact(cache, "targets", "bert-bbbbbbbbbbbbbbbb", {"a": b"a"}, days_unused=1,
                  spec={"teacher": old_teacher})
    old_size, targets_size = on_disk(cache / "teachers" / old_teacher), on_disk(cache / "targets" / TARGETS)
    code, out, _ = cli(cache, capsys, "prune", "--older-than", "30d")
    assert code == 0
    assert out.splitlines() == [
        f"deleted teachers/{old_teacher}  {human_size(old_size)}  (last used 31 days ago)",
        "  kept targets/bert-bbbbbbbbbbbbbbbb: built from this teacher, still usable without it "
        "(a run that needs the teacher fine-tunes it again)",
        f"deleted targets/{TARGETS}  {human_size(targets_size)}  (last used 40 days ago)",
        f"deleted 2, freed {human_size(old_size + targets_size)}; artifacts left: {human_size(on_disk(cache))}",
    ]
    assert keys(cache) == {TEACHER, "bert-bbbbbbbbbbbbbbbb"}


def test_prune_max_size_deletes_least_recently_used_first(tmp_path, capsys):
    root = tmp_path / "cache"
    for key, days in (("a-aaaaaaaaaaaaaaaa", 5), ("b-bbbbbbbbbbbbbbbb", 1), ("c-cccccccccccccccc", 9),
                      ("d-dddddddddddddddd", 3)):
        make_artifact(root, "teachers", key, {"w": b"w" * 1024}, days_unused=days)
    # each is 1K of data + its manifest: two fit in 3K, three do not
    code, out, _ = cli(root, capsys, "prune", "--max-size", "3K")
    assert code == 0
    assert [line.split()[1] for line in out.splitlines()[:-1]] == ["teachers/c-cccccccccccccccc",
                                                                   "teachers/a-aaaaaaaaaaaaaaaa"]
    assert keys(root) == {"b-bbbbbbbbbbbbbbbb", "d-dddddddddddddddd"}


def test_prune_max_size_passes_over_a_locked_artifact(tmp_path, capsys):
    root = tmp_path / "cache"
    for key, days in (("a-aaaaaaaaaaaaaaaa", 9), ("b-bbbbbbbbbbbbbbbb", 5), ("c-cccccccccccccccc", 1)):
        make_artifact(root, "teachers", key, {"w": b"w" * 1024}, days_unused=days)
    lock = HeldLock(root, "a-aaaaaaaaaaaaaaaa")
    try:
        code, out, _ = cli(root, capsys, "prune", "--max-size", "2.5K")  # room for two
    finally:
        lock.release()
    assert code == 0 and keys(root) == {"a-aaaaaaaaaaaaaaaa", "c-cccccccccccccccc"}


def test_prune_never_deletes_a_locked_artifact(cache, capsys):
    lock = HeldLock(cache, TARGETS)
    try:
        code, out, _ = cli(cache, capsys, "prune", "--older-than", "30d")
    finally:
        lock.release()
    assert code == 0 and TARGETS in keys(cache)
    assert out.splitlines() == [f"skipped targets/{TARGETS}: a run is building or reading it (its lock is held)",
                                f"deleted 0, freed 0B; 1 in use, kept; artifacts left: {human_size(on_disk(cache))}"]


def test_prune_damaged_only(cache, capsys):
    flip_a_byte(cache / "teachers" / TEACHER / "model.safetensors")
    size = human_size(on_disk(cache / "teachers" / TEACHER))
    code, out, _ = cli(cache, capsys, "prune", "--damaged")
    assert code == 0
    assert out.splitlines()[0] == (f"deleted teachers/{TEACHER}  {size}  "
                                   f"(damaged: checksum mismatch in model.safetensors)")
    assert keys(cache) == {TARGETS}


def test_prune_stale_removes_free_builds_and_keeps_locked_ones(cache, capsys):
    make_build(cache, "bert-1111111111111111")  # a run is building it right now
    make_build(cache, "bert-2222222222222222")  # a killed run's leftovers, lock free
    make_build(cache, "bert-3333333333333333")  # a killed run's leftovers, no lock file at all
    make_build(cache, f"bert-4444444444444444.{os.getpid()}")  # old-style, its process alive
    (cache / "locks").mkdir()
    (cache / "locks" / "bert-2222222222222222.lock").touch()
    lock = HeldLock(cache, "bert-1111111111111111")
    try:
        code, out, _ = cli(cache, capsys, "prune", "--stale")
    finally:
        lock.release()
    assert code == 0
    assert out.splitlines()[:2] == ["deleted tmp/bert-2222222222222222  100B  (stale build, last written just now)",
                                    "deleted tmp/bert-3333333333333333  100B  (stale build, last written just now)"]
    assert keys(cache) == {TEACHER, TARGETS, "bert-1111111111111111", f"bert-4444444444444444.{os.getpid()}"}


def test_age_rule_takes_old_stale_builds_unless_restricted_to_a_kind(cache, capsys):
    make_build(cache, "bert-2222222222222222", days_unwritten=40)
    cli(cache, capsys, "prune", "--older-than", "30d", "--kind", "teachers")
    assert "bert-2222222222222222" in keys(cache)
    cli(cache, capsys, "prune", "--older-than", "30d")
    assert "bert-2222222222222222" not in keys(cache)


def test_dry_run_deletes_nothing_and_writes_nothing(cache, capsys):
    make_build(cache, "bert-2222222222222222")
    before = sorted(p.relative_to(cache) for p in cache.rglob("*"))
    code, out, _ = cli(cache, capsys, "prune", "--older-than", "1d", "--stale", "--dry-run")
    assert code == 0
    assert sorted(p.relative_to(cache) for p in cache.rglob("*")) == before  # no lock files either
    assert out.splitlines()[-1] == f"dry run: would delete 3, freeing {human_size(on_disk(cache))}; nothing was deleted"
    assert out.splitlines()[0].startswith(f"would delete teachers/{TEACHER}  ")


def test_prune_kind_restricts_to_that_kind(cache, capsys):
    cli(cache, capsys, "prune", "--older-than", "1d", "--kind", "targets")
    assert keys(cache) == {TEACHER}


# ----------------------------------------------------------------------------- input


@pytest.mark.parametrize("args,message", [
    (["lst"], "invalid choice: 'lst'"),
    ([], "choose a command: list, verify or prune"),
    (["prune", "--older-than", "3x"], "'3x' is not a duration: use a number and a unit (s, m, h, d, w)"),
    (["prune", "--max-size", "lots"], "'lots' is not a size: use a number and a unit (K, M, G, T"),
    (["prune"], "nothing to prune by: give --older-than, --max-size, --damaged and/or --stale"),
    (["list", "--kind", "teacher"], "no artifacts of kind 'teacher'"),
    (["verify", "nope"], "no artifact 'nope' in"),
])
def test_bad_input_is_one_line_exit_2(cache, capsys, args, message):
    try:
        code = main(args + (["--cache-dir", str(cache)] if args else []))
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert err.startswith("distil cache: error: ") and message in err and "Traceback" not in err


@pytest.mark.parametrize("args", [["verify", "nope"], ["prune"], ["prune", "--max-size", "lots"]])
def test_errors_name_the_command_as_typed(cache, capsys, args):
    """`distil cache ...` is the same command as `distil-cache ...`; its errors say `distil cache`,
    from the command itself, the top parser and a subcommand's parser alike."""
    try:
        code = main([*args, "--cache-dir", str(cache)], prog="distil cache")
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("distil cache: error: ") and "distil-cache" not in err


def test_missing_cache_dir_says_what_to_pass(tmp_path, capsys):
    assert cli(tmp_path / "nowhere", capsys, "list")[0] == 2
    (tmp_path / "outputs" / "cache" / "teachers").mkdir(parents=True)
    code, _, err = cli(tmp_path / "outputs", capsys, "verify")
    assert code == 2 and f"pass --cache-dir {tmp_path / 'outputs' / 'cache'}" in err


def test_default_cache_dir_follows_distil_outputs(cache, capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # ./outputs/cache does not exist here
    monkeypatch.setenv("DISTIL_OUTPUTS", str(cache.parent))
    assert main(["verify"]) == 0
    assert f"ok  teachers/{TEACHER}" in capsys.readouterr().out


def test_options_before_the_command_work_too(cache, capsys):
    assert main(["--cache-dir", str(cache), "--kind", "targets", "verify"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"ok  targets/{TARGETS}"]


def test_help_has_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["prune", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "--older-than AGE" in out and "distil cache prune --max-size 5G" in out


@pytest.mark.parametrize("text,seconds", [("30d", 30 * DAY), ("12h", 43200), ("90m", 5400), ("2w", 14 * DAY),
                                          ("1.5d", 1.5 * DAY)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text,size", [("5G", 5 << 30), ("500M", 500 << 20), ("1.5T", int(1.5 * (1 << 40))),
                                       ("2KiB", 2048), ("3gb", 3 << 30), ("100", 100)])
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_human_units():
    assert [human_size(n) for n in (216, 4096, 340 << 20, int(1.2 * (1 << 30)))] == ["216B", "4.0K", "340M", "1.2G"]
    assert [ago(s) for s in (5, 120, 3 * 3600, 1 * DAY, 45 * DAY, 90 * DAY, 400 * DAY)] == [
        "just now", "2 minutes ago", "3 hours ago", "1 day ago", "45 days ago", "3 months ago", "1 year ago"]


# ----------------------------------------------------------------------------- end to end


@pytest.mark.heavy
def test_console_scripts_on_a_real_cache(tmp_path):
    distil, distil_cache = shutil.which("distil"), shutil.which("distil-cache")
    if not (distil and distil_cache):
        pytest.skip("console scripts not installed")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "COLUMNS": "200"}
    env.pop("DISTIL_OUTPUTS", None)

    def run(*args):
        return subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)

    assert run(distil, "debug=smoke").returncode == 0
    listing = run(distil, "cache", "list")
    assert listing.returncode == 0, listing.stderr
    assert "teachers  tiny-" in listing.stdout
    assert "teacher tiny, toy, classification, layers -1, 108 examples" in listing.stdout
    assert "total: 2 artifact(s)" in listing.stdout

    verified = run(distil_cache, "verify")
    assert verified.returncode == 0, verified.stderr
    lines = verified.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("ok  teachers/tiny-") and lines[1].startswith("ok  targets/tiny-")

    shard = sorted((tmp_path / "outputs" / "cache" / "targets").glob("*/*.safetensors"))[0]
    flip_a_byte(shard)
    damaged = run(distil_cache, "verify")
    assert damaged.returncode == 1
    assert f"checksum mismatch in {shard.name} {HINT}" in damaged.stdout


def test_cache_list_says_a_pair_was_cached_apart():
    from distil.store.admin import what_it_is

    described = {"teacher": "tiny", "dataset": "toy-pair", "task": "pair", "layers": [-1],
                 "hidden": "each sentence of a pair alone", "examples": {"dev": 4, "test": 6}}
    assert what_it_is(described) == ("teacher tiny, toy-pair, pair, layers -1, each sentence of a pair alone, "
                                     "10 examples")
