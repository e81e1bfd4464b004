"""`python -m supervisor run` (the default command): the capture host, `supervisor.host.loop`."""

from __future__ import annotations

import argparse

from supervisor.commands.options import env
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from supervisor.host.cadence import Cadence
from supervisor.host.loop import run_host
from supervisor.host.settings import HostSettings


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor run`."""
    defaults = HostSettings()

    def number(name: str, kind: type, default: object, help_text: str) -> None:
        variable = name.upper().replace("-", "_")
        value = env(variable)
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


def execute(args: argparse.Namespace) -> int:
    """Run the capture host until it is told to stop (or, with --drain, the queue is empty)."""

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
