"""The settler's promises when the database goes away in the middle of starting a job."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import structlog
from sqlalchemy import Connection, Engine, text

from ipc.artifacts.folder import FolderStore
from supervisor.builds.kinds import Kind, Payload
from supervisor.db.connection import DatabaseUnavailable
from supervisor.db.queue import Job
from supervisor.host.pool import Child
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from tests.hosts import enqueue, job


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
    settings = HostSettings(database_url=database_url, artifacts=str(tmp_path), host_id="h")
    store = FolderStore(tmp_path)
    settler = Settler(engine, settings, store, kinds, structlog.get_logger().bind(), time.monotonic)
    with pytest.raises(DatabaseUnavailable):
        settler.complete_and_claim([child])
    row = job(engine, job_id)
    assert (row["status"], row["attempt"], row["error"]) == ("queued", 0, None)
