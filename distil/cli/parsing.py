"""What every `distil SUB` parser shares: one-line errors, examples kept as written, and the note on the
`distil-*` console scripts, aliases of `distil SUB` kept for one release."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path

Command = Callable[..., int]  # (argv, prog=...) -> exit code


def run_guarded(command: Command, args: list[str] | None, prog: str, **options) -> int:
    """A subcommand (`distil SUB`, or its `distil-*` alias); a disk that fills under it ends in one line
    and exit 2, as a run does."""
    from distil.common.diskspace import disk_full, disk_full_message

    try:
        return command(args, prog=prog, **options)
    except Exception as error:
        if not disk_full(error):
            raise
        print(f"{prog}: error: {disk_full_message(error)}", file=sys.stderr)
        return 2


def alias_note(prog: str, command: str, description: str) -> str:
    """A command's --help description; an alias's says whose alias it is first."""
    if prog == command:
        return description
    return f"alias of `{command}`, kept for one release. {description}"


class Parser(argparse.ArgumentParser):
    """`prog` is how the user called it (`distil report`, or the alias `distil-report`); `command` is
    the `distil SUB` form. Bad input is one line, `PROG: error: ...`, and exit code 2."""

    def __init__(self, prog: str, command: str, description: str, epilog: str | None = None, **kwargs) -> None:
        super().__init__(prog=prog, description=alias_note(prog, command, description), epilog=epilog,
                         formatter_class=argparse.RawDescriptionHelpFormatter, **kwargs)

    def error(self, message: str) -> None:
        print(f"{self.prog}: error: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def run_group(prog: str, command: str, description: str, members: dict[str, str], commands: dict[str, Command],
              examples: str, argv: list[str] | None, noun: str) -> int:
    """`distil bench NAME ...` / `distil paper NAME ...`: one of `members` (name -> one line), with its own
    arguments after it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    width = max(13, *(len(name) + 2 for name in members))  # a long name keeps a gap before its line
    listing = "\n".join(f"  {name:<{width}}{what}" for name, what in members.items())
    plural = noun + ("es" if noun.endswith("ch") else "s")
    parser = Parser(prog, command, f"{description}\n\n{plural}:\n{listing}", examples,
                    usage=f"{prog} {{{','.join(members)}}} ...")
    if argv[:1] in (["-h"], ["--help"]):
        parser.print_help()
        return 0
    if not argv:
        parser.error(f"choose a {noun}: {', '.join(members)}")
    if argv[0] not in commands:
        parser.error(f"no {noun} {argv[0]!r}; choose one of: {', '.join(members)}")
    return commands[argv[0]](argv[1:], prog=f"{prog} {argv[0]}")


def run_each(runs: list[tuple[str, Command, list[str]]]) -> int:
    """Every command in turn (its prog, its function, its arguments); one that fails does not stop the
    others, and the first failure's exit code is the group's."""
    code = 0
    for prog, run, argv in runs:
        try:
            ended = run(argv, prog=prog)
        except SystemExit as exit_:  # a member's one-line error: the others still run
            ended = exit_.code if isinstance(exit_.code, int) else 1
        code = code or ended
    return code


def data_dir_argument(parser: argparse.ArgumentParser, holds: str, more: str = "") -> None:
    parser.add_argument("--data-dir", type=Path, default=Path(os.environ.get("DISTIL_DATA_DIR", "../shared/data")),
                        help=f"the folder holding {holds} (default: $DISTIL_DATA_DIR, else ../shared/data{more})")
