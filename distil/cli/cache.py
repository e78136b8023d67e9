"""`distil cache list | verify | prune`: what the artifact cache holds, whether its files are intact, and
trimming it by age, size or damage (the work is distil/store/admin.py's)."""

from __future__ import annotations

import argparse
import functools
import sys
import textwrap
from pathlib import Path

from distil.cli.parsing import alias_note, run_guarded
from distil.errors import DistilError
from distil.store.admin import (
    default_cache_dir,
    list_cache,
    open_cache,
    parse_duration,
    parse_size,
    prune_cache,
    verify_cache,
)

EXAMPLES = """\
examples:
  distil cache list                          # what is cached, how big, when last used
  distil cache list --verify                 # ... and whether every file matches its checksum
  distil cache verify                        # one line per artifact; exit 1 if any is damaged
  distil cache prune --older-than 30d --dry-run
  distil cache prune --max-size 5G           # delete least recently used artifacts until 5 GiB fit
  distil cache prune --damaged --stale       # damaged artifacts, and what failed or killed runs left
  distil cache list --json --cache-dir /data/distil/cache
"""


class Parser(argparse.ArgumentParser):
    """Errors name the command as the user typed it (`distil-cache` or `distil cache`), also from a
    subcommand's parser, whose own prog is `distil cache prune`."""

    def __init__(self, *args, command: str = "distil cache", **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.command = command

    def error(self, message: str) -> None:  # one line, with where to look, instead of usage + message
        print(f"{self.command}: error: {message} (see: {self.prog} --help)", file=sys.stderr)
        sys.exit(2)


def add_common_options(parser: argparse.ArgumentParser, default: object) -> None:
    """--cache-dir and --kind, before or after the command. After it they default to SUPPRESS, so
    a value given before the command is not overwritten by the subcommand's default."""
    parser.add_argument("--cache-dir", type=Path, default=default, metavar="DIR",
                        help="the runs' paths.cache (default: $DISTIL_OUTPUTS/cache, else outputs/cache "
                             "from the current directory)")
    parser.add_argument("--kind", default=default, metavar="KIND",
                        help="only this kind of artifact: teachers, targets, ...")


def add_command(commands, name: str, summary: str, description: str, run) -> Parser:
    command = commands.add_parser(name, help=summary, description=textwrap.fill(description, 88),
                                  epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(command, argparse.SUPPRESS)
    command.set_defaults(run=run)
    return command


def build_parser(prog: str) -> Parser:
    parser = Parser(prog=prog, command=prog,
                    description=alias_note(prog, "distil cache", "List, verify and prune the artifact cache "
                                           "(fine-tuned teachers, cached teacher targets) that distil runs share."),
                    epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_options(parser, None)
    commands = parser.add_subparsers(dest="command", metavar="{list,verify,prune}",
                                     parser_class=functools.partial(Parser, command=prog))

    listing = add_command(commands, "list", "what is cached, size, last use",
                          "One row per artifact: kind, key, what it is, size on disk, last used; then the "
                          "builds in tmp/, running or left by a killed run.", list_cache)
    listing.add_argument("--verify", action="store_true", help="check checksums too (exit 1 if any is damaged)")
    listing.add_argument("--json", action="store_true", help="machine-readable output")

    verify = add_command(commands, "verify", "check files against their manifests",
                         "Check every (or each named) artifact's files against the sizes and SHA-256 sums in "
                         "its manifest. One line per artifact; exit status 1 if any is damaged.", verify_cache)
    verify.add_argument("keys", nargs="*", metavar="KEY", help="key, kind/key, or a unique prefix (default: all)")

    prune = add_command(commands, "prune", "delete by age, total size, damage",
                        "Delete what any of the rules given selects. A key whose lock is held (a run is "
                        "building it) is never deleted. Deleting a teacher keeps the targets computed from it.",
                        prune_cache)
    prune.add_argument("--older-than", type=parse_duration, metavar="AGE",
                       help="not used for AGE (30d, 12h, 2w); also stale builds not written for AGE "
                            "(unless --kind is given)")
    prune.add_argument("--max-size", type=parse_size, metavar="SIZE",
                       help="delete least recently used artifacts until they total at most SIZE (5G, 500M)")
    prune.add_argument("--damaged", action="store_true", help="artifacts whose files fail verification")
    prune.add_argument("--stale", action="store_true",
                       help="what failed or killed runs left and no run is working on: build directories in "
                            "tmp/ and students' checkpoints/ (which the next run of the same command would "
                            "otherwise resume), and the lock files of keys with nothing left")
    prune.add_argument("--dry-run", action="store_true", help="print what would be deleted, delete nothing")
    return parser


def main(argv: list[str] | None = None, prog: str = "distil cache") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.error("choose a command: list, verify or prune")
    try:
        root = open_cache(args.cache_dir or default_cache_dir())
        return args.run(root, args)
    except DistilError as error:
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `distil cache list | head`
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        return 130


def alias() -> None:
    """`distil-cache`, kept for one release."""
    sys.exit(run_guarded(main, None, "distil-cache"))
