"""The parent's side of a `notify` job: one of a project's webhooks told that a build ended.

When: once the build's report has been published, or its publish job gave up, so that the
notification can say where the report opens (`report_url`, null when it could not be
written). The publish job that a build's end queues carries `{"notify": true}`
(`supervisor.builds.ended.build_ended`), and its `record`, `on_failed` and `on_cancelled`
(`supervisor.builds.publish`) call `queue_notifications` when it does. A job ends once, under
its fence, so each build's end notifies once; a report published again (`build ID` mending
a lost one, migration 0007's publishes of older builds) has no flag and notifies nobody. A
flag on the job, rather than a look for notify jobs queued before, needs no lock between two
publishes settling at once, and still holds after `prune` has deleted old notify jobs.

How: one job per webhook, so a receiver that is down delays and retries only its own; each
gets a delivery id when queued, the same on every retry. `prepare` reads the build and the
webhook as they are when the job runs and makes the request whole (`ipc.notify`); the child
POSTs it (`child.notify.post`). The URL's user part, if any, leaves the URL for an HTTP Basic
`Authorization` header here, so no error or log line of the child can quote the password; the
project's `webhook_allow_private` goes with it, for the child to judge the addresses the
webhook's host resolves to (`ipc.webhook_target`). A notify job belongs to its build (`build_id`), so `cancel`
stops a pending one, but its failure never changes the build.

A review queues the same jobs with the event `build.reviewed` and the ids of the `reviews` rows
it wrote (`supervisor.review.decisions`): the body then lists those decisions.

Job data: `{"build_id": int, "webhook_id": int, "delivery": str}`, and for a review
`"event": "build.reviewed", "reviews": [int, ...]`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, cast

import structlog
from sqlalchemy import Connection, func, select

from ipc.failures import PermanentFailure
from ipc.notify import (
    LISTED_NAMES,
    NOTIFY_RESULT_FIELDS,
    Event,
    NotifyPayload,
    body_bytes,
    request_headers,
    without_credentials,
)
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.projects import load_settings
from supervisor.builds.reduce import ReduceOutcome
from supervisor.builds.view import load_build
from supervisor.builds.webhooks import load_webhook, masked_url
from supervisor.db import queue
from supervisor.db.queue import Job
from supervisor.db.tables import builds, reviews, snapshots, webhooks

log = structlog.get_logger(__name__)

NOTIFY_KIND = "notify"
ENDED_EVENT: Event = "build.ended"
REVIEWED_EVENT: Event = "build.reviewed"
#: How long a webhook may take to accept the connection, and then to answer.
TIMEOUT_SECONDS = 10.0
#: Tries per notification: with the default backoff (2 s doubling) a receiver down for about
#: four minutes still gets it.
MAX_ATTEMPTS = 8


class ResultError(ValueError):
    """The child's answer is not a delivered notification."""


def queue_notifications(
    conn: Connection, build_id: int, event: Event = ENDED_EVENT, review_ids: Sequence[int] = ()
) -> list[int]:
    """Queue one `notify` job per webhook of build `build_id`'s project for `event`; their ids.
    A review's (`REVIEWED_EVENT`) names the `reviews` rows it wrote."""
    hooks = conn.execute(
        select(webhooks.c.id)
        .join(builds, builds.c.project_id == webhooks.c.project_id)
        .where(builds.c.id == build_id)
        .order_by(webhooks.c.id)
    ).scalars()
    queued = [
        queue.enqueue(
            conn,
            NOTIFY_KIND,
            _job_data(build_id, hook, event, review_ids),
            build_id=build_id,
            max_attempts=MAX_ATTEMPTS,
        )
        for hook in hooks
    ]
    if queued:
        log.info("webhooks to notify", build_id=build_id, job_ids=queued)
    return queued


def _job_data(
    build_id: int, webhook_id: int, event: Event, review_ids: Sequence[int]
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "build_id": build_id,
        "webhook_id": webhook_id,
        "delivery": str(uuid.uuid4()),
    }
    if event == REVIEWED_EVENT:
        data.update(event=event, reviews=list(review_ids))
    return data


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def accepts(data: Any) -> bool:
    if not isinstance(data, Mapping):
        return False
    common = {"build_id", "webhook_id", "delivery"}
    reviewed = (
        set(data) == common | {"event", "reviews"}
        and data["event"] == REVIEWED_EVENT
        and isinstance(data["reviews"], list)
        and all(_positive_int(review_id) for review_id in data["reviews"])
    )
    return (
        (set(data) == common or reviewed)
        and _positive_int(data["build_id"])
        and _positive_int(data["webhook_id"])
        and isinstance(data["delivery"], str)
        and 0 < len(data["delivery"]) <= 64
    )


def prepare(conn: Connection, job: Job, _store: object) -> Payload:
    """The request to POST: the build's summary as it is now, signed with the webhook's secret
    if it has one, with the URL's credentials as Basic authentication. A build or webhook that
    is gone fails the job at once (no retry brings it back)."""
    build_id, webhook_id = job.data["build_id"], job.data["webhook_id"]
    hook = load_webhook(conn, webhook_id)
    if hook is None:
        raise PermanentFailure(f"webhook {webhook_id} was removed from the project")
    event: Event = job.data.get("event", ENDED_EVENT)
    told = summary(conn, build_id, job.data["delivery"], event)
    if event == REVIEWED_EVENT:
        told["decisions"], told["decisions_total"] = _decisions(conn, job.data["reviews"])
    body = body_bytes(told)
    url, authorization = without_credentials(hook.url)
    headers = request_headers(body, job.data["delivery"], hook.secret, event)
    if authorization is not None:
        headers["Authorization"] = authorization
    payload: NotifyPayload = {
        "url": url,
        "body": body,
        "headers": headers,
        "timeout_seconds": TIMEOUT_SECONDS,
        "allow_private": load_settings(conn, hook.project_id).webhook_allow_private,
    }
    return cast(Payload, payload)


def summary(
    conn: Connection, build_id: int, delivery: str, event: Event = ENDED_EVENT
) -> dict[str, Any]:
    """What a webhook is told of build `build_id`: its state, review state, counts and report,
    and the names of its changed and failed snapshots (at most `LISTED_NAMES` of each)."""
    view = load_build(conn, build_id, with_snapshots=False)
    if view is None:
        raise PermanentFailure(f"build {build_id} is gone")
    changed, changed_total = _names(conn, build_id, "changed")
    failed, failed_total = _names(conn, build_id, "failed")
    return {
        "event": event,
        "delivery": delivery,
        "build": {
            "id": view.id,
            "project": view.project,
            "branch": view.branch,
            "commit": view.commit,
            "status": view.status,
            "review": view.review,
            "source": view.source,
            "counts": dict(view.counts),
            "created_at": view.created_at.isoformat(),
            "finished_at": view.finished_at.isoformat() if view.finished_at else None,
            "error": view.error,
            "report_url": view.report_url,
        },
        # Snapshots whose shots never settled: flake, perhaps, rather than change.
        "unstable": list(view.unstable[:LISTED_NAMES]),
        "unstable_total": len(view.unstable),
        "unstable_fails": view.unstable_fails,
        "changed": changed,
        "changed_total": changed_total,
        "failed": failed,
        "failed_total": failed_total,
    }


def _decisions(conn: Connection, review_ids: Sequence[int]) -> tuple[list[dict[str, Any]], int]:
    """The first `LISTED_NAMES` of the decisions `review_ids`, by snapshot name, and how many."""
    listed = review_ids[:LISTED_NAMES]
    rows = conn.execute(
        select(
            snapshots.c.name,
            reviews.c.decision,
            reviews.c.by,
            reviews.c.comment,
            reviews.c.created_at,
        )
        .join(snapshots, snapshots.c.id == reviews.c.snapshot_id)
        .where(reviews.c.id.in_(listed))
        .order_by(snapshots.c.name)
    )
    decisions = [
        {
            "snapshot": row.name,
            "decision": row.decision,
            "by": row.by,
            "comment": row.comment,
            "at": row.created_at.isoformat(),
        }
        for row in rows
    ]
    return decisions, len(review_ids)


def _names(conn: Connection, build_id: int, status: str) -> tuple[list[str], int]:
    """The first `LISTED_NAMES` names of the build's snapshots of `status`, by name, and how
    many there are."""
    mine = (snapshots.c.build_id == build_id) & (snapshots.c.status == status)
    names = list(
        conn.execute(
            select(snapshots.c.name).where(mine).order_by(snapshots.c.name).limit(LISTED_NAMES)
        ).scalars()
    )
    if len(names) < LISTED_NAMES:
        return names, len(names)
    total = conn.execute(select(func.count()).select_from(snapshots).where(mine)).scalar_one()
    return names, int(total)


def record(conn: Connection, job: Job, result: Any) -> ReduceOutcome:
    """The webhook took it: logged with its status (the job's row says it completed)."""
    if not isinstance(result, Mapping) or set(result) != NOTIFY_RESULT_FIELDS:
        raise ResultError(f"notify job {job.id}: the result is not a delivered notification")
    hook = load_webhook(conn, job.data["webhook_id"])
    log.info(
        "webhook notified",
        job_id=job.id,
        build_id=job.data["build_id"],
        webhook_id=job.data["webhook_id"],
        url=masked_url(hook.url) if hook else None,
        delivery=job.data["delivery"],
        status=result["status"],
        seconds=result["seconds"],
    )
    return "skipped"


KIND = Kind(NOTIFY_KIND, accepts=accepts, prepare=prepare, record=record)
