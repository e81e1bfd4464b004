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
from supervisor.builds import projects, uploads
from supervisor.builds import view as build_view
from supervisor.commands import cancel, demo, status
from supervisor.db.connection import DatabaseUnavailable, connect
from supervisor.db.migrate import upgrade
from supervisor.host.cadence import Cadence
from supervisor.host.settings import HostSettings, default_artifacts, default_database_url

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


def cmd_run(args: argparse.Namespace) -> int:
    from supervisor.host.loop import run_host
    from supervisor.host.settings import HostSettings

    defaults = HostSettings()
    settings = HostSettings(
        database_url=args.database_url,
        artifacts=args.artifacts,
        concurrency=args.concurrency,
        lease_seconds=args.lease_seconds,
        stall_seconds=args.stall_seconds,
        max_crashes=args.max_crashes,
        drain_seconds=args.drain_seconds,
        max_jobs_per_child=args.max_jobs_per_child,
        soft_rss_bytes=int(args.soft_rss_mib * 2**20),
        hard_rss_bytes=int(args.hard_rss_mib * 2**20),
        backoff_base_seconds=args.backoff_base_seconds,
        backoff_max_seconds=defaults.backoff_max_seconds,
        exit_when_idle=args.drain,
        cadence=Cadence(
            idle_seconds=args.poll_seconds,
            active_seconds=min(args.poll_seconds, defaults.cadence.active_seconds),
        )
        if args.poll_seconds is not None
        else defaults.cadence,
    )
    if args.migrate:
        upgrade(connect(settings.database_url))
    return run_host(settings)


def _run_options(parser: argparse.ArgumentParser) -> None:
    defaults = HostSettings()

    def number(name: str, kind: type, default: object, help_text: str) -> None:
        variable = name.upper().replace("-", "_")
        value = _env(variable)
        parser.add_argument(
            f"--{name}",
            type=kind,
            default=kind(value) if value else default,
            help=f"{help_text} (STORYSHELF_{variable})",
        )

    number(
        "concurrency",
        int,
        None,
        "children at once (default: sized from the CPUs and memory we may use)",
    )
    number(
        "lease-seconds",
        float,
        defaults.lease_seconds,
        "how long a claimed job is ours without renewal",
    )
    number(
        "stall-seconds",
        float,
        defaults.stall_seconds,
        "a child silent this long is hung and killed",
    )
    number("max-crashes", int, defaults.max_crashes, "crashes of one job before it is failed")
    number(
        "drain-seconds",
        float,
        defaults.drain_seconds,
        "on SIGTERM, how long running jobs may finish",
    )
    number(
        "max-jobs-per-child",
        int,
        defaults.max_jobs_per_child,
        "jobs after which a child is replaced",
    )
    number(
        "soft-rss-mib",
        float,
        defaults.soft_rss_bytes / 2**20,
        "a child above this is recycled after its job",
    )
    number("hard-rss-mib", float, defaults.hard_rss_bytes / 2**20, "a child above this is killed")
    number(
        "backoff-base-seconds",
        float,
        defaults.backoff_base_seconds,
        "first retry delay, doubled per attempt",
    )
    number(
        "poll-seconds",
        float,
        None,
        "poll interval when idle (default 15 s, 2 s while busy; NOTIFY wakes sooner)",
    )
    parser.add_argument("--drain", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--migrate", action="store_true", help="migrate the schema before starting")


def cmd_migrate(args: argparse.Namespace) -> int:
    engine = connect(args.database_url)
    upgrade(engine)
    engine.dispose()
    print(f"schema is up to date on {engine.url.render_as_string(hide_password=True)}")
    return 0


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

    _run_options(
        add("run", cmd_run, "the capture host: claim and run jobs until SIGTERM (then drain)")
    )
    add("migrate", cmd_migrate, "create or upgrade the schema")
    uploads.add_arguments(
        add(
            "enqueue-build",
            uploads.cmd_enqueue_build,
            "register a build from a folder of PNGs; prints its id",
        )
    )
    status.add_arguments(
        add("status", status.cmd_status, "queue depth, running jobs, recent builds")
    )
    build_view.add_arguments(
        add("build", build_view.cmd_build, "a build's state and every snapshot's result")
    )
    cancel.add_arguments(add("cancel", cancel.cmd_cancel, "cancel a build's jobs"))
    projects.add_arguments(
        add("project", projects.cmd_project, "show or change a project's diff settings")
    )
    # The demo prints its own story; the host's log is kept to warnings unless asked.
    add(
        "demo", demo.cmd_demo, "make demo screenshots, run two builds, print the outcome"
    ).set_defaults(log_level=_env("LOG_LEVEL", "warning"))
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
