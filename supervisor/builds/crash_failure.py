"""The terminal path of a job that keeps killing its worker (ADR 0005 phase 3).

The child never got to record anything, so the parent does: the job fails with the crashes named
(`capture kept crashing its worker: SIGSEGV x3`) and its kind closes what the job belonged to
(for a capture: the shard, and the build if that was its last open shard).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from sqlalchemy import Connection

from supervisor.builds.kinds import Kind
from supervisor.db import queue
from supervisor.db.queue import Job

#: What `fail_crashed_capture` did.
CrashFailureOutcome = Literal[
    # The job had no shard: its build was failed.
    "failed",
    # The shard was failed; other shards are still open, and the last of them ends the build.
    "shard-failed",
    # The shard was the last one open: the build was finalized (failed, with this shard's).
    "finalized",
    # The job failed, but its build had already ended (or it has none): nothing else to close.
    "skipped",
    # The job was no longer ours (another host holds it now): nothing was recorded.
    "lost",
]


def crash_error(kind: str, causes: Sequence[str]) -> str:
    """ "capture kept crashing its worker: SIGSEGV x3" (several causes: most frequent first)."""
    counted = ", ".join(f"{cause} x{count}" for cause, count in Counter(causes).most_common())
    return f"{kind} kept crashing its worker: {counted}"


def fail_crashed_capture(
    conn: Connection, job: Job, kind: Kind, causes: Sequence[str]
) -> CrashFailureOutcome:
    """Fail `job` for its crashes and close its shard or build, under the job's fence."""
    error = crash_error(job.kind, causes)
    if not queue.fail(conn, job.lease, error, crash_causes=causes):
        return "lost"
    closed = kind.on_failed(conn, job, error)
    if closed == "skipped":
        return "skipped"
    if job.shard_id is None:
        return "failed"
    return "finalized" if closed == "finalized" else "shard-failed"
