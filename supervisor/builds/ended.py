"""What a build's end queues: the work that shows its results to people, done by jobs.

A build ends in one place (`supervisor.builds.reduce`), inside the transaction that writes its
verdict, and queues its follow-ups there: they exist exactly when the end commits, whichever
path ended it (its last shard, a crash, an expired lease, `cancel`), and none is lost to a host
that dies right after. Its `publish` job writes the report (`supervisor.builds.publish`).
"""

from __future__ import annotations

from sqlalchemy import Connection

from supervisor.db import queue

#: The kind of the job that publishes an ended build's report.
PUBLISH_KIND = "publish"


def build_ended(conn: Connection, build_id: int) -> None:
    """Queue what build `build_id`'s end calls for (in the transaction that ended it)."""
    queue_publish(conn, build_id)


def queue_publish(conn: Connection, build_id: int) -> int:
    """Queue a `publish` job for build `build_id`; its id."""
    return queue.enqueue(conn, PUBLISH_KIND, {"build_id": build_id}, build_id=build_id)
