"""The parent's side of a `plan` job: a Storybook build's stories become shards and capture jobs.

The child opens the build in its browser and returns a `ipc.storybook.PlanResult`: the snapshots
to take, with each story's own settings, and the stories it left out. `record` checks it and, in
the transaction that acknowledges the plan job under its fence, writes the build's shards and one
`capture` job per shard, each snapshot carrying the baseline the build froze when it was created
(`supervisor.builds.baselines.find_frozen`); from there the build runs like an upload. A plan
whose Storybook cannot be opened (its preview throws, its index is not Storybook's) fails the
build with the browser's message; a plan job that fails or is cancelled ends the build as a
capture job without a shard does (`supervisor.builds.capture.on_failed` / `on_cancelled`).

Job data: `{"build_id": int, "storybook": StorybookRef, "shards": int | None}`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import structlog
from sqlalchemy import Connection, func, insert, update

from ipc.artifacts.store import ArtifactStore
from ipc.storybook import StorySnapshot
from supervisor.builds import baselines, capture
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.reduce import ReduceOutcome, reduce_build
from supervisor.builds.uploads import split_evenly
from supervisor.db import queue
from supervisor.db.queue import Job
from supervisor.db.tables import builds, capture_attempts, capture_shards

log = structlog.get_logger(__name__)

#: Snapshots per capture job when `--shards` does not say: few, so that two children (or two
#: hosts) share even a small Storybook, the last job leaves no child idle for long (measured on
#: 300 stories, 2 children: the last of 15 jobs of 20 ran alone for 1.9 s of 33) and a crash
#: costs little to redo; a child keeps a build's page from one of its jobs to the next
#: (`child.storybook.kept`), so a job's start costs a database round trip, not a page load.
SNAPSHOTS_PER_SHARD = 10
#: Stories of a build's first capture job when `--shards` does not say: that job is done, and
#: its results are in the build, within seconds of the plan (a page load and two stories: 3.3 s
#: from the plan's claim on 44 real stories, where a first job of ten took 5.3 s), so that
#: whoever watches `build` sees the first result at once.
FIRST_SHARD_STORIES = 2


class PlanError(ValueError):
    """The child's plan does not have the shape of a `PlanResult` (the message says how)."""


def accepts(data: Any) -> bool:
    """Whether `data` is a plan job's data; never raises, whatever it is given."""
    return (
        isinstance(data, Mapping)
        and set(data) == {"build_id", "storybook", "shards"}
        and capture.is_id(data["build_id"])
        and capture.is_storybook_ref(data["storybook"])
        and (data["shards"] is None or capture.is_id(data["shards"]))
    )


def prepare(conn: Connection, job: Job, store: ArtifactStore) -> Payload:
    """Mark the build started; the child needs only where the Storybook's files are."""
    build_id = job.data["build_id"]
    conn.execute(
        update(builds)
        .where(builds.c.id == build_id, builds.c.status == "pending")
        .values(status="capturing", started_at=func.now())
    )
    conn.execute(
        update(capture_attempts)
        .where(capture_attempts.c.build_id == build_id, capture_attempts.c.status == "queued")
        .values(status="running", started_at=func.now())
    )
    log.info("plan prepared", job_id=job.id, build_id=build_id)
    return {
        "artifacts": store.location,
        "build_id": build_id,
        "storybook": job.data["storybook"],
    }


def record(conn: Connection, job: Job, result: Any) -> ReduceOutcome:
    """Write the plan's shards and capture jobs, or fail the build with the plan's error."""
    build_id = job.data["build_id"]
    shots, skipped, docs, error = _checked(job, result)
    conn.execute(
        update(builds)
        .where(builds.c.id == build_id)
        .values(plan={"skipped": skipped, "docs": docs, "snapshots": len(shots)})
    )
    if error is not None:
        outcome = reduce_build(conn, build_id, failure=f"the Storybook cannot be planned: {error}")
        log.warning("plan failed", job_id=job.id, build_id=build_id, error=error)
        return outcome
    if not shots:
        # A gate that passes with nothing captured would hide a Storybook that lost its stories
        # or a parameter that opts out too much; Chromatic refuses such a build too.
        reason = f"nothing to capture: no story left after the opt-outs ({len(skipped)} skipped)"
        return reduce_build(conn, build_id, failure=reason)
    found = baselines.find_frozen(conn, build_id, [shot["name"] for shot in shots])
    runs = shard_runs(shots, job.data["shards"])
    for index, run in enumerate(runs):
        _queue_shard(conn, job, index, run, found)
    log.info(
        "plan recorded",
        job_id=job.id,
        build_id=build_id,
        snapshots=len(shots),
        skipped=len(skipped),
        shards=len(runs),
    )
    return "open"


def shard_runs(shots: Sequence[StorySnapshot], asked: int | None) -> list[list[StorySnapshot]]:
    """The build's snapshots in capture jobs: `asked` of them, sizes even; else a first job of
    `FIRST_SHARD_STORIES`, then each job half of what is left, at most `SNAPSHOTS_PER_SHARD`,
    down to a last of two or one.

    Jobs run in the order they are queued, so the last ones shrink (of 43 stories: 10, 10, 10,
    7, 3, 2, 1): when a child takes one, what the others still have to do is about as long, and
    the children end together. With even jobs of ten, the last ran alone for half a job on
    average (sanity-ui-sb7, 2 children: 0.6 s of 6.8, one child idle)."""
    if asked:
        return split_evenly(shots, asked)
    runs = [list(shots[:FIRST_SHARD_STORIES])]
    start = FIRST_SHARD_STORIES
    while start < len(shots):
        left = len(shots) - start
        size = left if left <= 2 else min(SNAPSHOTS_PER_SHARD, math.ceil(left / 2))
        runs.append(list(shots[start : start + size]))
        start += size
    return runs


def _queue_shard(
    conn: Connection,
    job: Job,
    index: int,
    run: Sequence[StorySnapshot],
    found: Mapping[str, baselines.JobBaseline],
) -> None:
    build_id = job.data["build_id"]
    shard_id: int = conn.execute(
        insert(capture_shards)
        .values(build_id=build_id, index=index, status="queued")
        .returning(capture_shards.c.id)
    ).scalar_one()
    data = {
        "build_id": build_id,
        "shard_id": shard_id,
        "storybook": job.data["storybook"],
        "snapshots": [{**shot, "baseline": found.get(shot["name"])} for shot in run],
    }
    queue.enqueue(conn, "capture", data, build_id=build_id, shard_id=shard_id)


def _checked(
    job: Job, result: Any
) -> tuple[list[StorySnapshot], list[dict[str, Any]], int, str | None]:
    """The plan's snapshots (sorted by name), skipped stories, docs count and error, each checked."""
    if not isinstance(result, Mapping) or set(result) != {"snapshots", "skipped", "docs", "error"}:
        raise PlanError(f"plan job {job.id}: the result is not a plan")
    shots, skipped, docs, error = (
        result["snapshots"],
        result["skipped"],
        result["docs"],
        result["error"],
    )
    if not (isinstance(error, str) or error is None) or not capture.is_count(docs):
        raise PlanError(f"plan job {job.id}: malformed error or docs count")
    if not isinstance(skipped, list) or not all(_is_skipped(item) for item in skipped):
        raise PlanError(f"plan job {job.id}: malformed skipped stories")
    if not isinstance(shots, list) or not all(capture.is_story_snapshot(shot) for shot in shots):
        raise PlanError(f"plan job {job.id}: a snapshot of the plan is malformed")
    if len({shot["name"] for shot in shots}) != len(shots):
        raise PlanError(f"plan job {job.id}: two snapshots of the plan have one name")
    return sorted(shots, key=lambda shot: shot["name"]), skipped, docs, error


def _is_skipped(value: Any) -> bool:
    keys = ("story_id", "title", "story", "reason")
    return (
        isinstance(value, Mapping)
        and set(value) == set(keys)
        and all(isinstance(value[key], str) for key in keys)
    )


KIND = Kind(
    "plan",
    accepts=accepts,
    prepare=prepare,
    record=record,
    on_failed=capture.on_failed,
    on_cancelled=capture.on_cancelled,
    warms_idle_children=True,
)
