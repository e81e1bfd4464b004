"""What a build's end queues: the work that shows its results to people, done by jobs.

A build ends in one place (`supervisor.builds.reduce`), inside the transaction that writes its
verdict, and queues its follow-ups there: they exist exactly when the end commits, whichever
path ended it (its last shard, a crash, an expired lease, `cancel`), and none is lost to a host
that dies right after. Its `publish` job writes the report (`supervisor.builds.publish`), and,
once that job has ended whichever way, queues the project's webhooks' `notify` jobs
(`supervisor.builds.notify`): the build's end asks for that with `notify` in the publish job's
data, which no other publish (a report published again) carries.
"""

from __future__ import annotations

from sqlalchemy import Connection

from supervisor.db import queue

#: The kind of the job that publishes an ended build's report.
PUBLISH_KIND = "publish"


def build_ended(conn: Connection, build_id: int) -> None:
    """Queue what build `build_id`'s end calls for (in the transaction that ended it): its
    report, then its notifications."""
    queue_publish(conn, build_id, notify=True)


def queue_publish(conn: Connection, build_id: int, *, notify: bool = False) -> int:
    """Queue a `publish` job for build `build_id`; its id. With `notify`, the job queues the
    build's notifications when it ends: only the build's end asks for that."""
    data: dict[str, object] = {"build_id": build_id}
    if notify:
        data["notify"] = True
    return queue.enqueue(conn, PUBLISH_KIND, data, build_id=build_id)
