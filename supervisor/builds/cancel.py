"""Cancelling a build (`python -m supervisor cancel ID`).

The queue cancels a build's queued jobs at once and flags its running ones (`queue.request_cancel`);
this closes what the cancelled jobs belonged to, in the same transaction, through their kind's
`on_cancelled`, so the build is `cancelled` as soon as no shard of it is open. Shards whose jobs
are running end when their hosts see the flag and stop them.
"""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from sqlalchemy import Connection, select

from supervisor.builds.registry import registered_kinds
from supervisor.db import queue
from supervisor.db.tables import builds

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class CancelOutcome:
    """What `cancel_build` did."""

    build_id: int
    #: Queued jobs cancelled at once.
    cancelled_jobs: int
    #: Running jobs asked to stop; their hosts cancel them.
    flagged_jobs: int
    #: The build's status after the cancel.
    build_status: str

    def describe(self) -> str:
        parts = [f"build {self.build_id}: cancelled {self.cancelled_jobs} queued job(s)"]
        if self.flagged_jobs:
            parts.append(f"asked {self.flagged_jobs} running job(s) to stop")
        parts.append(f"build is {self.build_status}")
        return "; ".join(parts)


def cancel_build(conn: Connection, build_id: int) -> CancelOutcome:
    """Cancel build `build_id`'s jobs; `LookupError` if there is no such build."""
    if _status(conn, build_id) is None:
        raise LookupError(f"no build with id {build_id}")
    cancelled, flagged = queue.request_cancel(conn, build_id)
    kinds = registered_kinds()
    for job in cancelled:
        kind = kinds.get(job.kind)
        if kind is not None:
            kind.on_cancelled(conn, job)
    status = _status(conn, build_id)
    assert status is not None
    log.info("build cancel requested", build_id=build_id, cancelled=len(cancelled), flagged=flagged)
    return CancelOutcome(build_id, len(cancelled), flagged, status)


def _status(conn: Connection, build_id: int) -> str | None:
    status: str | None = conn.execute(
        select(builds.c.status).where(builds.c.id == build_id)
    ).scalar_one_or_none()
    return status
