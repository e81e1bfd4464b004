"""The statements a host sends as it works read the open jobs only, however many have finished.

`jobs` only grows: every job stays in it as completed, failed or cancelled. So each statement a
host sends per claim, per lease or per poll must reach the few open jobs through the partial
indexes or the primary key, never read the table whole, or every host slows down as its history
grows. Each statement is captured as its `supervisor.db.queue` function sends it and its plan
read with EXPLAIN, on both databases, beside thousands of finished jobs (PostgreSQL after
ANALYZE; SQLite as the host leaves it, never analysed). `test_queue_concurrency` checks, on
PostgreSQL, that the claim also walks its index in order without sorting;
`benchmarks/growth_bench.py` shows the same plans with a million finished jobs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from sqlalchemy import Connection, Engine, event, insert, select, text

from supervisor.db import queue
from supervisor.db.connection import is_postgres, transaction
from supervisor.db.queue import Lease
from supervisor.db.tables import jobs

#: Enough finished rows that reading them costs more than any index walk, on both planners.
FINISHED = 20_000
QUEUED = 300
RUNNING = 8
HOST = "plan-host"
LEASE_SECONDS = 60.0

FILL_POSTGRES = """
INSERT INTO jobs (kind, status, data, attempt, run_at, finished_at)
SELECT 'capture', (ARRAY['completed', 'failed', 'cancelled'])[1 + g % 3],
       jsonb_build_object('shard', g), 1,
       now() - make_interval(secs => g), now() - make_interval(secs => g - 1)
FROM generate_series(1, :count) AS g
"""

FILL_SQLITE = """
WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :count)
INSERT INTO jobs (kind, status, data, attempt, run_at, finished_at)
SELECT 'capture', CASE g % 3 WHEN 0 THEN 'completed' WHEN 1 THEN 'failed' ELSE 'cancelled' END,
       json_object('shard', g), 1,
       strftime('%Y-%m-%d %H:%M:%S.000000', 'now', '-' || g || ' seconds'),
       strftime('%Y-%m-%d %H:%M:%S.000000', 'now', '-' || (g - 1) || ' seconds')
FROM seq
"""

#: A plan that reads `jobs` whole: a sequential scan on PostgreSQL; on SQLite a SCAN of the
#: table or of an index other than the partial ones (which hold open jobs only), or a SEARCH
#: of the table on no index at all.
WHOLE_TABLE = re.compile(
    r"Seq Scan on jobs"
    r"|^\s*SCAN jobs(?! USING (?:COVERING )?INDEX ix_jobs_(?:queued_run_at|running_lease))"
    r"|^\s*SEARCH jobs$"
)

Send = Callable[[Connection, Sequence[Lease]], object]

#: What a working host sends, each by the call that sends it, given the leases it holds.
PERIODIC: dict[str, Send] = {
    "claim": lambda conn, _: queue.claim(conn, HOST, 2, LEASE_SECONDS, child_pids=[7, 8]),
    "ack_all": lambda conn, leases: queue.ack_all(conn, leases[:2]),
    "renew": lambda conn, leases: queue.renew(conn, leases[0], LEASE_SECONDS),
    "renew_all": lambda conn, leases: queue.renew_all(conn, leases, LEASE_SECONDS),
    "release_all": lambda conn, leases: queue.release_all(conn, leases),
    "expire_leases": lambda conn, _: queue.expire_leases(conn),
    "cancel_requested": lambda conn, leases: queue.cancel_requested(
        conn, [lease.job_id for lease in leases]
    ),
    "seconds_until_next_due": lambda conn, _: queue.seconds_until_next_due(conn),
    "open_job_count": lambda conn, _: queue.open_job_count(conn),
}


def fill(engine: Engine) -> list[Lease]:
    """`FINISHED` ended jobs, `QUEUED` due ones, and `RUNNING` claimed by `HOST`: its leases."""
    with transaction(engine) as conn:
        conn.execute(text(FILL_POSTGRES if is_postgres(conn) else FILL_SQLITE), {"count": FINISHED})
        conn.execute(insert(jobs), [{"kind": "capture", "data": {"n": n}} for n in range(QUEUED)])
        queue.claim(conn, HOST, RUNNING, LEASE_SECONDS)
    with transaction(engine) as conn:
        if is_postgres(conn):
            conn.execute(text("ANALYZE jobs"))
        rows = conn.execute(
            select(jobs.c.id, jobs.c.attempt).where(jobs.c.status == "running")
        ).all()
    assert len(rows) == RUNNING
    return [Lease(row.id, row.attempt, HOST) for row in rows]


def sent_by(engine: Engine, send: Callable[[Connection], object]) -> list[tuple[str, Any]]:
    """The statements `send` sends and their parameters, in a transaction rolled back."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if not statement.startswith(("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT")):
            sent.append((statement, parameters))

    with engine.connect() as conn, conn.begin() as trans:
        event.listen(conn, "before_cursor_execute", record)
        send(conn)
        trans.rollback()
    return sent


def plan(engine: Engine, statement: str, parameters: Any) -> list[str]:
    explain = "EXPLAIN " if is_postgres(engine) else "EXPLAIN QUERY PLAN "
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(explain + statement, parameters).all()
        conn.rollback()
    return [str(row[-1]) for row in rows]


@pytest.mark.parametrize("name", PERIODIC)
def test_a_working_hosts_statement_reads_only_open_jobs(engine: Engine, name: str) -> None:
    leases = fill(engine)
    sent = sent_by(engine, lambda conn: PERIODIC[name](conn, leases))
    assert sent, f"{name} sent nothing"
    for statement, parameters in sent:
        lines = plan(engine, statement, parameters)
        assert not any(WHOLE_TABLE.search(line) for line in lines), "\n".join([statement, *lines])


def test_the_check_reads_a_whole_table_plan(engine: Engine) -> None:
    """The pattern above knows a whole-table read when it sees one: finished jobs by kind."""
    fill(engine)
    statement = "SELECT kind, count(*) FROM jobs WHERE status = 'completed' GROUP BY kind"
    lines = plan(engine, statement, {} if is_postgres(engine) else ())
    assert any(WHOLE_TABLE.search(line) for line in lines), lines
