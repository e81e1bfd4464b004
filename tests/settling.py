"""Running jobs in-process through the host's own `Settler`, for the tests of what happens when
a job fails: the kind's `prepare`, the child's handler in this process, its end turned into
the message a child sends (`child.worker.loop.end_of`), then the settler's real retry, backoff
and permanent failure. `tests.capture_helpers.run_jobs` settles results only; this settles
failures too.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import structlog
from sqlalchemy import Engine

from child.worker.handlers import registered_handlers
from child.worker.loop import end_of
from ipc.artifacts.location import open_store
from ipc.messages import Done, Failed
from supervisor.builds.kinds import Kind
from supervisor.builds.registry import registered_kinds
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.host.pool import Child
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from supervisor.metrics.registry import HostMetrics
from tests.hosts import PATIENCE

#: Retries come due at once, near enough: 0.05 s, doubling.
BACKOFF_SECONDS = 0.05


def host_settler(
    engine: Engine,
    database_url: str,
    artifacts: Path,
    *,
    kinds: dict[str, Kind] | None = None,
    metrics: HostMetrics | None = None,
    backoff_base_seconds: float | None = None,
) -> Settler:
    """The settler a host of these settings would have (the registered kinds unless `kinds`),
    on the artifacts at `artifacts`."""
    settings = HostSettings(database_url=database_url, artifacts=str(artifacts), host_id="h")
    if backoff_base_seconds is not None:
        settings = dataclasses.replace(settings, backoff_base_seconds=backoff_base_seconds)
    return Settler(
        engine,
        settings,
        open_store(artifacts),
        kinds if kinds is not None else registered_kinds(),
        structlog.get_logger().bind(),
        time.monotonic,
        metrics,
    )


class SettledRunner:
    """Runs due jobs one at a time in this process, each ended by the host's settler."""

    def __init__(self, engine: Engine, database_url: str, artifacts: Path, child: Child) -> None:
        self.engine = engine
        self.child = child
        self.settler = host_settler(
            engine, database_url, artifacts, backoff_base_seconds=BACKOFF_SECONDS
        )
        self.handlers = registered_handlers()

    def step(self, timeout: float = 5.0) -> int | None:
        """Run the next job due (waiting up to `timeout` for a retry to come due) and settle
        it; its id, or None when no job is open."""
        deadline = time.monotonic() + timeout
        while True:
            started = self.settler.complete_and_claim([self.child])
            if started:
                break
            with transaction(self.engine) as conn:
                if queue.open_job_count(conn) == 0 or time.monotonic() > deadline:
                    return None
            time.sleep(0.02)
        (running,) = started
        handler = self.handlers[running.job.kind]
        ending = end_of(running.job.id, lambda: handler(running.payload, lambda _detail: None))
        assert isinstance(ending, Done | Failed), ending
        self.settler.ended(running, ending)
        self.settler.complete_and_claim([])  # records a Done now, claims nothing
        return running.job.id

    def run_all(self, timeout: float = PATIENCE) -> list[int]:
        """Run jobs until none is open; the ids run, in order (a retried job once per try)."""
        deadline = time.monotonic() + timeout
        ran = []
        while (job_id := self.step()) is not None:
            ran.append(job_id)
            assert time.monotonic() < deadline, f"jobs still open after {timeout} s"
        return ran
