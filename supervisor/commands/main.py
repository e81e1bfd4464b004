"""The command line of DESIGN section 7: one sub-command per verb, `run` by default.

Each command is a module of this folder with `add_arguments(parser)` and `execute(args)`. A
mistake of the user's or a database the host cannot use is one line on stderr and a non-zero
exit; anything else is a fault of the program and keeps its traceback. A reader that stops
reading early (`storyshelf build 7 | head -1`) ends the command quietly (`CUT_SHORT`).
"""

from __future__ import annotations

import argparse
import importlib
import os
import select
import sys
from collections.abc import Sequence
from pathlib import Path

from ipc import logs
from supervisor.commands.options import CommandParser, add_common
from supervisor.db.connection import DatabaseProblem
from supervisor.logs import PROGRAM, complain

#: Each command: what it does, as `--help` shows it. Its module in this folder is its name with
#: `_` for `-`.
COMMANDS: dict[str, str] = {
    "run": "the capture host: claim and run jobs until SIGTERM (then drain)",
    "migrate": "create or upgrade the schema",
    "enqueue-build": "register a build of a Storybook static build or a folder of PNGs; prints its id",
    "status": "queue depth, running jobs, recent builds",
    "build": "a build's state and every snapshot's result",
    "review": "accept or reject a build's changes",
    "serve": "serve builds and reports over HTTP, with review",
    "cancel": "cancel a build's jobs",
    "project": "show or change a project's diff settings",
    "prune": "delete old jobs and builds no baseline needs, and files nothing names",
    "demo": "make demo screenshots, run two builds, print the outcome",
}


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The parser, with the options of the command `chosen` only: only its module is imported,
    so `build 7` does not load the host, the server and the demo (a third of its start-up),
    and the others' options are never read in the same call anyway."""
    parser = CommandParser(
        prog=PROGRAM if Path(sys.argv[0]).name == PROGRAM else "python -m supervisor",
        description="Storyshelf capture host: claims capture jobs and diffs screenshots in forked children.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, help_text in COMMANDS.items():
        sub = commands.add_parser(
            name,
            command=name,
            help=help_text,
            description=help_text,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name != chosen:
            continue
        module = importlib.import_module(f"supervisor.commands.{name.replace('-', '_')}")
        sub.epilog = getattr(module, "EPILOG", None)
        # The demo prints its own story; the host's log is kept to warnings unless asked.
        add_common(sub, log_level="warning" if name == "demo" else "info")
        if hasattr(module, "add_arguments"):
            module.add_arguments(sub)
        sub.set_defaults(handler=module.execute)
    return parser


#: The exit status when standard output's reader went away before it was all written: a shell's
#: for a program ended by SIGPIPE (128 + 13), as `yes | head` reports. Not 1, which Python's own
#: example uses: for `build` that says "changes await review", and a script with `pipefail`
#: would take a cut listing for a verdict.
CUT_SHORT = 141


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command `argv` (else the process's arguments) and return its exit status."""
    try:
        code = _run(argv)
        # Written here, inside the `try`, rather than by the flush at exit, where a reader gone
        # would be a message on stderr.
        sys.stdout.flush()
    except BrokenPipeError:
        if not _reader_gone():
            raise  # a pipe of the program's own (a child's socket): a fault, with its traceback
        # As Python's documentation of SIGPIPE says: standard output goes to devnull, so that
        # the flush at exit has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CUT_SHORT
    return code


def _run(argv: Sequence[str] | None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or (arguments[0].startswith("-") and arguments[0] not in ("-h", "--help")):
        arguments.insert(0, "run")
    parser = build_parser(arguments[0])
    for argument in arguments:
        if not _is_text(argument):
            # Bytes the locale could not decode (a branch named in Latin-1): stored, they
            # would fail every later read of the build.
            shown = argument.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            parser.error(f"an argument is not UTF-8 text: {shown!r}")
    args = parser.parse_args(arguments)
    logs.configure(args.log_level)
    try:
        code: int = args.handler(args)
    except DatabaseProblem as error:
        complain(args.command, str(error))
        return 1
    return code


def _reader_gone() -> bool:
    """Whether nobody reads standard output any more: the other end of its pipe is closed."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
    except (OSError, ValueError):  # not a file (a test's captured output)
        return False
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _is_text(argument: str) -> bool:
    """Whether `argument` is text: Python decodes bytes that are not UTF-8 to lone surrogates."""
    try:
        argument.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
