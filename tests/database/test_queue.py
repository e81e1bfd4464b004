"""The promises of `supervisor.db.queue`, on PostgreSQL and SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import Engine, select, update

from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import jobs
from tests.hosts import make_build

LEASE = 30.0


def enqueue(engine: Engine, count: int = 1, **options: object) -> list[int]:
    with transaction(engine) as conn:
        return [queue.enqueue(conn, "noop", {"n": n}, **options) for n in range(count)]  # type: ignore[arg-type]


def claim(engine: Engine, host: str = "host-a", limit: int = 1) -> list[queue.Job]:
    with transaction(engine) as conn:
        return queue.claim(conn, host, limit, LEASE)


def row(engine: Engine, job_id: int) -> dict[str, object]:
    with engine.connect() as conn:
        return dict(conn.execute(select(jobs).where(jobs.c.id == job_id)).one()._mapping)


def expire_lease(engine: Engine, job_id: int) -> None:
    with transaction(engine) as conn:
        past = datetime.now(UTC) - timedelta(minutes=5)
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(lease_expires_at=past))


def test_claim_takes_due_jobs_in_order_and_marks_them_running(engine: Engine) -> None:
    ids = enqueue(engine, 3)
    claimed = claim(engine, limit=2)
    assert [job.id for job in claimed] == ids[:2]
    for job in claimed:
        assert (job.status, job.attempt, job.locked_by) == ("running", 1, "host-a")
        assert job.lease_expires_at is not None
        assert job.lease_expires_at > datetime.now(UTC) + timedelta(seconds=LEASE - 10)
    assert [job.id for job in claim(engine, limit=5)] == ids[2:]
    assert claim(engine, limit=5) == []


def test_claim_skips_jobs_not_yet_due(engine: Engine) -> None:
    enqueue(engine, 1, delay_seconds=60)
    assert claim(engine) == []


def test_ack_completes_and_releases_the_lease(engine: Engine) -> None:
    enqueue(engine)
    (job,) = claim(engine)
    with transaction(engine) as conn:
        assert queue.ack(conn, job.lease)
    stored = row(engine, job.id)
    assert (stored["status"], stored["locked_by"], stored["lease_expires_at"]) == (
        "completed",
        None,
        None,
    )
    assert stored["finished_at"] is not None


def test_ack_all_completes_only_the_jobs_still_ours(engine: Engine) -> None:
    enqueue(engine, 4)
    mine = claim(engine, "host-a", limit=4)
    expire_lease(engine, mine[1].id)
    (rescued,) = claim(engine, "host-b")
    with transaction(engine) as conn:
        acked = queue.ack_all(conn, [job.lease for job in mine])
    assert acked == {mine[0].id, mine[2].id, mine[3].id}
    assert [row(engine, job.id)["status"] for job in mine] == [
        "completed",
        "running",
        "completed",
        "completed",
    ]
    with transaction(engine) as conn:
        assert queue.ack_all(conn, [rescued.lease, mine[0].lease]) == {rescued.id}


def test_release_all_gives_back_only_the_jobs_still_ours_without_spending_attempts(
    engine: Engine,
) -> None:
    enqueue(engine, 3)
    mine = claim(engine, "host-a", limit=3)
    expire_lease(engine, mine[0].id)
    (rescued,) = claim(engine, "host-b")
    with transaction(engine) as conn:
        assert queue.release_all(conn, [job.lease for job in mine]) == {mine[1].id, mine[2].id}
    assert [(row(engine, job.id)["status"], row(engine, job.id)["attempt"]) for job in mine] == [
        ("running", 2),
        ("queued", 0),
        ("queued", 0),
    ]
    assert rescued.id == mine[0].id


def test_holder_of_an_older_attempt_can_neither_renew_nor_settle(engine: Engine) -> None:
    enqueue(engine)
    (first,) = claim(engine, "host-a")
    expire_lease(engine, first.id)
    (second,) = claim(engine, "host-b")
    assert second.id == first.id and second.attempt == 2
    with transaction(engine) as conn:
        assert not queue.renew(conn, first.lease, LEASE)
        assert not queue.ack(conn, first.lease)
        assert not queue.retry(conn, first.lease, "boom", 1.0)
        assert not queue.fail(conn, first.lease, "boom")
        assert not queue.cancel(conn, first.lease)
        assert not queue.release(conn, first.lease)
    assert row(engine, first.id)["locked_by"] == "host-b"
    before = row(engine, first.id)["lease_expires_at"]
    with transaction(engine) as conn:
        assert queue.renew(conn, second.lease, LEASE * 2)
    assert row(engine, first.id)["lease_expires_at"] > before


def test_expired_lease_is_rescued_by_the_claim(engine: Engine) -> None:
    enqueue(engine)
    (job,) = claim(engine, "host-a")
    assert claim(engine, "host-b") == []
    expire_lease(engine, job.id)
    (rescued,) = claim(engine, "host-b")
    assert (rescued.id, rescued.attempt, rescued.locked_by) == (job.id, 2, "host-b")


def test_a_host_never_rescues_a_job_it_holds_itself(engine: Engine) -> None:
    """A job held ahead whose lease ran out is still in the host's hands: claiming it again
    would hand it to a second child. Another host may rescue it."""
    enqueue(engine)
    [held] = claim(engine, "host-a")
    expire_lease(engine, held.id)
    assert claim(engine, "host-a") == []
    [rescued] = claim(engine, "host-b")
    assert (rescued.id, rescued.attempt) == (held.id, 2)


def test_expired_lease_on_the_final_attempt_fails_the_job(engine: Engine) -> None:
    (job_id,) = enqueue(engine, 1, max_attempts=1)
    claim(engine)
    expire_lease(engine, job_id)
    with transaction(engine) as conn:
        ended = queue.expire_leases(conn)
        assert queue.claim(conn, "host-b", 5, LEASE) == []
    assert [job.id for job in ended] == [job_id]
    stored = row(engine, job_id)
    assert (stored["status"], stored["error"]) == ("failed", queue.LEASE_EXHAUSTED_ERROR)


def test_retry_requeues_with_the_backoff_delay(engine: Engine) -> None:
    enqueue(engine)
    (job,) = claim(engine)
    before = datetime.now(UTC)
    with transaction(engine) as conn:
        assert queue.retry(conn, job.lease, "flaky", 120.0, crash_causes=["SIGSEGV"])
    stored = row(engine, job.id)
    assert stored["status"] == "queued" and stored["error"] == "flaky"
    assert (stored["crashes"], stored["crash_causes"]) == (1, ["SIGSEGV"])
    run_at = stored["run_at"]
    assert isinstance(run_at, datetime)
    assert before + timedelta(seconds=100) < run_at < before + timedelta(seconds=140)
    assert claim(engine) == []


@pytest.mark.parametrize(
    ("attempt", "expected"), [(1, 2.0), (2, 4.0), (3, 8.0), (5, 32.0), (6, 60.0), (30, 60.0)]
)
def test_backoff_doubles_from_the_base_up_to_the_cap(attempt: int, expected: float) -> None:
    assert queue.backoff_seconds(attempt, base=2.0, cap=60.0) == expected


def test_fail_ends_the_job_with_its_error(engine: Engine) -> None:
    enqueue(engine)
    (job,) = claim(engine)
    with transaction(engine) as conn:
        assert queue.fail(conn, job.lease, "malformed job")
    assert (row(engine, job.id)["status"], row(engine, job.id)["error"]) == (
        "failed",
        "malformed job",
    )


def test_release_gives_the_job_back_without_spending_an_attempt(engine: Engine) -> None:
    enqueue(engine)
    (job,) = claim(engine, "host-a")
    with transaction(engine) as conn:
        assert queue.release(conn, job.lease)
    stored = row(engine, job.id)
    assert (stored["status"], stored["attempt"], stored["locked_by"]) == ("queued", 0, None)
    (again,) = claim(engine, "host-b")
    assert again.attempt == 1


def test_cancel_of_a_queued_job_is_immediate_and_of_a_running_one_is_flagged(
    engine: Engine,
) -> None:
    build_id = make_build(engine)
    running_id, queued_id = enqueue(engine, 2, build_id=build_id)
    (running,) = claim(engine)
    with transaction(engine) as conn:
        cancelled, flagged = queue.request_cancel(conn, build_id)
    assert [job.id for job in cancelled] == [queued_id] and flagged == 1
    assert row(engine, queued_id)["status"] == "cancelled"
    with transaction(engine) as conn:
        assert queue.cancel_requested(conn, [running_id]) == {running_id}
        assert queue.cancel(conn, running.lease)
    assert row(engine, running_id)["status"] == "cancelled"


def test_an_expired_job_whose_cancel_was_asked_is_cancelled_not_rescued(engine: Engine) -> None:
    (job_id,) = enqueue(engine)
    claim(engine)
    with transaction(engine) as conn:
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(cancel_requested=True))
    expire_lease(engine, job_id)
    with transaction(engine) as conn:
        assert [job.id for job in queue.expire_leases(conn)] == [job_id]
    assert row(engine, job_id)["status"] == "cancelled"


def test_claim_records_each_job_s_child_in_id_order(engine: Engine) -> None:
    ids = enqueue(engine, 3)
    with transaction(engine) as conn:
        claimed = queue.claim(conn, "host-a", 3, LEASE, child_pids=[101, 202])
    assert [job.id for job in claimed] == ids
    assert [row(engine, job_id)["child_pid"] for job_id in ids] == [101, 202, None]


def test_the_next_due_job_is_timed_by_the_database_clock(engine: Engine) -> None:
    with transaction(engine) as conn:
        assert queue.seconds_until_next_due(conn) is None
        queue.enqueue(conn, "noop", {}, delay_seconds=30.0)
    with transaction(engine) as conn:
        waiting = queue.seconds_until_next_due(conn)
        assert queue.open_job_count(conn) == 1
    assert waiting is not None and 25.0 < waiting <= 30.0
