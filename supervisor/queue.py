"""The database queue: every statement that moves a job between the states of DESIGN section 3.

Each verb is one function over a `Connection` the caller holds inside a transaction, so a kind's
results, its shard and build bookkeeping and the job's own transition commit together. After the
claim, every statement is fenced by `Lease` (id, attempt, locked_by, still running) and returns
whether the job was still ours: a host that lost its lease can never overwrite the new owner.

PostgreSQL claims with `FOR UPDATE SKIP LOCKED`, so hosts never wait on each other's rows;
SQLite serialises writers with `BEGIN IMMEDIATE` (see `supervisor.db`). Time comes from the
database on PostgreSQL, so hosts with drifting clocks still agree on who holds a lease.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Connection,
    Row,
    and_,
    func,
    insert,
    literal,
    or_,
    select,
    text,
    update,
)

from supervisor.db import is_postgres
from supervisor.tables import UtcDateTime, jobs

#: The LISTEN/NOTIFY channel: a payload "job" means work was queued, "cancel" that a cancel was asked.
CHANNEL = "storyshelf"
#: Error recorded on a job whose last allowed attempt lost its lease.
LEASE_EXHAUSTED_ERROR = "lease expired on the final attempt"
#: Error recorded on a job that was cancelled.
CANCELLED_ERROR = "cancelled"

JobStatus = Literal["queued", "running", "completed", "failed", "cancelled"]


@dataclass(frozen=True)
class Lease:
    """What fences every call after the claim: the job, the attempt we claimed, and who we are."""

    job_id: int
    attempt: int
    locked_by: str


@dataclass(frozen=True)
class Job:
    """A job as claimed: its row at the moment this host took it."""

    id: int
    kind: str
    status: JobStatus
    data: Any
    attempt: int
    max_attempts: int
    crashes: int
    crash_causes: tuple[str, ...]
    build_id: int | None
    shard_id: int | None
    locked_by: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    error: str | None

    @classmethod
    def from_row(cls, row: Row[Any]) -> Job:
        m = row._mapping
        return cls(
            id=m["id"],
            kind=m["kind"],
            status=m["status"],
            data=m["data"],
            attempt=m["attempt"],
            max_attempts=m["max_attempts"],
            crashes=m["crashes"],
            crash_causes=tuple(m["crash_causes"] or ()),
            build_id=m["build_id"],
            shard_id=m["shard_id"],
            locked_by=m["locked_by"],
            lease_expires_at=m["lease_expires_at"],
            cancel_requested=bool(m["cancel_requested"]),
            error=m["error"],
        )

    @property
    def lease(self) -> Lease:
        assert self.locked_by is not None, "only a claimed job has a lease"
        return Lease(self.id, self.attempt, self.locked_by)

    @property
    def final_attempt(self) -> bool:
        return self.attempt >= self.max_attempts


def backoff_seconds(attempt: int, base: float, cap: float) -> float:
    """Delay before retrying after failed attempt number `attempt` (1-based): base * 2^(n-1), capped."""
    return float(min(cap, base * 2 ** max(attempt - 1, 0)))


def _at(conn: Connection, seconds: float = 0.0) -> ColumnElement[datetime]:
    """The time `seconds` from now, by the database's clock on PostgreSQL."""
    if is_postgres(conn):
        return func.now() + timedelta(seconds=seconds)
    return literal(datetime.now(UTC) + timedelta(seconds=seconds), UtcDateTime())


def _notify(conn: Connection, payload: str) -> None:
    """Wake listening hosts when this transaction commits (PostgreSQL delivers NOTIFY on commit)."""
    if is_postgres(conn):
        conn.execute(
            text("SELECT pg_notify(:channel, :payload)"), {"channel": CHANNEL, "payload": payload}
        )


def enqueue(
    conn: Connection,
    kind: str,
    data: Mapping[str, Any],
    *,
    build_id: int | None = None,
    shard_id: int | None = None,
    max_attempts: int = 5,
    delay_seconds: float = 0.0,
) -> int:
    """Queue a job (and NOTIFY in the same transaction); returns its id."""
    job_id: int = conn.execute(
        insert(jobs)
        .values(
            kind=kind,
            data=dict(data),
            build_id=build_id,
            shard_id=shard_id,
            max_attempts=max_attempts,
            run_at=_at(conn, delay_seconds),
        )
        .returning(jobs.c.id)
    ).scalar_one()
    _notify(conn, "job")
    return job_id


def claim(conn: Connection, locked_by: str, limit: int, lease_seconds: float) -> list[Job]:
    """Take up to `limit` due jobs, and running jobs whose lease expired, in one statement."""
    if limit <= 0:
        return []
    now = _at(conn)
    claimable = or_(
        and_(jobs.c.status == "queued", jobs.c.run_at <= now),
        and_(
            jobs.c.status == "running",
            jobs.c.lease_expires_at < now,
            jobs.c.attempt < jobs.c.max_attempts,
            jobs.c.cancel_requested.is_(False),
        ),
    )
    picked = (
        select(jobs.c.id)
        .where(claimable)
        .order_by(jobs.c.run_at, jobs.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("picked")
        .prefix_with("MATERIALIZED")
    )
    rows = conn.execute(
        update(jobs)
        .where(jobs.c.id == picked.c.id)
        .values(
            status="running",
            attempt=jobs.c.attempt + 1,
            locked_by=locked_by,
            lease_expires_at=_at(conn, lease_seconds),
            child_pid=None,
        )
        .returning(*jobs.c)
    ).all()
    return sorted((Job.from_row(row) for row in rows), key=lambda job: job.id)


def expire_leases(conn: Connection) -> list[Job]:
    """End the running jobs whose lease ran out and that must not be rescued.

    A job on its final attempt is failed (`LEASE_EXHAUSTED_ERROR`); one whose cancel was asked is
    cancelled. Returned as they are now, so the caller can close their shards and builds.
    """
    now = _at(conn)
    expired = and_(jobs.c.status == "running", jobs.c.lease_expires_at < now)
    ended: list[Job] = []
    endings: tuple[tuple[JobStatus, str, ColumnElement[bool]], ...] = (
        ("cancelled", CANCELLED_ERROR, jobs.c.cancel_requested.is_(True)),
        ("failed", LEASE_EXHAUSTED_ERROR, jobs.c.attempt >= jobs.c.max_attempts),
    )
    for status, error, condition in endings:
        rows = conn.execute(
            update(jobs)
            .where(expired, condition)
            .values(_ended(conn, status, error))
            .returning(*jobs.c)
        ).all()
        ended.extend(Job.from_row(row) for row in rows)
    return ended


def _fenced(lease: Lease) -> ColumnElement[bool]:
    return and_(
        jobs.c.id == lease.job_id,
        jobs.c.attempt == lease.attempt,
        jobs.c.locked_by == lease.locked_by,
        jobs.c.status == "running",
    )


def _ended(conn: Connection, status: JobStatus, error: str | None) -> dict[str, Any]:
    return {
        "status": status,
        "error": error,
        "finished_at": _at(conn),
        "locked_by": None,
        "lease_expires_at": None,
        "child_pid": None,
    }


def _update_fenced(conn: Connection, lease: Lease, values: Mapping[str, Any]) -> bool:
    return conn.execute(update(jobs).where(_fenced(lease)).values(**values)).rowcount == 1


def renew(
    conn: Connection, lease: Lease, lease_seconds: float, child_pid: int | None = None
) -> bool:
    """Extend the lease (and record the child running it); False when the job is no longer ours."""
    values: dict[str, Any] = {"lease_expires_at": _at(conn, lease_seconds)}
    if child_pid is not None:
        values["child_pid"] = child_pid
    return _update_fenced(conn, lease, values)


def ack(conn: Connection, lease: Lease) -> bool:
    """The job succeeded."""
    return _update_fenced(conn, lease, _ended(conn, "completed", None))


def fail(
    conn: Connection, lease: Lease, error: str, crash_causes: Sequence[str] | None = None
) -> bool:
    """The job failed for good (final attempt, malformed, no handler, crashed too often)."""
    values = _ended(conn, "failed", error)
    if crash_causes is not None:
        values |= {"crashes": len(crash_causes), "crash_causes": list(crash_causes)}
    return _update_fenced(conn, lease, values)


def retry(
    conn: Connection,
    lease: Lease,
    error: str,
    delay_seconds: float,
    crash_causes: Sequence[str] | None = None,
) -> bool:
    """Put the job back to run again after `delay_seconds`; `crash_causes` when a child died on it."""
    values = _requeued(conn, delay_seconds) | {"error": error}
    if crash_causes is not None:
        values |= {"crashes": len(crash_causes), "crash_causes": list(crash_causes)}
    return _update_fenced(conn, lease, values)


def release(conn: Connection, lease: Lease) -> bool:
    """Give the job back untouched (a draining host): queued again, the attempt not spent."""
    return _update_fenced(conn, lease, _requeued(conn, 0.0) | {"attempt": jobs.c.attempt - 1})


def _requeued(conn: Connection, delay_seconds: float) -> dict[str, Any]:
    return {
        "status": "queued",
        "run_at": _at(conn, delay_seconds),
        "locked_by": None,
        "lease_expires_at": None,
        "child_pid": None,
    }


def cancel(conn: Connection, lease: Lease) -> bool:
    """A running job whose cancel was asked has stopped: record it cancelled."""
    return _update_fenced(conn, lease, _ended(conn, "cancelled", CANCELLED_ERROR))


def request_cancel(conn: Connection, build_id: int) -> tuple[list[Job], int]:
    """Cancel a build's jobs: queued ones at once (returned), running ones flagged (counted).

    The hosts running the flagged ones see the flag within their cancel check (at once with NOTIFY),
    stop the child and record the job cancelled.
    """
    mine = and_(jobs.c.build_id == build_id, jobs.c.cancel_requested.is_(False))
    cancelled = conn.execute(
        update(jobs)
        .where(mine, jobs.c.status == "queued")
        .values(_ended(conn, "cancelled", CANCELLED_ERROR) | {"cancel_requested": True})
        .returning(*jobs.c)
    ).all()
    flagged = conn.execute(
        update(jobs).where(mine, jobs.c.status == "running").values(cancel_requested=True)
    ).rowcount
    if flagged:
        _notify(conn, "cancel")
    return [Job.from_row(row) for row in cancelled], flagged


def cancel_requested(conn: Connection, job_ids: Iterable[int]) -> set[int]:
    """Which of these jobs have a cancel waiting."""
    ids = list(job_ids)
    if not ids:
        return set()
    rows = conn.execute(
        select(jobs.c.id).where(jobs.c.id.in_(ids), jobs.c.cancel_requested.is_(True))
    )
    return {row.id for row in rows}
