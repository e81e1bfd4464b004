"""The settler's promises when the database goes away in the middle of starting a job, and for
failures that no retry can mend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import Connection, Engine, text

from ipc.failures import PermanentFailure
from ipc.messages import Failed
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.reduce import ReduceOutcome
from supervisor.db.connection import DatabaseUnavailable
from supervisor.db.queue import Job
from supervisor.host.pool import Child
from tests.hosts import enqueue, job
from tests.settling import host_settler


def _drop_own_connection(conn: Connection, _job: Job, _artifacts: Path) -> Payload:
    """What a database restart does to a prepare: the server ends the connection under it."""
    conn.execute(text("SELECT pg_terminate_backend(pg_backend_pid())"))
    return {}


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)  # a server that drops us
def test_connection_lost_while_preparing_is_an_outage_and_claims_nothing(
    engine: Engine, database_url: str, tmp_path: Path, child: Child
) -> None:
    job_id = enqueue(engine, "drop")
    kinds = {"drop": Kind("drop", accepts=lambda _data: True, prepare=_drop_own_connection)}
    settler = host_settler(engine, database_url, tmp_path, kinds=kinds)
    with pytest.raises(DatabaseUnavailable):
        settler.complete_and_claim([child])
    row = job(engine, job_id)
    assert (row["status"], row["attempt"], row["error"]) == ("queued", 0, None)


def _closing(closed: list[str]) -> Callable[[Connection, Job, str], ReduceOutcome]:
    def on_failed(_conn: Connection, job: Job, error: str) -> ReduceOutcome:
        closed.append(error)
        return "skipped"

    return on_failed


def test_a_failure_no_retry_can_mend_fails_the_job_on_its_first_attempt(
    engine: Engine, database_url: str, tmp_path: Path, child: Child
) -> None:
    """`Failed(final=True)` fails the job at once and runs its kind's `on_failed`; the same
    failure without `final` is retried with backoff."""
    closed: list[str] = []
    kinds = {"w": Kind("w", accepts=lambda _data: True, on_failed=_closing(closed))}
    settler = host_settler(engine, database_url, tmp_path, kinds=kinds)
    final_id, retried_id = enqueue(engine, "w"), enqueue(engine, "w")
    for running in settler.complete_and_claim([child, child]):
        final = running.job.id == final_id
        settler.ended(running, Failed(running.job.id, "webhook answered 404 Not Found", final))
    final_row, retried_row = job(engine, final_id), job(engine, retried_id)
    assert (final_row["status"], final_row["attempt"]) == ("failed", 1)
    assert final_row["error"] == "webhook answered 404 Not Found"
    assert closed == ["webhook answered 404 Not Found"]
    assert (retried_row["status"], retried_row["attempt"]) == ("queued", 1)


def _refuse(_conn: Connection, job: Job, _store: object) -> Payload:
    if job.data.get("for_good"):
        raise PermanentFailure("webhook 3 was removed")
    raise LookupError("not yet")


def test_a_prepare_that_no_retry_can_mend_fails_the_job_at_once(
    engine: Engine, database_url: str, tmp_path: Path, child: Child
) -> None:
    kinds = {"w": Kind("w", accepts=lambda _data: True, prepare=_refuse)}  # type: ignore[arg-type]
    settler = host_settler(engine, database_url, tmp_path, kinds=kinds)
    for_good, later = enqueue(engine, "w", {"for_good": True}), enqueue(engine, "w")
    assert settler.complete_and_claim([child, child]) == []
    assert (job(engine, for_good)["status"], job(engine, for_good)["error"]) == (
        "failed",
        "cannot prepare the job: webhook 3 was removed",
    )
    assert job(engine, later)["status"] == "queued"
