"""A job this host holds: claimed for a child, then running in it, until it is settled.

Only `supervisor.host.inflight` changes one once it is made; everything else reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from structlog.stdlib import BoundLogger

from supervisor.builds.kinds import Kind
from supervisor.db.queue import Job
from supervisor.host.pool import Child

#: Why the host is stopping a running job.
StopReason = Literal[
    "cancelled",  # its build was cancelled: recorded cancelled once the child stops
    "lost",  # a renewal found another host owns it now: nothing is recorded
    "released",  # given back without spending an attempt: the drain ran out, or it was sent to
    # wait in its child behind a job that turned out long
]


@dataclass(eq=False)
class Running:
    """A job claimed for `child`, and what the host knows of it (monotonic seconds)."""

    job: Job
    kind: Kind
    child: Child
    payload: Any
    log: BoundLogger
    #: When it was claimed, until it is sent to its child; then when it was sent.
    started_at: float
    #: When its child last spoke of it (the stall check reads this).
    last_progress_at: float
    #: When its lease was last written (the claim wrote the first).
    renewed_at: float
    #: The child said it starts it: a death from now on is the job's crash.
    accepted: bool = False
    #: Why the host is stopping it, when it is, and since when.
    stopping: StopReason | None = None
    stopping_since: float | None = None
    #: A renewal found the lease gone.
    lost: bool = False
