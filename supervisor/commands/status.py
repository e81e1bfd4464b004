"""`python -m supervisor status [--json]`: what the queue holds and who is running what.

Queue depth by kind and state, every running job with its host, child pid and lease, and the
most recent builds, a failed one with why (its `error`, cut to a line of the window; whole in
the JSON). The JSON form is for scripts and monitoring; its keys are stable.
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from supervisor.builds.view import recent_builds
from supervisor.commands.options import open_database
from supervisor.db.connection import transaction
from supervisor.db.tables import SNAPSHOT_STATES, jobs, snapshots
from supervisor.terminal import cut, output_width

RECENT_BUILDS = 10
#: Failed snapshots shown per recent build: enough to see what went wrong; `build ID` has all.
FAILED_SHOWN = 5
RUNNING_FIELDS = (
    "job_id",
    "kind",
    "build_id",
    "attempt",
    "locked_by",
    "child_pid",
    "lease_expires_at",
)


def _iso(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value


def read_status(conn: Connection) -> dict[str, Any]:
    depth: dict[str, dict[str, int]] = {}
    for kind, status, count in conn.execute(
        select(jobs.c.kind, jobs.c.status, func.count()).group_by(jobs.c.kind, jobs.c.status)
    ):
        depth.setdefault(kind, {})[status] = int(count)
    running = [
        {key: _iso(value) for key, value in zip(RUNNING_FIELDS, row, strict=True)}
        for row in conn.execute(
            select(
                jobs.c.id,
                jobs.c.kind,
                jobs.c.build_id,
                jobs.c.attempt,
                jobs.c.locked_by,
                jobs.c.child_pid,
                jobs.c.lease_expires_at,
            )
            .where(jobs.c.status == "running")
            .order_by(jobs.c.id)
        )
    ]
    recent: list[dict[str, Any]] = [
        {key: _iso(value) for key, value in row.items()}
        for row in recent_builds(conn, RECENT_BUILDS)
    ]
    for build in recent:
        build["failed_snapshots"] = _failed_snapshots(conn, build["id"])
    return {"queue": depth, "running": running, "builds": recent}


def _failed_snapshots(conn: Connection, build_id: int) -> list[dict[str, Any]]:
    """The first failed snapshots of a build: name, story title and name, and the reason."""
    rows = conn.execute(
        select(snapshots.c.name, snapshots.c.title, snapshots.c.story, snapshots.c.error)
        .where(snapshots.c.build_id == build_id, snapshots.c.status == "failed")
        .order_by(snapshots.c.name)
        .limit(FAILED_SHOWN)
    )
    return [dict(row._mapping) for row in rows]


def format_status(status: dict[str, Any], width: int) -> str:
    """`status` as text, each build's and snapshot's reason cut to a line of `width`
    (`supervisor.terminal.NO_LIMIT`: whole)."""
    lines = ["queue:"]
    for kind, states in sorted(status["queue"].items()):
        counts = ", ".join(f"{state} {count}" for state, count in sorted(states.items()))
        lines.append(f"  {kind}: {counts}")
    if not status["queue"]:
        lines.append("  (empty)")
    lines.append(f"running: {len(status['running'])}")
    for job in status["running"]:
        lines.append(
            f"  job {job['job_id']} {job['kind']} build {job['build_id']} attempt {job['attempt']}"
            f" on {job['locked_by']} pid {job['child_pid']} lease until {job['lease_expires_at']}"
        )
    lines.append("recent builds:")
    for build in status["builds"]:
        counts = ", ".join(f"{build[state]} {state}" for state in SNAPSHOT_STATES if build[state])
        lines.append(
            f"  {build['id']} {build['project']}/{build['branch']}: {build['status']}"
            + (f", review {build['review']}" if build["review"] else "")
            + f" ({build['source']}{': ' + counts if counts else ''})"
        )
        if build["error"]:
            lines.append(cut(f"    error: {build['error']}", width))
        for failed in build["failed_snapshots"]:
            story = f"{failed['title']}: {failed['story']} " if failed["title"] else ""
            lines.append(cut(f"      failed {story}[{failed['name']}]: {failed['error']}", width))
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def execute(args: argparse.Namespace) -> int:
    engine = open_database(args.database_url)
    with transaction(engine) as conn:
        status = read_status(conn)
    engine.dispose()
    print(json.dumps(status, indent=2) if args.json else format_status(status, output_width()))
    return 0
