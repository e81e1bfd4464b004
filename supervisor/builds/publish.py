"""The parent's side of a `publish` job: a build's report, published once the build has ended.

A report is a view of results already recorded, never part of recording them: the build's end
queues its `publish` job in the transaction that ends it (`supervisor.builds.ended`), so every ended build gets one whichever path ended it (its last
shard, a crash, an expired lease, `cancel`), and a report that cannot be written costs the
publish job its retries, never the build its verdict. The child makes the folder
(`child.report.publish`); `prepare` reads what it shows, and `record` keeps where it opens.

The publish job a build's end queues also says `notify`: when it ends, published or not
(`record`, `on_failed`, `on_cancelled`), it queues the build's webhook notifications
(`supervisor.builds.notify`), which then carry the report's URL or null. A report published
again (`mend`, migration 0007) notifies nobody a second time.

Job data: `{"build_id": int}`, and `"notify": true` from the build's end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, cast

import msgpack
import structlog
from sqlalchemy import Connection, func, select, update

from ipc.artifacts.store import ArtifactStore, StoreError
from ipc.build_view import BuildView, SnapshotView, build_to_wire, snapshot_rows
from ipc.publish import (
    LISTING_BYTES,
    PUBLISH_RESULT_FIELDS,
    PublishPayload,
    latest_pointer,
    report_folder,
    report_index,
)
from supervisor.builds.ended import PUBLISH_KIND, queue_publish
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.notify import queue_notifications
from supervisor.builds.reduce import ReduceOutcome
from supervisor.builds.view import baseline_builds, load_build, report_snapshots
from supervisor.db.queue import Job
from supervisor.db.tables import builds, jobs

log = structlog.get_logger(__name__)


class ResultError(ValueError):
    """The child's answer is not a published report of this build."""


def accepts(data: Any) -> bool:
    build_id = data.get("build_id") if isinstance(data, Mapping) else None
    return (
        isinstance(data, Mapping)
        and set(data) <= {"build_id", "notify"}
        and isinstance(build_id, int)
        and not isinstance(build_id, bool)
        and build_id > 0
        and isinstance(data.get("notify", False), bool)
    )


def prepare(conn: Connection, job: Job, store: ArtifactStore) -> Payload:
    """The build, its snapshots in report order and where to write; `LookupError` for a build
    that is gone (pruned) or has not ended (the job retries, then fails saying so)."""
    build_id = job.data["build_id"]
    view = load_build(conn, build_id, with_snapshots=False)
    if view is None:
        raise LookupError(f"no build with id {build_id}")
    if not view.ended:
        raise LookupError(f"build {build_id} has not ended")
    listed, unlisted = _listing(report_snapshots(conn, build_id), LISTING_BYTES)
    if unlisted:
        log.warning("report lists part of its build", build_id=build_id, unlisted=unlisted)
    payload: PublishPayload = {
        "artifacts": store.location,
        "build": build_to_wire(view),
        "snapshots": listed,
        "unlisted": unlisted,
        "counts": dict(view.counts),
        "baseline_builds": list(baseline_builds(conn, build_id)),
        "folder": report_folder(view.project, build_id),
        "latest": latest_pointer(view.project, view.branch)
        if _newest_of_branch(conn, build_id)
        else None,
    }
    return cast(Payload, payload)


def _listing(snapshots: Iterable[SnapshotView], budget: int) -> tuple[list[list[Any]], int]:
    """The wire rows of `snapshots` (in report order) that fit in `budget` bytes, and how many
    did not: a build of any size gets a report that fits in one frame, listing first what
    needs a look."""
    rows: list[list[Any]] = []
    unlisted = 0
    for row in snapshot_rows(snapshots):
        if unlisted:
            unlisted += 1
            continue
        budget -= len(msgpack.packb(row, use_bin_type=True))
        if budget < 0:
            unlisted = 1
            continue
        rows.append(row)
    return rows, unlisted


def _newest_of_branch(conn: Connection, build_id: int) -> bool:
    """Whether no later build of the same project and branch has ended: only the newest moves
    the branch's `latest` page (the child checks again against the page itself)."""
    this = builds.alias("this")
    later = conn.execute(
        select(func.count())
        .select_from(builds)
        .join(this, this.c.id == build_id)
        .where(
            builds.c.project_id == this.c.project_id,
            builds.c.branch == this.c.branch,
            builds.c.id > build_id,
            builds.c.finished_at.is_not(None),
        )
    ).scalar_one()
    return int(later) == 0


def record(conn: Connection, job: Job, result: Any) -> ReduceOutcome:
    """Keep where the report opens, on its build."""
    build_id = job.data["build_id"]
    if (
        not isinstance(result, Mapping)
        or set(result) != PUBLISH_RESULT_FIELDS
        or not isinstance(result["url"], str)
        or not isinstance(result["index"], str)
        or not isinstance(result["unpointed"], str | None)
        or not result["index"].startswith(f"{_folder_of(conn, build_id)}/")
    ):
        raise ResultError(f"publish job {job.id}: the result is not this build's report")
    conn.execute(update(builds).where(builds.c.id == build_id).values(report_url=result["url"]))
    _notify_if_asked(conn, job)
    log.info(
        "report published",
        job_id=job.id,
        build_id=build_id,
        url=result["url"],
        copied=result["copied"],
        missing=len(result["missing"]),
    )
    if result["unpointed"] is not None:
        log.warning(
            "latest page not moved", job_id=job.id, build_id=build_id, error=result["unpointed"]
        )
    return "skipped"


def on_failed(conn: Connection, job: Job, error: str) -> ReduceOutcome:
    """No report: the build's notifications go without one (`report_url` null)."""
    _notify_if_asked(conn, job)
    return "skipped"


def on_cancelled(conn: Connection, job: Job) -> ReduceOutcome:
    """Cancelled before its report was written: notifications go without one, as on a failure."""
    _notify_if_asked(conn, job)
    return "skipped"


def _notify_if_asked(conn: Connection, job: Job) -> None:
    """Queue the build's notifications if this is the publish job its end queued: each job
    ends once, under its fence, so each build's end notifies once."""
    if accepts(job.data) and job.data.get("notify") is True:
        queue_notifications(conn, job.data["build_id"])


def _folder_of(conn: Connection, build_id: int) -> str:
    view = load_build(conn, build_id, with_snapshots=False)
    return report_folder(view.project, build_id) if view is not None else ""


#: How `publish_state` begins while the report is still to come.
PUBLISHING = "being published"


def publish_state(conn: Connection, build_id: int) -> str | None:
    """Why an ended build has no report yet, from its newest `publish` job: None when there
    is no such job."""
    row = conn.execute(
        select(jobs.c.id, jobs.c.status, jobs.c.error)
        .where(jobs.c.build_id == build_id, jobs.c.kind == PUBLISH_KIND)
        .order_by(jobs.c.id.desc())
        .limit(1)
    ).one_or_none()
    if row is None:
        return None
    if row.status in ("queued", "running"):
        return f"{PUBLISHING} (job {row.id} {row.status})"
    return f"not published: job {row.id} {row.status}" + (f": {row.error}" if row.error else "")


def mend(conn: Connection, view: BuildView, store: ArtifactStore) -> str | None:
    """Queue `view`'s report again if it ended without one that is stored (its publish job
    failed for good, or the report was removed since); why it is not there, or None when it
    is. `build ID` calls this, so looking at a build is enough to get its report back."""
    state = publish_state(conn, view.id)
    if state is not None and state.startswith(PUBLISHING):
        return state
    if view.report_url and _stored(store, report_index(view.project, view.id)):
        return None
    job_id = queue_publish(conn, view.id)
    log.info("report queued again", build_id=view.id, job_id=job_id, before=state)
    return f"{PUBLISHING} (job {job_id} queued)"


def _stored(store: ArtifactStore, key: str) -> bool:
    """Whether `key` is stored; a store that cannot say is asked for the report again."""
    try:
        return store.exists(key)
    except (OSError, StoreError):
        return False


KIND = Kind(
    PUBLISH_KIND,
    accepts=accepts,
    prepare=prepare,
    record=record,
    on_failed=on_failed,
    on_cancelled=on_cancelled,
)
