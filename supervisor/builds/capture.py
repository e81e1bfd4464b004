"""The parent's side of a `capture` job: one shard of a build's snapshots.

The child diffs; this module does what needs the database. Each snapshot's baseline was fixed
when the build was created (`supervisor.builds.baselines`) and rides in the job's data, so
`prepare` only marks the shard and build started and adds the project's diff options. `record`
writes the child's results and closes the shard in the transaction that acknowledges the job,
and the build ends with its last shard (`supervisor.builds.reduce`).

Job data: `{"build_id": int, "shard_id": int, "snapshots": [{"name", "image", "sha256",
"baseline"}]}`, `baseline` being None or `{"id", "image", "sha256"}` of the baseline snapshot.
A Storybook build's capture jobs (queued by its plan, `supervisor.builds.plan`) also carry
`"storybook": StorybookRef`, and each snapshot is an `ipc.storybook.StorySnapshot` plus its
`baseline`: the child renders it, and its result says where the capture was stored.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import structlog
from sqlalchemy import Connection, func, select, update

from ipc.artifacts.keys import image_key
from ipc.artifacts.store import ArtifactStore
from ipc.capture import RESULT_FIELDS
from ipc.storybook import (
    CROPS,
    FORCED_COLORS,
    MAX_DELAY_MS,
    MAX_IGNORE_BOXES,
    MAX_IGNORE_SELECTORS,
    MAX_MODE_GLOBALS,
    MAX_PROBLEM_LENGTH,
    MAX_SELECTOR_LENGTH,
    MAX_STOPPED_LENGTH,
    MEDIA_TYPES,
    REDUCED_MOTIONS,
    STORY_RESULT_FIELDS,
    STORYBOOKS_PREFIX,
    Media,
    StorySnapshot,
)
from supervisor.builds.kinds import Kind, Payload
from supervisor.builds.projects import load_settings
from supervisor.builds.reduce import OPEN_SHARD_STATES, ReduceOutcome, reduce_build
from supervisor.builds.snapshot_rows import insert_snapshots, snapshot_row
from supervisor.builds.stop import stop_build
from supervisor.builds.uploads import snapshot_name_problem
from supervisor.db.queue import Job
from supervisor.db.tables import (
    SNAPSHOT_STATES,
    builds,
    capture_attempts,
    capture_shards,
)

log = structlog.get_logger(__name__)

SHA256 = re.compile(r"[0-9a-f]{64}")
#: A story's render time past this is no render time (the cap, its delay and the watchdog's
#: last resort come to under a minute).
MAX_RENDER_SECONDS = 3600.0
#: The largest viewport side a story snapshot may ask for, in CSS pixels.
MAX_VIEWPORT_SIDE = 8192


class ResultError(ValueError):
    """The child's result does not match the job it ran (the message says how)."""


def is_id(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _is_relative_path(value: Any) -> bool:
    return isinstance(value, str) and bool(value) and not value.startswith(("/", "\\"))


#: The keys of an uploaded snapshot in a capture job's data, and of its baseline.
UPLOADED_KEYS = frozenset(("name", "image", "sha256", "baseline"))
BASELINE_KEYS = frozenset(("id", "image", "sha256"))


def _is_image(value: Any, keys: frozenset[str]) -> bool:
    return (
        isinstance(value, Mapping)
        and value.keys() == keys
        and _is_relative_path(value["image"])
        and isinstance(value["sha256"], str)
        and SHA256.fullmatch(value["sha256"]) is not None
    )


def _is_baseline(value: Any) -> bool:
    """A baseline as `baselines.find` gives it: with its capture's ignore boxes (None for an
    upload's), or without them, as jobs queued before they were kept carry it."""
    if value is None:
        return True
    if not isinstance(value, Mapping):
        return False
    boxes = value.get("ignore_boxes")
    keys = BASELINE_KEYS | {"ignore_boxes"} if "ignore_boxes" in value else BASELINE_KEYS
    return (
        _is_image(value, keys)
        and is_id(value["id"])
        and (boxes is None or (isinstance(boxes, list) and all(map(_is_box, boxes))))
    )


def _is_uploaded_snapshot(value: Any) -> bool:
    return (
        _is_image(value, UPLOADED_KEYS)
        and isinstance(value["name"], str)
        and bool(value["name"])
        and _is_baseline(value["baseline"])
    )


def _is_story_snapshot_with_baseline(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and "baseline" in value
        and _is_baseline(value["baseline"])
        and is_story_snapshot({key: item for key, item in value.items() if key != "baseline"})
    )


def is_storybook_ref(value: Any) -> bool:
    """Whether `value` is a `StorybookRef` whose manifest lies under `storybooks/`."""
    return (
        isinstance(value, Mapping)
        and set(value) == {"manifest", "sha256"}
        and isinstance(value["manifest"], str)
        and value["manifest"].startswith(f"{STORYBOOKS_PREFIX}/")
        and ".." not in value["manifest"].split("/")
        and isinstance(value["sha256"], str)
        and SHA256.fullmatch(value["sha256"]) is not None
    )


#: The keys of a `StorySnapshot`, as the plan returns it and capture jobs carry it.
STORY_SNAPSHOT_KEYS = frozenset(StorySnapshot.__annotations__)


def is_story_snapshot(value: Any) -> bool:
    """Whether `value` is a well-formed `StorySnapshot` (without its baseline)."""
    if not isinstance(value, Mapping) or set(value) != STORY_SNAPSHOT_KEYS:
        return False
    viewport = value["viewport"]
    texts_ok = all(isinstance(value[key], str) for key in ("name", "story_id", "title", "story"))
    return (
        texts_ok
        and snapshot_name_problem(value["name"]) is None
        and bool(value["story_id"])
        and (value["mode"] is None or isinstance(value["mode"], str))
        and isinstance(viewport, Mapping)
        and set(viewport) == {"width", "height"}
        and all(
            is_id(viewport[side]) and viewport[side] <= MAX_VIEWPORT_SIDE
            for side in ("width", "height")
        )
        and is_count(value["delay_ms"])
        and value["delay_ms"] <= MAX_DELAY_MS
        and isinstance(value["pause_animation_at_end"], bool)
        and value["crop"] in CROPS
        and (
            value["threshold"] is None
            or (
                isinstance(value["threshold"], int | float)
                and not isinstance(value["threshold"], bool)
                and 0 <= value["threshold"] <= 1
            )
        )
        and (value["count_aa"] is None or isinstance(value["count_aa"], bool))
        and _are_selectors(value["ignore"])
        and _is_media(value["media"])
        and isinstance(value["globals"], Mapping)
        and len(value["globals"]) <= MAX_MODE_GLOBALS
        and all(isinstance(key, str) for key in value["globals"])
        and (
            value["problem"] is None
            or (isinstance(value["problem"], str) and len(value["problem"]) <= MAX_PROBLEM_LENGTH)
        )
    )


def _are_selectors(value: Any) -> bool:
    return (
        isinstance(value, list)
        and len(value) <= MAX_IGNORE_SELECTORS
        and all(isinstance(item, str) and 0 < len(item) <= MAX_SELECTOR_LENGTH for item in value)
    )


MEDIA_KEYS = frozenset(Media.__annotations__)


def _is_media(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and set(value) == MEDIA_KEYS
        and value["reduced_motion"] in REDUCED_MOTIONS
        and value["forced_colors"] in FORCED_COLORS
        and value["media"] in MEDIA_TYPES
    )


def accepts(data: Any) -> bool:
    """Whether `data` is a capture job's data, of an upload or a Storybook; never raises."""
    if not isinstance(data, Mapping):
        return False
    if set(data) == {"build_id", "shard_id", "snapshots"}:
        is_snapshot = _is_uploaded_snapshot
    elif set(data) == {"build_id", "shard_id", "storybook", "snapshots"}:
        if not is_storybook_ref(data["storybook"]):
            return False
        is_snapshot = _is_story_snapshot_with_baseline
    else:
        return False
    shots = data["snapshots"]
    if not (is_id(data["build_id"]) and is_id(data["shard_id"])):
        return False
    if not isinstance(shots, list) or not shots or not all(is_snapshot(s) for s in shots):
        return False
    return len({shot["name"] for shot in shots}) == len(shots)


def prepare(conn: Connection, job: Job, store: ArtifactStore) -> Payload:
    """Mark the shard and build started and build the child's payload (baselines as queued)."""
    build_id, shard_id = job.data["build_id"], job.data["shard_id"]
    build = conn.execute(
        select(builds.c.project_id, builds.c.status).where(builds.c.id == build_id)
    ).one_or_none()
    if build is None:
        raise LookupError(f"capture job {job.id}: no build with id {build_id}")
    settings = load_settings(conn, build.project_id)
    _mark_started(conn, build_id, shard_id, first=build.status == "pending")
    shots = job.data["snapshots"]
    baselines = sum(1 for shot in shots if shot["baseline"] is not None)
    log.info("capture prepared", job_id=job.id, build_id=build_id, baselines=baselines)
    storybook = {"storybook": job.data["storybook"]} if "storybook" in job.data else {}
    return {
        **storybook,
        "artifacts": store.location,
        "build_id": build_id,
        "shard_id": shard_id,
        "diff_dir": f"diffs/{build_id}",
        "options": {
            "metric": settings.metric,
            "threshold": settings.threshold,
            "flat_threshold": settings.flat_threshold,
            "count_aa": settings.count_aa,
            "budget_pixels": settings.budget_pixels,
        },
        "snapshots": shots,
    }


def _mark_started(conn: Connection, build_id: int, shard_id: int, *, first: bool) -> None:
    """The shard running; with the `first` shard, the build and its attempt too.

    A build leaves `pending` and its attempt `queued` together (here, or in its plan), so a
    build seen past `pending` has nothing more to mark: its later shards save the two
    statements, which a host settling thousands of snapshots a second pays per shard. A build
    seen `pending` that another shard starts meanwhile matches neither update then.
    """
    conn.execute(
        update(capture_shards)
        .where(capture_shards.c.id == shard_id, capture_shards.c.status == "queued")
        .values(status="running")
    )
    if not first:
        return
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


def record(conn: Connection, job: Job, result: Any) -> ReduceOutcome:
    """Write the shard's snapshots, close the shard and, if it was the last, the build; or,
    when the shard says the build's stories all fail with one error, stop the build.

    The caller runs this in the transaction that acknowledged the job under its fence, so a
    host that lost the job never gets here, and the results are written exactly once. The rows
    go in one bulk statement (`supervisor.builds.snapshot_rows`). A shard closed already (its
    build stopped while it ran: `supervisor.builds.stop`) keeps the rows the stop wrote.
    """
    build_id, shard_id = job.data["build_id"], job.data["shard_id"]
    results = _checked_results(job, result)
    stopped = _stopped(job, result)
    closed = conn.execute(
        update(capture_shards)
        .where(capture_shards.c.id == shard_id, capture_shards.c.status.in_(OPEN_SHARD_STATES))
        .values(status="completed", error=None)
    ).rowcount
    if not closed:
        log.info("results of a closed shard dropped", job_id=job.id, build_id=build_id)
        return "skipped"
    images = {shot["name"]: shot for shot in job.data["snapshots"]}
    insert_snapshots(
        conn, [snapshot_row(build_id, shard_id, images[item["name"]], item) for item in results]
    )
    if stopped is not None:
        outcome = stop_build(conn, build_id, stopped)
    else:
        outcome = reduce_build(conn, build_id)
    log.info("capture recorded", job_id=job.id, build_id=build_id, build=outcome)
    return outcome


def _stopped(job: Job, result: Mapping[str, Any]) -> str | None:
    """The one error the shard says the build's stories all fail with, if it says so."""
    stopped = result.get("stopped")
    if stopped is None:
        return None
    if "storybook" not in job.data or not isinstance(stopped, str):
        raise ResultError(f"capture job {job.id}: malformed stop")
    if not 0 < len(stopped) <= MAX_STOPPED_LENGTH:
        raise ResultError(f"capture job {job.id}: malformed stop")
    return stopped


#: The keys of an uploaded image's result, and of a story's.
IMAGE_RESULT_KEYS = frozenset(RESULT_FIELDS)
STORY_RESULT_KEYS = frozenset((*RESULT_FIELDS, *STORY_RESULT_FIELDS))


def _checked_results(job: Job, result: Any) -> list[Mapping[str, Any]]:
    """The child's snapshot results, one per snapshot of the job, each well-formed.

    Every result is checked, whatever their number: one loop over them, each test written out
    rather than built from generators, since a byte-identical snapshot's whole cost is a few of
    these microseconds.
    """
    items = result.get("snapshots") if isinstance(result, Mapping) else None
    if not isinstance(items, list):
        raise ResultError(f"capture job {job.id}: the result has no snapshot list")
    story = "storybook" in job.data
    keys = STORY_RESULT_KEYS if story else IMAGE_RESULT_KEYS
    names = set()
    for item in items:
        if not isinstance(item, Mapping) or item.keys() != keys:
            raise ResultError(f"capture job {job.id}: a snapshot result lacks or adds fields")
        name = item["name"]
        if isinstance(name, str):
            names.add(name)
    expected = {shot["name"] for shot in job.data["snapshots"]}
    if len(items) != len(expected) or names != expected:
        raise ResultError(f"capture job {job.id}: the results do not match the job's snapshots")
    for item in items:
        if not _well_formed(item):
            raise ResultError(f"capture job {job.id}: malformed result for {item['name']!r}")
        if story:
            _check_capture(job, item)
    return items


def _check_capture(job: Job, item: Mapping[str, Any]) -> None:
    """A story's result names the image the child stored: `images/ab/<sha256>.png`, or none
    when the story failed before giving one."""
    image, digest, settled = item["image"], item["sha256"], item["settled"]
    seconds, boxes = item["render_seconds"], item["ignore_boxes"]
    if type(seconds) not in (int, float) or not 0 <= seconds < MAX_RENDER_SECONDS:
        raise ResultError(f"capture job {job.id}: malformed render time for {item['name']!r}")
    if image is None and digest is None and item["status"] == "failed" and boxes is None:
        return
    if not (
        isinstance(boxes, list) and len(boxes) <= MAX_IGNORE_BOXES and all(map(_is_box, boxes))
    ):
        raise ResultError(f"capture job {job.id}: malformed ignore boxes for {item['name']!r}")
    stored_as = image_key(digest) if isinstance(digest, str) else None
    if not (
        isinstance(digest, str)
        and SHA256.fullmatch(digest)
        and image == stored_as
        and isinstance(settled, bool)
    ):
        raise ResultError(f"capture job {job.id}: malformed capture for {item['name']!r}")


def _well_formed(item: Mapping[str, Any]) -> bool:
    """Each field of a result of the type and range its column takes."""
    if item["status"] not in SNAPSHOT_STATES:
        return False
    for key in COUNT_FIELDS:
        value = item[key]
        if value is not None and not is_count(value):
            return False
    for key in NUMBER_FIELDS:
        value = item[key]
        if value is not None and (type(value) is bool or not isinstance(value, int | float)):
            return False
    for key in TEXT_FIELDS:
        value = item[key]
        if value is not None and not isinstance(value, str):
            return False
    count_aa, box = item["count_aa"], item["diff_box"]
    return (count_aa is None or isinstance(count_aa, bool)) and (box is None or _is_box(box))


#: A result's fields by what they hold: counts, numbers (the settings' among them), texts.
COUNT_FIELDS = ("width", "height", "diff_pixels", "baseline_id")
NUMBER_FIELDS = ("diff_ratio", "threshold", "flat_threshold")
TEXT_FIELDS = ("diff_path", "metric", "error")


def _is_box(value: Any) -> bool:
    """`[left, top, width, height]` of a non-empty box."""
    return (
        isinstance(value, list)
        and len(value) == 4
        and all(is_count(number) for number in value)
        and value[2] > 0
        and value[3] > 0
    )


def is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def on_failed(conn: Connection, job: Job, error: str) -> ReduceOutcome:
    """The job failed for good: fail its shard and end the build if that was its last shard.

    A job without a shard fails its whole build. Either way a build that already ended is left
    alone. The ids come from the job's row, not its data, which may be what was malformed.
    """
    if job.build_id is None:
        return "skipped"
    if job.shard_id is None:
        outcome = reduce_build(conn, job.build_id, failure=error)
    else:
        _close_shard(conn, job.shard_id, "failed", error)
        outcome = reduce_build(conn, job.build_id)
    log.warning("capture failed", job_id=job.id, build_id=job.build_id, build=outcome, error=error)
    return outcome


def on_cancelled(conn: Connection, job: Job) -> ReduceOutcome:
    """The job was cancelled: cancel its shard; the build is cancelled when no shard is open."""
    if job.build_id is None:
        return "skipped"
    if job.shard_id is not None:
        _close_shard(conn, job.shard_id, "cancelled", None)
    outcome = reduce_build(conn, job.build_id)
    log.info("capture cancelled", job_id=job.id, build_id=job.build_id, build=outcome)
    return outcome


def _close_shard(conn: Connection, shard_id: int, status: str, error: str | None) -> None:
    conn.execute(
        update(capture_shards)
        .where(capture_shards.c.id == shard_id, capture_shards.c.status.in_(OPEN_SHARD_STATES))
        .values(status=status, error=error)
    )


KIND = Kind(
    "capture",
    accepts=accepts,
    prepare=prepare,
    record=record,
    on_failed=on_failed,
    on_cancelled=on_cancelled,
)
