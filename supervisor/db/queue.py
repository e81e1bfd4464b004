"""The database queue: every statement that moves a job between the states of DESIGN section 3.

Each verb is one function over a `Connection` the caller holds inside a transaction, so a kind's
results, its shard and build bookkeeping and the job's own transition commit together. After the
claim, every statement is fenced by `Lease` (id, attempt, locked_by, still running) and returns
whether the job was still ours: a host that lost its lease can never overwrite the new owner.

PostgreSQL claims with `FOR UPDATE SKIP LOCKED`, so hosts never wait on each other's rows;
SQLite serialises writers with `BEGIN IMMEDIATE` (see `supervisor.db.connection`). Time comes from the
database on PostgreSQL, so hosts with drifting clocks still agree on who holds a lease.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Insert,
    Integer,
    Interval,
    Row,
    Select,
    String,
    Update,
    and_,
    bindparam,
    cast,
    delete,
    func,
    insert,
    literal,
    literal_column,
    select,
    text,
    tuple_,
    type_coerce,
    union_all,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.sql.dml import ReturningDelete

from supervisor.db.connection import is_postgres
from supervisor.db.tables import JobStatus, UtcDateTime, jobs

#: The LISTEN/NOTIFY channel: a payload "job" means work was queued, "cancel" that a cancel was asked.
CHANNEL = "storyshelf"
#: Error recorded on a job whose last allowed attempt lost its lease.
LEASE_EXHAUSTED_ERROR = "lease expired on the final attempt"
#: Error recorded on a job that was cancelled.
CANCELLED_ERROR = "cancelled"
#: The states a job ends in: nothing moves it again, and only retention deletes it.
FINISHED_STATES: tuple[JobStatus, ...] = ("completed", "failed", "cancelled")


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
    crash_causes: tuple[str, ...]
    build_id: int | None
    shard_id: int | None
    locked_by: str | None
    lease_expires_at: datetime | None
    cancel_requested: bool
    error: str | None
    #: When the job was due, and when the claim took it (the database's clock on PostgreSQL):
    #: only a claim's rows carry `claimed_at`.
    run_at: datetime | None = None
    claimed_at: datetime | None = None

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
            crash_causes=tuple(m["crash_causes"] or ()),
            build_id=m["build_id"],
            shard_id=m["shard_id"],
            locked_by=m["locked_by"],
            lease_expires_at=m["lease_expires_at"],
            cancel_requested=bool(m["cancel_requested"]),
            error=m["error"],
            run_at=m["run_at"],
            claimed_at=m.get("claimed_at"),
        )

    @property
    def pickup_seconds(self) -> float | None:
        """How long the job waited after it was due before a host claimed it; None unless it
        came from a claim. A job rescued from an expired lease counts from when it was due
        before its earlier run."""
        if self.run_at is None or self.claimed_at is None:
            return None
        return (self.claimed_at - self.run_at).total_seconds()

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


def _in_state(status: JobStatus) -> ColumnElement[bool]:
    """`status = 'queued'` with the state written into the SQL rather than bound.

    The partial indexes name their state, and the planner can use one only when it sees the
    value. A bound state looks the same to a generic plan, which PostgreSQL may keep for a
    statement psycopg prepared (on its fifth run): one chosen while the table was small read
    the whole table on every claim until the next ANALYZE (`benchmarks/growth_bench.py`).
    `status` is one of the closed set `JobStatus`, so it needs no quoting beyond the quotes.
    """
    return jobs.c.status == literal_column(f"'{status}'")


def _moment(dialect: str, name: str) -> ColumnElement[datetime]:
    """A moment bound as `name`: now plus an interval on PostgreSQL (its clock), a time on SQLite."""
    if dialect == "postgresql":
        return func.now() + bindparam(name, type_=Interval())
    return bindparam(name, type_=UtcDateTime())


def _moments(conn: Connection, **offsets: float) -> dict[str, Any]:
    """Values for `_moment` parameters, each `offsets[name]` seconds from now."""
    if is_postgres(conn):
        return {name: timedelta(seconds=seconds) for name, seconds in offsets.items()}
    now = datetime.now(UTC)
    return {name: now + timedelta(seconds=seconds) for name, seconds in offsets.items()}


def _notify(conn: Connection, payload: str) -> None:
    """Wake listening hosts when this transaction commits (PostgreSQL delivers NOTIFY on commit)."""
    if is_postgres(conn):
        conn.execute(_NOTIFY, {"channel": CHANNEL, "payload": payload})


_NOTIFY = text("SELECT pg_notify(:channel, :payload)")

# Statements are built once per dialect (and so compiled once): the claim and settle paths run
# for every job, and building a statement costs more than running it.


@functools.cache
def _enqueue_statement(dialect: str) -> Insert:
    return (
        insert(jobs)
        .values(
            kind=bindparam("new_kind"),
            data=bindparam("new_data"),
            build_id=bindparam("new_build_id"),
            shard_id=bindparam("new_shard_id"),
            max_attempts=bindparam("new_max_attempts"),
            run_at=_moment(dialect, "run_at"),
        )
        .returning(jobs.c.id)
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
    params = {
        "new_kind": kind,
        "new_data": dict(data),
        "new_build_id": build_id,
        "new_shard_id": shard_id,
        "new_max_attempts": max_attempts,
        **_moments(conn, run_at=delay_seconds),
    }
    job_id: int = conn.execute(_enqueue_statement(conn.dialect.name), params).scalar_one()
    _notify(conn, "job")
    return job_id


@functools.cache
def _claim_statement(dialect: str) -> Update:
    """Running jobs whose lease expired first, then due queued jobs in `run_at` order.

    Each branch is its own locking read so that each can walk its partial index in order and
    stop at the limit (an OR of the two cannot use either index that way: it would read and
    sort every claimable row).
    """
    now = _moment(dialect, "now")
    limit = bindparam("limit", type_=Integer())
    expired = (
        select(jobs.c.id)
        .where(
            _in_state("running"),
            jobs.c.lease_expires_at < now,
            jobs.c.attempt < jobs.c.max_attempts,
            jobs.c.cancel_requested.is_(False),
            # A host never rescues a job it holds itself: it would run it twice.
            jobs.c.locked_by != bindparam("claimer"),
        )
        .order_by(jobs.c.lease_expires_at)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("expired")
        .prefix_with("MATERIALIZED")
    )
    due = (
        select(jobs.c.id)
        .where(_in_state("queued"), jobs.c.run_at <= now)
        .order_by(jobs.c.run_at, jobs.c.id)
        .limit(limit)
        .with_for_update(skip_locked=True)
        .cte("due")
        .prefix_with("MATERIALIZED")
    )
    ids = union_all(select(expired.c.id), select(due.c.id)).limit(limit).subquery("ids")
    picked = select(ids.c.id, func.row_number().over(order_by=ids.c.id).label("slot")).subquery(
        "picked"
    )
    return (
        update(jobs)
        .where(jobs.c.id == picked.c.id)
        .values(
            status="running",
            attempt=jobs.c.attempt + 1,
            locked_by=bindparam("claimer"),
            lease_expires_at=_moment(dialect, "lease_until"),
            child_pid=_child_pid_of_slot(dialect, picked.c.slot),
        )
        .returning(*jobs.c, type_coerce(now, UtcDateTime()).label("claimed_at"))
    )


def _child_pid_of_slot(dialect: str, slot: ColumnElement[int]) -> ColumnElement[int]:
    """The `slot`-th (1-based) pid of the JSON array bound as `child_pids`; NULL past its end."""
    pids = bindparam("child_pids", type_=String())
    if dialect == "postgresql":
        return cast(cast(pids, JSONB).op("->>")(cast(slot - 1, Integer())), Integer())
    return func.json_extract(pids, literal("$[") + cast(slot - 1, String()) + literal("]"))


def claim(
    conn: Connection,
    locked_by: str,
    limit: int,
    lease_seconds: float,
    child_pids: Sequence[int] = (),
) -> list[Job]:
    """Take up to `limit` due jobs, and running jobs whose lease expired, in one statement.

    The jobs come back in id order; the i-th is recorded as run by `child_pids[i]` (the host
    hands it to that child), so a running job's row names its child from the start.
    """
    if limit <= 0:
        return []
    params = {
        "limit": limit,
        "claimer": locked_by,
        "child_pids": json.dumps(list(child_pids)),
        **_moments(conn, now=0, lease_until=lease_seconds),
    }
    rows = conn.execute(_claim_statement(conn.dialect.name), params).all()
    return sorted((Job.from_row(row) for row in rows), key=lambda job: job.id)


@functools.cache
def _expire_statements(dialect: str) -> tuple[tuple[JobStatus, str, Update], ...]:
    expired = and_(_in_state("running"), jobs.c.lease_expires_at < _moment(dialect, "now"))
    endings: tuple[tuple[JobStatus, str, ColumnElement[bool]], ...] = (
        ("cancelled", CANCELLED_ERROR, jobs.c.cancel_requested.is_(True)),
        ("failed", LEASE_EXHAUSTED_ERROR, jobs.c.attempt >= jobs.c.max_attempts),
    )
    return tuple(
        (
            status,
            error,
            update(jobs)
            .where(expired, condition)
            .values(_ended(dialect, status, error))
            .returning(*jobs.c),
        )
        for status, error, condition in endings
    )


def expire_leases(conn: Connection) -> list[Job]:
    """End the running jobs whose lease ran out and that must not be rescued.

    A job on its final attempt is failed (`LEASE_EXHAUSTED_ERROR`); one whose cancel was asked is
    cancelled. Returned as they are now, so the caller can close their shards and builds.
    """
    params = _moments(conn, now=0, ended_at=0)
    return [
        Job.from_row(row)
        for _status, _error, statement in _expire_statements(conn.dialect.name)
        for row in conn.execute(statement, params)
    ]


_FENCE = and_(
    jobs.c.id == bindparam("fence_id"),
    jobs.c.attempt == bindparam("fence_attempt"),
    jobs.c.locked_by == bindparam("fence_locked_by"),
    _in_state("running"),
)


def _fence(lease: Lease) -> dict[str, Any]:
    return {
        "fence_id": lease.job_id,
        "fence_attempt": lease.attempt,
        "fence_locked_by": lease.locked_by,
    }


def _ended(dialect: str, status: JobStatus, error: str | None) -> dict[str, Any]:
    return {
        "status": status,
        "error": error,
        "finished_at": _moment(dialect, "ended_at"),
        "locked_by": None,
        "lease_expires_at": None,
        "child_pid": None,
    }


def _requeued(dialect: str) -> dict[str, Any]:
    return {
        "status": "queued",
        "run_at": _moment(dialect, "run_at"),
        "locked_by": None,
        "lease_expires_at": None,
        "child_pid": None,
    }


_CRASHES = {
    "crashes": bindparam("new_crashes"),
    "crash_causes": bindparam("new_crash_causes", type_=jobs.c.crash_causes.type),
}

#: Each fenced verb: what it sets, given the dialect.
_FENCED: dict[str, Callable[[str], dict[str, Any]]] = {
    "fail": lambda d: _ended(d, "failed", None) | {"error": bindparam("new_error")},
    "fail_crashed": lambda d: (
        _ended(d, "failed", None) | {"error": bindparam("new_error")} | _CRASHES
    ),
    "retry": lambda d: _requeued(d) | {"error": bindparam("new_error")},
    "retry_crashed": lambda d: _requeued(d) | {"error": bindparam("new_error")} | _CRASHES,
    "cancel": lambda d: _ended(d, "cancelled", CANCELLED_ERROR),
}


@functools.cache
def _fenced_statement(dialect: str, verb: str) -> Update:
    return update(jobs).where(_FENCE).values(_FENCED[verb](dialect))


def _update_fenced(conn: Connection, verb: str, lease: Lease, **params: Any) -> bool:
    statement = _fenced_statement(conn.dialect.name, verb)
    return conn.execute(statement, _fence(lease) | params).rowcount == 1


def _crashes(crash_causes: Sequence[str]) -> dict[str, Any]:
    return {"new_crashes": len(crash_causes), "new_crash_causes": list(crash_causes)}


#: Verbs that settle many jobs in one statement, a host's batches: what each sets.
_FENCED_MANY: dict[str, Callable[[str], dict[str, Any]]] = {
    "renew": lambda d: {"lease_expires_at": _moment(d, "lease_until")},
    "ack": lambda d: _ended(d, "completed", None),
    "release": lambda d: _requeued(d) | {"attempt": jobs.c.attempt - 1},
}


@functools.cache
def _fenced_many_statement(dialect: str, verb: str) -> Update:
    return (
        update(jobs)
        .where(
            tuple_(jobs.c.id, jobs.c.attempt).in_(bindparam("fences", expanding=True)),
            jobs.c.locked_by == bindparam("fence_locked_by"),
            _in_state("running"),
        )
        .values(_FENCED_MANY[verb](dialect))
        .returning(jobs.c.id)
    )


def _update_fenced_many(
    conn: Connection, verb: str, leases: Sequence[Lease], **params: Any
) -> set[int]:
    """One statement per holder (a host's leases all have one); the ids that were still ours."""
    ours: set[int] = set()
    for holder in {lease.locked_by for lease in leases}:
        fences = [(lease.job_id, lease.attempt) for lease in leases if lease.locked_by == holder]
        statement = _fenced_many_statement(conn.dialect.name, verb)
        rows = conn.execute(statement, {"fences": fences, "fence_locked_by": holder, **params})
        ours.update(rows.scalars())
    return ours


def renew(conn: Connection, lease: Lease, lease_seconds: float) -> bool:
    """Extend the lease; False when the job is no longer ours."""
    return lease.job_id in renew_all(conn, [lease], lease_seconds)


def renew_all(conn: Connection, leases: Sequence[Lease], lease_seconds: float) -> set[int]:
    """Extend these leases (jobs held ahead); the ids that were still ours."""
    return _update_fenced_many(conn, "renew", leases, **_moments(conn, lease_until=lease_seconds))


def ack(conn: Connection, lease: Lease) -> bool:
    """The job succeeded."""
    return lease.job_id in ack_all(conn, [lease])


def ack_all(conn: Connection, leases: Sequence[Lease]) -> set[int]:
    """These jobs succeeded; the ids that were still ours."""
    return _update_fenced_many(conn, "ack", leases, **_moments(conn, ended_at=0))


def fail(
    conn: Connection, lease: Lease, error: str, crash_causes: Sequence[str] | None = None
) -> bool:
    """The job failed for good (final attempt, malformed, no handler, crashed too often)."""
    moments = _moments(conn, ended_at=0)
    if crash_causes is None:
        return _update_fenced(conn, "fail", lease, new_error=error, **moments)
    return _update_fenced(
        conn, "fail_crashed", lease, new_error=error, **moments, **_crashes(crash_causes)
    )


def retry(
    conn: Connection,
    lease: Lease,
    error: str,
    delay_seconds: float,
    crash_causes: Sequence[str] | None = None,
) -> bool:
    """Put the job back to run after `delay_seconds`; `crash_causes` when a child died on it."""
    moments = _moments(conn, run_at=delay_seconds)
    if crash_causes is None:
        return _update_fenced(conn, "retry", lease, new_error=error, **moments)
    return _update_fenced(
        conn, "retry_crashed", lease, new_error=error, **moments, **_crashes(crash_causes)
    )


def release(conn: Connection, lease: Lease, delay_seconds: float = 0.0) -> bool:
    """Give the job back untouched (a draining host): queued again, due after `delay_seconds`,
    the attempt not spent."""
    return lease.job_id in release_all(conn, [lease], delay_seconds)


def release_all(conn: Connection, leases: Sequence[Lease], delay_seconds: float = 0.0) -> set[int]:
    """Give these jobs back untouched; the ids that were still ours."""
    return _update_fenced_many(conn, "release", leases, **_moments(conn, run_at=delay_seconds))


def cancel(conn: Connection, lease: Lease) -> bool:
    """A running job whose cancel was asked has stopped: record it cancelled."""
    return _update_fenced(conn, "cancel", lease, **_moments(conn, ended_at=0))


def request_cancel(conn: Connection, build_id: int) -> tuple[list[Job], int]:
    """Cancel a build's jobs: queued ones at once (returned), running ones flagged (counted).

    The hosts running the flagged ones see the flag within their cancel check (at once with NOTIFY),
    stop the child and record the job cancelled.
    """
    dialect = conn.dialect.name
    mine = and_(jobs.c.build_id == build_id, jobs.c.cancel_requested.is_(False))
    cancelled = conn.execute(
        update(jobs)
        .where(mine, _in_state("queued"))
        .values(_ended(dialect, "cancelled", CANCELLED_ERROR) | {"cancel_requested": True})
        .returning(*jobs.c),
        _moments(conn, ended_at=0),
    ).all()
    flagged = conn.execute(
        update(jobs).where(mine, _in_state("running")).values(cancel_requested=True)
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


def open_job_count(conn: Connection) -> int:
    """Jobs queued or running, on any host (`run --drain` leaves when there are none)."""
    count = conn.execute(
        select(_open_in("queued").scalar_subquery() + _open_in("running").scalar_subquery())
    ).scalar_one()
    return int(count)


#: The states a job waits or works in: the depth of the queue.
OPEN_STATES: tuple[JobStatus, ...] = ("queued", "running")


def open_jobs_by_kind(conn: Connection) -> dict[tuple[str, JobStatus], int]:
    """Jobs queued or running by (kind, state), on any host, in one statement (for the metrics
    scrape): a GROUP BY per state, each on its partial index, never over the finished jobs."""
    counts = union_all(
        *(
            select(jobs.c.kind, literal_column(f"'{state}'").label("status"), func.count())
            .where(_in_state(state))
            .group_by(jobs.c.kind)
            for state in OPEN_STATES
        )
    )
    return {(kind, status): int(count) for kind, status, count in conn.execute(counts)}


def _open_in(status: JobStatus) -> Select[int]:
    """A count of the jobs in `status`, one per partial index: `status IN (...)` matches
    neither index and read the whole table (200 ms beside a million finished jobs)."""
    return select(func.count()).select_from(jobs).where(_in_state(status))


@functools.cache
def _delete_finished_statement(dialect: str) -> ReturningDelete[int]:
    """The next `limit` finished jobs by id above `after`, read along the primary key: each
    batch starts where the last one stopped, instead of walking again over the rows (dead
    until vacuumed) that the batches before it deleted."""
    picked = (
        select(jobs.c.id)
        .where(
            jobs.c.id > bindparam("after"),
            jobs.c.status.in_(FINISHED_STATES),
            jobs.c.finished_at < bindparam("before", type_=UtcDateTime()),
        )
        .order_by(jobs.c.id)
        .limit(bindparam("limit", type_=Integer()))
    )
    if dialect == "postgresql":
        picked = picked.with_for_update(skip_locked=True)
    return delete(jobs).where(jobs.c.id.in_(picked.scalar_subquery())).returning(jobs.c.id)


def delete_finished(conn: Connection, before: datetime, after_id: int, limit: int) -> list[int]:
    """Delete up to `limit` jobs that finished before `before`, of ids above `after_id`; their ids.

    For retention (`supervisor.builds.prune`): one bounded batch per transaction, so the claim
    never waits long behind it. A queued or running job is never touched, however old.
    """
    params = {"before": before, "after": after_id, "limit": limit}
    return list(conn.execute(_delete_finished_statement(conn.dialect.name), params).scalars())


def seconds_until_next_due(conn: Connection) -> float | None:
    """Seconds until the earliest queued job is due (a retry waits for its backoff), by the
    database's clock; None when nothing is queued."""
    # PostgreSQL's clock comes in the same statement; SQLite's moments are the host's anyway.
    clock = [func.now()] if is_postgres(conn) else []
    row = conn.execute(select(func.min(jobs.c.run_at), *clock).where(_in_state("queued"))).one()
    due = row[0]
    now: datetime = row[1] if clock else datetime.now(UTC)
    if due is None:
        return None
    if isinstance(due, str):  # SQLite hands an aggregate back as its stored text
        due = datetime.fromisoformat(due)
    if due.tzinfo is None:
        due = due.replace(tzinfo=UTC)
    seconds: float = (due - now).total_seconds()
    return max(0.0, seconds)
