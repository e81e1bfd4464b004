"""The terminal path of a job that keeps killing its worker (ADR 0005 phase 3).

The child never got to record anything, so the parent does: the job fails with the crashes named
(`capture kept crashing its worker: SIGSEGV x3`) and its kind closes what the job belonged to
(for a capture: the shard, and the build if that was its last open shard).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from sqlalchemy import Connection

from supervisor.builds.kinds import Kind
from supervisor.db import queue
from supervisor.db.queue import Job


def crash_error(kind: str, causes: Sequence[str]) -> str:
    """ "capture kept crashing its worker: SIGSEGV x3" (several causes: most frequent first)."""
    counted = ", ".join(f"{cause} x{count}" for cause, count in Counter(causes).most_common())
    return f"{kind} kept crashing its worker: {counted}"


def fail_crashed_capture(
    conn: Connection, job: Job, kind: Kind, causes: Sequence[str], artifacts: Path
) -> bool:
    """Fail `job` for its crashes and close its shard or build; False if it was no longer ours."""
    error = crash_error(job.kind, causes)
    if not queue.fail(conn, job.lease, error, crash_causes=causes):
        return False
    kind.on_failed(conn, job, error, artifacts)
    return True
