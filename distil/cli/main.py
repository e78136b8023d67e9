"""`distil`: one command. `distil [run] key=value ...` is the Hydra app (distil/cli/run.py), the default;
`distil SUB ...` runs a subcommand, one file per subcommand in distil/cli/."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from distil.cli.parsing import run_guarded

# subcommand -> (module in distil/cli, its function, one line for `distil --help`)
SUBCOMMANDS = {
    "report": ("report", "main", "table.md and table.csv from the metrics.json files of a run or sweep"),
    "data": ("data", "main", "the splits a run would see, laid out as the papers' tables show them"),
    "cache": ("cache", "main", "list, verify and prune the artifact cache (teachers, cached targets)"),
    "predict": ("predict", "main", "label texts with a saved student"),
    "card": ("card", "main", "render a finished run's model card (its student's README.md) again"),
    "export": ("export", "main", "a run's student as ONNX (and int8), checked against PyTorch on its test split"),
    "pretrain": ("pretrain", "main", "build a student's task-independent start (masked LM or SRA)"),
    "table": ("table", "main", "run the missing cells of paper tables and write them (and --frontier-targets)"),
    "search": ("search", "main", "the most accurate student under a latency and size limit: a search over students"),
    "bench": ("bench", "main", "students | cache | checkpoint | all: size, speed and cost on this machine"),
    "paper": ("paper", "main", "tang-table2 | turc-table1 | wu-table2 | wu-table5 | all: a paper's measurements"),
}


def overview() -> str:
    lines = ["usage: distil [run] [key=value ...]      one run, or a sweep with -m (the Hydra app, below)",
             "       distil SUB [args ...]             SUB is one of:", ""]
    lines += [f"  {name:<10}{what}" for name, (_, _, what) in SUBCOMMANDS.items()]
    lines += ["", "distil SUB --help explains each, with examples.", "", *own_options(), ""]
    return "\n".join(lines)


def own_options() -> list[str]:
    """The user's own options (DISTIL_CONFIG_DIR's group/option.yaml files), which Hydra's group list
    below leaves out: it lists only the search path it started with, not one an override adds."""
    dirs = [Path(d) for d in os.environ.get("DISTIL_CONFIG_DIR", "").split(os.pathsep) if d]
    groups: dict[str, set[str]] = {}
    for directory in dirs:
        for file in directory.rglob("*.yaml") if directory.is_dir() else []:
            if file.parent != directory:  # a group's option; a YAML at the top is no option
                groups.setdefault(file.parent.relative_to(directory).as_posix(), set()).add(file.stem)
    if not groups:
        return []
    lines = [f"Your own options (DISTIL_CONFIG_DIR={os.environ['DISTIL_CONFIG_DIR']}), beside the groups below:"]
    lines += [f"  {group}: {', '.join(sorted(options))}" for group, options in sorted(groups.items())]
    return [*lines, ""]


def main() -> None:
    """Dispatch on the first word of sys.argv; anything else (an override, -m, --help, a typo) is the
    Hydra app's, which reports a word it cannot take as one line."""
    args = sys.argv[1:]
    if args[:1] == ["run"]:
        args = args[1:]
    elif args[:1] and args[0] in SUBCOMMANDS:
        module, function, _ = SUBCOMMANDS[args[0]]
        command = getattr(importlib.import_module(f"distil.cli.{module}"), function)
        sys.exit(run_guarded(command, args[1:], f"distil {args[0]}"))
    elif args[:1] in (["-h"], ["--help"]):
        try:
            print(overview(), end="", flush=True)
        except BrokenPipeError:  # `distil --help | head`
            from distil.cli.run import silence_stdout

            silence_stdout()
            sys.exit(141)
    sys.argv[1:] = args
    from distil.cli.run import main as run  # Hydra and the configuration schema: only for a run

    run()


if __name__ == "__main__":
    main()
