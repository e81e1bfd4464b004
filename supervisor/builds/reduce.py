"""The end of a build: when its last shard closes, its verdict, counts, attempt and baselines.

Every way a shard ends (its results recorded, its job failed or crashed, its job cancelled) calls
`reduce_build` in the same transaction, so the build ends exactly when its last open shard does,
whichever path that shard took. The HTML report is a view of what this commits, so it is not
written here: the build's end queues its `publish` job (`supervisor.builds.ended`), and a
report that cannot be written never undoes or blocks the build's end.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Literal

import structlog
from sqlalchemy import Connection, RowMapping, func, select, update

from supervisor.builds import baselines
from supervisor.builds.ended import build_ended
from supervisor.db.tables import builds, capture_attempts, capture_shards, projects, snapshots
from supervisor.review.state import review_state

log = structlog.get_logger(__name__)

#: What `reduce_build` did.
ReduceOutcome = Literal[
    # The build ended: verdict, counts, attempt (and, if it was accepted, baselines) written, and
    # its report's `publish` job queued.
    "finalized",
    # Another shard is still queued or running; the last of them ends the build.
    "open",
    # The build had already ended, or does not exist: nothing to do.
    "skipped",
]
BuildVerdict = Literal["passed", "changed", "failed", "cancelled"]

OPEN_BUILD_STATES = ("pending", "capturing")
OPEN_SHARD_STATES = ("queued", "running")
SNAPSHOT_COUNTS = ("new", "unchanged", "changed", "failed")


def reduce_build(conn: Connection, build_id: int, *, failure: str | None = None) -> ReduceOutcome:
    """End build `build_id` if none of its shards is open (or at once, failed, with `failure`).

    The build row is locked first. Two shards of one build may end at the same moment on two
    hosts; each has already closed its own shard in its transaction but cannot see the other's
    uncommitted change. With the lock, the second waits for the first to commit and then sees
    both shards closed, so exactly one of them finalizes: never both, never neither. PostgreSQL
    takes `FOR NO KEY UPDATE` rather than `FOR UPDATE` because the snapshot inserts already hold
    the build's `KEY SHARE` lock (their foreign key), which `FOR UPDATE` would wait on, each
    transaction on the other's, a deadlock. SQLite needs no lock: `BEGIN IMMEDIATE` already
    runs writers one at a time.
    """
    build = _lock(conn, build_id)
    if build is None or build["status"] not in OPEN_BUILD_STATES:
        return "skipped"
    shards = _shard_states(conn, build_id)
    if failure is None and any(shards[state] for state in OPEN_SHARD_STATES):
        return "open"
    counts = _snapshot_counts(conn, build_id)
    verdict = _verdict(shards, counts, failure, _gating_changes(conn, build))
    error = (failure or _failure_reason(conn, build_id, counts)) if verdict == "failed" else None
    _finish(conn, build, verdict, counts, error)
    _close_attempts(conn, build_id, verdict, error, _summary(verdict, counts, shards))
    log.info("build finished", build_id=build_id, status=verdict, **counts)
    return "finalized"


def _lock(conn: Connection, build_id: int) -> RowMapping | None:
    return (
        conn.execute(
            select(builds.c.id, builds.c.status, builds.c.branch, builds.c.project_id)
            .where(builds.c.id == build_id)
            .with_for_update(key_share=True)
        )
        .mappings()
        .one_or_none()
    )


def _shard_states(conn: Connection, build_id: int) -> Counter[str]:
    rows = conn.execute(
        select(capture_shards.c.status, func.count())
        .where(capture_shards.c.build_id == build_id)
        .group_by(capture_shards.c.status)
    )
    return Counter({status: count for status, count in rows})


def _snapshot_counts(conn: Connection, build_id: int) -> dict[str, int]:
    rows = conn.execute(
        select(snapshots.c.status, func.count())
        .where(snapshots.c.build_id == build_id)
        .group_by(snapshots.c.status)
    )
    found: dict[str, int] = {status: count for status, count in rows}
    return {status: int(found.get(status, 0)) for status in SNAPSHOT_COUNTS}


def _verdict(
    shards: Counter[str], counts: dict[str, int], failure: str | None, gating: int
) -> BuildVerdict:
    """DESIGN section 4: failed beats changed beats passed; a cancel asked for beats them all.
    `gating` is the number of changed snapshots that count for the gate (`_gating_changes`).

    A build with no shard at all can only end here through a cancel of its job.
    """
    if failure is None and (shards["cancelled"] or not shards):
        return "cancelled"
    if failure is not None or shards["failed"] or counts["failed"]:
        return "failed"
    return "changed" if gating else "passed"


def _gating_changes(conn: Connection, build: RowMapping) -> int:
    """The build's changed snapshots that fail the gate: all of them, unless its project lets
    changes in unstable snapshots (shots that never settled) pass."""
    unstable_fails = conn.execute(
        select(projects.c.unstable_fails).where(projects.c.id == build["project_id"])
    ).scalar_one()
    query = select(func.count()).where(
        snapshots.c.build_id == build["id"], snapshots.c.status == "changed"
    )
    if not unstable_fails:
        query = query.where(snapshots.c.settled.is_not(False))
    return int(conn.execute(query).scalar_one())


def _failure_reason(conn: Connection, build_id: int, counts: dict[str, int]) -> str:
    failed_shard = conn.execute(
        select(capture_shards.c.index, capture_shards.c.error)
        .where(capture_shards.c.build_id == build_id, capture_shards.c.status == "failed")
        .order_by(capture_shards.c.index)
        .limit(1)
    ).one_or_none()
    if failed_shard is not None:
        return f"shard {failed_shard.index} failed: {failed_shard.error or 'no reason given'}"
    plural = "s" if counts["failed"] != 1 else ""
    return f"{counts['failed']} snapshot{plural} failed"


def _finish(
    conn: Connection,
    build: RowMapping,
    verdict: BuildVerdict,
    counts: dict[str, int],
    error: str | None,
) -> None:
    """Write the verdict and review state; a baseline-branch build that ran to its end becomes
    the baseline, unless its project asks for its changes to be reviewed too."""
    project_id = build["project_id"]
    values: dict[str, Any] = {
        "status": verdict,
        "error": error,
        "finished_at": func.now(),
        **counts,
    }
    project = conn.execute(
        select(projects.c.baseline_branch, projects.c.auto_accept).where(
            projects.c.id == project_id
        )
    ).one()
    accepted = (
        verdict != "cancelled"
        and project.auto_accept
        and build["branch"] == project.baseline_branch
    )
    if accepted:
        values["accepted_at"] = func.now()
    conn.execute(update(builds).where(builds.c.id == build["id"]).values(**values))
    if accepted:
        baselines.accept(conn, project_id, build["id"])
    review = review_state(conn, build["id"])
    if review is not None:
        conn.execute(update(builds).where(builds.c.id == build["id"]).values(review=review))
    build_ended(conn, build["id"])


def _summary(verdict: BuildVerdict, counts: dict[str, int], shards: Counter[str]) -> dict[str, Any]:
    return {"status": verdict, **counts, "shards": dict(sorted(shards.items()))}


def _close_attempts(
    conn: Connection,
    build_id: int,
    verdict: BuildVerdict,
    error: str | None,
    summary: dict[str, Any],
) -> None:
    conn.execute(
        update(capture_attempts)
        .where(
            capture_attempts.c.build_id == build_id,
            capture_attempts.c.status.in_(("queued", "running")),
        )
        .values(status=verdict, error=error, summary=summary, finished_at=func.now())
    )
