"""Real concurrency against the queue: many processes, a notification, a database that goes away."""

from __future__ import annotations

import itertools
import multiprocessing
import random
import select
import threading
import time
from collections.abc import Iterator
from multiprocessing.synchronize import Barrier

import pytest
from sqlalchemy import Engine, func, text
from sqlalchemy import select as sql_select

from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, transaction
from supervisor.db.migrate import upgrade
from supervisor.db.tables import jobs
from supervisor.host.wakeup import Listener
from tests.postgres_server import TemporaryPostgres, own_postgres_server

_start_line: Barrier | None = None


def wait_at_start_line(barrier: Barrier) -> None:
    """Pool initializer: keep the barrier that lines the claimers up."""
    global _start_line
    _start_line = barrier


def drain_queue(url: str, host: str, batch: int) -> list[int]:
    """One claiming process: claim and ack until the queue stays empty.

    Every process connects, then waits for the others, so that the first one spawned cannot
    drain the whole queue while the rest are still importing.
    """
    engine = connect(url)
    with engine.connect():
        pass
    if _start_line is not None:
        _start_line.wait()
    taken: list[int] = []
    empty_rounds = 0
    while empty_rounds < 3:
        with transaction(engine) as conn:
            claimed = queue.claim(conn, host, batch, 60.0)
        if not claimed:
            empty_rounds += 1
            time.sleep(0.05)
            continue
        empty_rounds = 0
        with transaction(engine) as conn:
            for job in claimed:
                assert queue.ack(conn, job.lease)
        taken.extend(job.id for job in claimed)
        # A host works between claims. Without a pause, one SQLite writer can take the lock
        # back before the others' busy handlers wake up, and drain the queue alone.
        time.sleep(0.002)
    engine.dispose()
    return taken


@pytest.mark.parametrize("database_url", ["postgresql", "sqlite"], indirect=True)
def test_claim_never_gives_one_job_to_two_hosts(database_url: str, engine: Engine) -> None:
    total = 2000
    processes = 8 if database_url.startswith("postgresql") else 4
    with transaction(engine) as conn:
        conn.execute(jobs.insert(), [{"kind": "noop", "data": {"n": n}} for n in range(total)])
    context = multiprocessing.get_context("spawn")
    start_line = context.Barrier(processes, timeout=60)
    with context.Pool(processes, wait_at_start_line, (start_line,)) as pool:
        results = pool.starmap(
            drain_queue, [(database_url, f"host-{n}", 8) for n in range(processes)]
        )
    taken = [job_id for result in results for job_id in result]
    assert len(taken) == len(set(taken)) == total
    assert sum(1 for result in results if result) > 1, "the work was not shared at all"
    with engine.connect() as conn:
        states = dict(
            conn.execute(sql_select(jobs.c.status, func.count()).group_by(jobs.c.status)).all()
        )
    assert states == {"completed": total}


def test_notify_wakes_a_waiting_host_at_once(postgres_url: str) -> None:
    engine = connect(postgres_url)
    listener = Listener(postgres_url, random.Random(0))
    assert listener.connect()
    fileno = listener.fileno()
    assert fileno is not None
    sent_at = time.monotonic()
    with transaction(engine) as conn:
        queue.enqueue(conn, "noop", {})
    readable, _, _ = select.select([fileno], [], [], 5.0)
    woke_after = time.monotonic() - sent_at
    assert readable and listener.drain() == ["job"]
    assert woke_after < 0.5
    listener.close()
    engine.dispose()


@pytest.fixture
def own_postgres() -> Iterator[TemporaryPostgres]:
    """A PostgreSQL server of this test's own, which it stops and starts."""
    yield from own_postgres_server()


def test_database_going_away_mid_call_is_a_clear_retryable_error(
    own_postgres: TemporaryPostgres,
) -> None:
    engine = connect(own_postgres.url)
    upgrade(engine)
    stopper = threading.Timer(0.5, own_postgres.stop_server, args=("immediate",))
    stopper.start()
    started = time.monotonic()
    with (
        pytest.raises(DatabaseUnavailable, match="database unavailable"),
        transaction(engine) as conn,
    ):
        conn.execute(text("SELECT pg_sleep(20)"))
    assert time.monotonic() - started < 10
    stopper.join()
    with pytest.raises(DatabaseUnavailable), transaction(engine) as conn:
        queue.claim(conn, "host-a", 1, 60.0)
    own_postgres.start_server()
    with transaction(engine) as conn:
        assert queue.claim(conn, "host-a", 1, 60.0) == []
    engine.dispose()


def test_listener_falls_back_when_its_connection_drops(own_postgres: TemporaryPostgres) -> None:
    listener = Listener(own_postgres.url, random.Random(0))
    assert listener.connect()
    own_postgres.restart()
    fileno = listener.fileno()
    assert fileno is not None
    select.select([fileno], [], [], 5.0)
    assert listener.drain() == []
    assert not listener.connected
    assert listener.connect()


def test_claim_walks_the_partial_index_of_queued_jobs(postgres_url: str) -> None:
    from datetime import timedelta

    from supervisor.db.queue import _claim_statement

    engine = connect(postgres_url)
    with transaction(engine) as conn:
        conn.execute(text("TRUNCATE jobs RESTART IDENTITY CASCADE"))
        conn.execute(
            jobs.insert(),
            [{"kind": "noop", "data": {}, "status": "completed"} for _ in range(20000)],
        )
        conn.execute(jobs.insert(), [{"kind": "noop", "data": {"n": n}} for n in range(5000)])
    with engine.connect() as conn:
        conn.execute(text("ANALYZE jobs"))
        compiled = _claim_statement("postgresql").compile(dialect=conn.dialect)
        params = {
            "limit": 8,
            "claimer": "h",
            "child_pids": "[]",
            "now": timedelta(0),
            "lease_until": timedelta(seconds=60),
        }
        plan = "\n".join(
            row[0]
            for row in conn.exec_driver_sql(
                f"EXPLAIN {compiled.string}", compiled.construct_params(params)
            )
        )
        conn.rollback()
    engine.dispose()
    assert "ix_jobs_queued_run_at" in plan and "ix_jobs_running_lease" in plan, plan
    lines = plan.splitlines()
    due = list(
        itertools.takewhile(
            lambda line: line.startswith("    "), lines[lines.index("  CTE due") + 1 :]
        )
    )
    assert due and not any("Sort" in line for line in due), plan
