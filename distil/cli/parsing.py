"""What every `distil SUB` parser shares: one-line errors, examples kept as written, and the note on the
`distil-*` console scripts, aliases of `distil SUB` kept for one release."""

from __future__ import annotations

import argparse
import sys


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
