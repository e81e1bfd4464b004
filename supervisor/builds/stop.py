"""A build stopped because its stories all fail with one and the same error.

A child that sees every story it tried fail with one error, of several components and on fresh
pages (`child.storybook.breakdown`), fails the rest of its shard unrendered and names the error
in its result (`"stopped"`). Rendering the build's other shards would only say it again, each
story after a render and a fresh page's retry: minutes for a build of a hundred stories. So the
shard's results are written, and then, unless a story of the build did render (in another
child, on another host: then the error is not the whole build's, and the other shards go on),
the build ends now, in the transaction that records the shard:

* its other capture jobs are cancelled (queued ones at once; running ones are told to stop, and
  results that come anyway find their shard closed and are dropped: `capture.record`);
* every snapshot of its other open shards is written `failed` with `ipc.storybook.NOT_RENDERED`,
  so the build counts all its stories, and those shards are closed `failed`;
* the build is failed with the error said once (`ipc.storybook.stopped_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from sqlalchemy import Connection, exists, select, update

from ipc.capture import RESULT_FIELDS
from ipc.storybook import NOT_RENDERED, STORY_RESULT_FIELDS, stopped_error
from supervisor.builds.reduce import OPEN_SHARD_STATES, ReduceOutcome, reduce_build
from supervisor.builds.snapshot_rows import STORY_COLUMNS, insert_snapshots, snapshot_row
from supervisor.db import queue
from supervisor.db.tables import capture_shards, jobs, snapshots

log = structlog.get_logger(__name__)


def stop_build(conn: Connection, build_id: int, error: str) -> ReduceOutcome:
    """End build `build_id`, stopped by `error`, unless one of its stories rendered."""
    if _any_rendered(conn, build_id):
        log.info("a story of the build rendered: the others go on", build_id=build_id)
        return reduce_build(conn, build_id)
    shards = _open_shards(conn, build_id)
    queue.request_cancel(conn, build_id)
    rows = [
        snapshot_row(build_id, shard_id, shot, _not_rendered(shot))
        for shard_id, data in shards.items()
        for shot in _story_shots(data)
    ]
    insert_snapshots(conn, rows)
    if shards:
        conn.execute(
            update(capture_shards)
            .where(capture_shards.c.id.in_(shards), capture_shards.c.status.in_(OPEN_SHARD_STATES))
            .values(status="failed", error=NOT_RENDERED)
        )
    log.warning(
        "build stopped: its stories all fail with one error",
        build_id=build_id,
        not_rendered=len(rows),
        error=error,
    )
    return reduce_build(conn, build_id, failure=stopped_error(error))


def _any_rendered(conn: Connection, build_id: int) -> bool:
    rendered = exists().where(snapshots.c.build_id == build_id, snapshots.c.status != "failed")
    return bool(conn.execute(select(rendered)).scalar())


def _open_shards(conn: Connection, build_id: int) -> dict[int, Any]:
    """The build's shards still open, each with its capture job's data."""
    rows = conn.execute(
        select(jobs.c.shard_id, jobs.c.data)
        .join(capture_shards, capture_shards.c.id == jobs.c.shard_id)
        .where(
            jobs.c.build_id == build_id,
            jobs.c.kind == "capture",
            jobs.c.status.in_(("queued", "running")),
            capture_shards.c.status.in_(OPEN_SHARD_STATES),
        )
    )
    return {shard_id: data for shard_id, data in rows}


def _story_shots(data: Any) -> list[Mapping[str, Any]]:
    """The story snapshots of a capture job's data, when it is a Storybook capture's whose
    snapshots a row can be made of (a job's data is checked in full when it is claimed: a job
    queued with data not so is closed without rows, and fails its shard all the same)."""
    shots = data.get("snapshots") if isinstance(data, Mapping) and "storybook" in data else None
    if not isinstance(shots, list) or not all(_is_shot(shot) for shot in shots):
        return []
    return shots


def _is_shot(shot: Any) -> bool:
    return (
        isinstance(shot, Mapping)
        and isinstance(shot.get("name"), str)
        and all(isinstance(shot.get(key), str | None) for key in STORY_COLUMNS)
        and (shot.get("baseline") is None or isinstance(shot["baseline"], Mapping))
    )


def _not_rendered(shot: Mapping[str, Any]) -> dict[str, Any]:
    """The result a story the build stopped before would have had: failed, no image."""
    item: dict[str, Any] = dict.fromkeys((*RESULT_FIELDS, *STORY_RESULT_FIELDS))
    baseline = shot.get("baseline")
    item.update(
        name=shot["name"],
        status="failed",
        error=NOT_RENDERED,
        baseline_id=baseline.get("id") if isinstance(baseline, Mapping) else None,
        render_seconds=0.0,
    )
    return item
