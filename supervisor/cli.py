"""The command line of DESIGN section 6: one sub-command per verb, `run` by default.

Each option also reads a `STORYSHELF_*` environment variable (`--database-url` is
`STORYSHELF_DATABASE_URL`), so a container can be configured without arguments.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from supervisor import logs
from supervisor.config import default_artifacts, default_database_url
from supervisor.db import DatabaseUnavailable, connect
from supervisor.migrate import upgrade

#: Exit status of a command that is not built yet, and of a usage error.
EXIT_USAGE = 2

Command = Callable[[argparse.Namespace], int]


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"STORYSHELF_{name}", default)


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        default=default_database_url(),
        help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db (STORYSHELF_DATABASE_URL; "
        "default: a SQLite file under ./.storyshelf/)",
    )
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=default_artifacts(),
        help="folder of images, diffs and reports (STORYSHELF_ARTIFACTS; default ./.storyshelf/artifacts)",
    )
    parser.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "info"),
        help="debug, info, warning or error (STORYSHELF_LOG_LEVEL)",
    )


def cmd_migrate(args: argparse.Namespace) -> int:
    engine = connect(args.database_url)
    upgrade(engine)
    engine.dispose()
    print(f"schema is up to date on {engine.url.render_as_string(hide_password=True)}")
    return 0


def not_built(name: str) -> Command:
    def command(_args: argparse.Namespace) -> int:
        print(f"supervisor {name}: not built yet", file=sys.stderr)
        return EXIT_USAGE

    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m supervisor",
        description="Storyshelf capture host: claims capture jobs and diffs screenshots in forked children.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, handler: Command, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        _common(sub)
        sub.set_defaults(handler=handler)
        return sub

    add("run", not_built("run"), "the capture host: claim and run jobs until SIGTERM")
    add("migrate", cmd_migrate, "create or upgrade the schema")
    add(
        "enqueue-build",
        not_built("enqueue-build"),
        "register a build from a folder of PNGs; prints its id",
    )
    add("status", not_built("status"), "queue depth, running jobs, recent builds")
    add("build", not_built("build"), "a build's state and every snapshot's result")
    add("cancel", not_built("cancel"), "cancel a build's jobs")
    add("project", not_built("project"), "show or change a project's diff settings")
    add("demo", not_built("demo"), "make demo screenshots, run two builds, print the outcome")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments or (arguments[0].startswith("-") and arguments[0] not in ("-h", "--help")):
        arguments.insert(0, "run")
    args = parser.parse_args(arguments)
    logs.configure(args.log_level)
    try:
        code: int = args.handler(args)
    except DatabaseUnavailable as error:
        print(f"supervisor {args.command}: {error}", file=sys.stderr)
        return 1
    return code
