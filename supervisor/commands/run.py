"""`python -m supervisor run` (the default command): the capture host, `supervisor.host.loop`."""

from __future__ import annotations

import argparse
from pathlib import Path

import structlog

from supervisor.commands.options import (
    INT32_MAX,
    MAX_MIB,
    mebibytes,
    open_database,
    option,
    seconds,
    whole,
)
from supervisor.db.connection import DatabaseUnavailable
from supervisor.host.cadence import Cadence
from supervisor.host.loop import run_host
from supervisor.host.settings import HostSettings
from supervisor.logs import complain
from supervisor.metrics.registry import HostMetrics
from supervisor.metrics.server import MetricsServer, parse_address

log = structlog.get_logger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `python -m supervisor run`: their types here, their ranges and how they
    fit together in `HostSettings.problems`."""
    defaults = HostSettings()
    for flag, convert, default, help_text in (
        ("--concurrency", whole(high=INT32_MAX), None, "children at once (default: sized from the CPUs and memory we may use)"),
        ("--lease-seconds", seconds, defaults.lease_seconds, "how long a claimed job is ours without renewal"),
        ("--stall-seconds", seconds, defaults.stall_seconds, "a child silent this long is hung and killed (at most two thirds of the lease)"),
        ("--max-crashes", whole(high=INT32_MAX), defaults.max_crashes, "crashes of one job before it is failed"),
        ("--drain-seconds", seconds, defaults.drain_seconds, "on SIGTERM, how long running jobs may finish"),
        ("--max-jobs-per-child", whole(high=INT32_MAX), defaults.max_jobs_per_child, "jobs after which a child is replaced"),
        ("--soft-rss-mib", mebibytes, defaults.soft_rss_bytes / 2**20, "a child above this is recycled after its job"),
        ("--hard-rss-mib", mebibytes, defaults.hard_rss_bytes / 2**20, "a child above this is killed"),
        ("--backoff-base-seconds", seconds, defaults.backoff_base_seconds, "first retry delay, doubled per attempt"),
        ("--poll-seconds", seconds, None, "poll interval when idle (default 15 s, 2 s while busy; NOTIFY wakes sooner)"),
    ):  # fmt: skip
        option(parser, flag, convert, default, help_text)
    option(
        parser,
        "--chromium",
        str,
        None,
        "the browser for Storybook builds (default: Debian's chromium-headless-shell, else "
        "/usr/bin/chromium)",
    )
    option(
        parser,
        "--cache-dir",
        Path,
        defaults.cache_dir,
        "this host's cache of a bucket's files (default ./.storyshelf/cache)",
    )
    option(
        parser,
        "--cache-mib",
        whole(1, MAX_MIB),
        defaults.cache_mib,
        "the cache's bound; least recently used files go first",
    )
    option(
        parser,
        "--metrics-address",
        str,
        None,
        "serve /metrics (Prometheus) and /healthz on HOST:PORT, such as 127.0.0.1:9464 "
        "(port 0 picks one; off unless given)",
    )
    parser.add_argument("--drain", action="store_true", help="exit when the queue is empty")
    parser.add_argument("--migrate", action="store_true", help="migrate the schema before starting")


def execute(args: argparse.Namespace) -> int:
    """Run the capture host until it is told to stop (or, with --drain, the queue is empty);
    settings that cannot work, and a database without the schema, are refused first."""
    settings = settings_from(args)
    problems = settings.problems()
    if problems:
        complain("run", f"{'; '.join(problems)}")
        return 2
    metrics = HostMetrics()
    server = None
    if settings.metrics_address is not None:
        try:
            server = MetricsServer(parse_address(settings.metrics_address), metrics)
        except OSError as error:
            why = error.strerror or str(error)
            complain(
                "run", f"--metrics-address {settings.metrics_address}: cannot listen there: {why}"
            )
            return 2
    try:
        prepare_database(settings.database_url, migrate=args.migrate)
    except BaseException:
        if server is not None:
            server.close()
        raise
    return run_host(settings, metrics, server)


def settings_from(args: argparse.Namespace) -> HostSettings:
    defaults = HostSettings()
    return HostSettings(
        database_url=args.database_url,
        artifacts=args.artifacts.location,
        cache_dir=args.cache_dir,
        cache_mib=args.cache_mib,
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
        chromium=args.chromium,
        metrics_address=args.metrics_address,
        cadence=Cadence(
            idle_seconds=args.poll_seconds,
            active_seconds=min(args.poll_seconds, defaults.cadence.active_seconds),
        )
        if args.poll_seconds is not None
        else defaults.cadence,
    )


def prepare_database(url: str, *, migrate: bool) -> None:
    """Check the schema (migrating it with `--migrate` or on the embedded default), then let go
    of every connection: nothing of the database may cross into the fork server.

    A server that cannot be reached now is not refused, unless asked to migrate: the host waits
    for it, as it does for one that goes away later.
    """
    try:
        open_database(url, migrate=migrate).dispose()
    except DatabaseUnavailable as error:
        if migrate:
            raise
        log.warning("database unavailable; the schema is not checked", error=str(error))
