"""The child's side of a `capture` job over a Storybook build: render, store, then diff.

The payload is the screenshot capture's (`child.capture.shard`) plus `"storybook"`, the stored
build (`StorybookRef`), and each snapshot is a `StorySnapshot` plus its `"baseline"`. For each
snapshot the story is rendered in the child's browser (`child.browser.render`), the PNG stored
content-addressed at `images/<sha[:2]>/<sha>.png` in the artifact store (written as a scratch
file and stored when whole, so no reader ever sees half of one: `child.artifacts`), and compared with its baseline
exactly as an uploaded image is (`child.capture.judge`), with the snapshot's own threshold and
anti-aliasing setting over the project's when it has them. Progress is reported after every
story, so a long shard is never mistaken for a hung child. The page is kept for the child's
next shard of the same build (`child.storybook.kept`).

Each result is the screenshot capture's plus `ipc.storybook.STORY_RESULT_FIELDS` (the story's
render time among them, which the host's metrics read). A story that
failed (an error event, the render cap, a crash) is `failed` with the story's message and no
image; it never fails the shard. A stored build that cannot be read fails the job.

When the build's stories all fail with one and the same error (`child.storybook.breakdown`),
the rest of the shard is failed without being rendered (`ipc.storybook.NOT_RENDERED`) and the
result names that error as `"stopped"`, for the parent to end the build with it said once;
else `"stopped"` is None.
"""

from __future__ import annotations

import dataclasses
import hashlib
import time
from collections.abc import Mapping
from typing import Any

import structlog

from child.artifacts.access import JobArtifacts, for_job
from child.browser.launch import child_browser
from child.browser.render import Capture
from child.browser.stopwatch import Phase, Stopwatch, add
from child.capture.judge import (
    SnapshotResult,
    capture_one,
    diff_options,
    failed_result,
    log_reads,
)
from child.diff.compare import DiffOptions
from child.storybook.kept import build_page
from child.storybook.stored import load
from child.worker import resources
from child.worker.handler import Progress
from ipc.artifacts.keys import image_key
from ipc.storybook import MAX_STOPPED_LENGTH, NOT_RENDERED

log = structlog.get_logger(__name__)


def run(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Capture every story snapshot of the payload, reporting progress after each."""
    options = diff_options(payload["options"])
    diff_dir = payload["diff_dir"]
    shots = payload["snapshots"]
    results: list[SnapshotResult] = []
    watch = Stopwatch(time.monotonic)
    totals: dict[Phase, float] = {}

    def beat() -> None:
        progress({"done": len(results), "total": len(shots), "waiting": True})

    artifacts = for_job(payload["artifacts"], beat)
    build = load(artifacts, payload["storybook"])

    # Launched (or found alive) before the first story: it can take seconds.
    browser = child_browser(beat)
    progress({"done": 0, "total": len(shots)})
    with build_page(payload, build, browser, beat) as kept:
        breakdown = kept.breakdown
        for done, shot in enumerate(shots, start=1):
            problem = shot.get("problem") or (breakdown.stopped and NOT_RENDERED)
            if problem:
                capture = Capture(shot["story_id"], None, None, None, problem, 0.0)
            else:
                baseline = (shot.get("baseline") or {}).get("sha256")
                capture = kept.renderer.take(shot, baseline, retry=breakdown.worth_retrying)
                breakdown.saw(shot["title"], capture.error, alone=capture.alone)
            watch.restart()
            results.append(settle(artifacts, diff_dir, shot, capture, options, watch))
            progress({"done": done, "total": len(shots), "story_id": shot["story_id"]})
            watch.lap("progress")
            add(totals, capture.phases)
            add(totals, watch.laps)
    log.info(
        "story timings",
        stories=len(shots),
        seconds={phase: round(seconds, 3) for phase, seconds in totals.items()},
    )
    log_reads(payload, artifacts)
    stopped = breakdown.stopped
    if stopped is not None:
        log.warning("the build's stories all fail with one error", error=stopped)
    return {"snapshots": results, "stopped": stopped and stopped[:MAX_STOPPED_LENGTH]}


def settle(
    artifacts: JobArtifacts,
    diff_dir: str,
    shot: Mapping[str, Any],
    capture: Capture,
    options: DiffOptions,
    watch: Stopwatch,
) -> SnapshotResult:
    """One snapshot's result: the capture stored and diffed, or the story's failure; `watch`
    times storing and diffing."""
    if capture.png is None or capture.sha256 is None:
        result = failed_result(shot, capture.error or "no screenshot")
        result.update(
            image=None,
            sha256=None,
            settled=None,
            render_seconds=capture.seconds,
            ignore_boxes=None,
        )
        return result
    image = store_capture(artifacts, capture.png, capture.sha256)
    watch.lap("store")
    baseline = shot.get("baseline")
    boxes = [list(box) for box in capture.ignore_boxes]
    compared = {
        "name": shot["name"],
        "image": image,
        "sha256": capture.sha256,
        "baseline": baseline,
        # Pixels inside the ignore regions of either image are not compared.
        "ignore": boxes + list((baseline or {}).get("ignore_boxes") or []),
    }
    result = capture_one(artifacts, diff_dir, compared, snapshot_options(shot, options))
    watch.lap("diff")
    result.update(
        image=image,
        sha256=capture.sha256,
        settled=capture.settled,
        render_seconds=capture.seconds,
        ignore_boxes=boxes,
    )
    return result


def snapshot_options(shot: Mapping[str, Any], options: DiffOptions) -> DiffOptions:
    """The project's diff options with the snapshot's own threshold and count_aa over them."""
    changes: dict[str, Any] = {}
    if shot.get("threshold") is not None:
        changes["threshold"] = float(shot["threshold"])
    if shot.get("count_aa") is not None:
        changes["count_aa"] = bool(shot["count_aa"])
    return dataclasses.replace(options, **changes) if changes else options


def store_capture(artifacts: JobArtifacts, png: bytes, digest: str | None = None) -> str:
    """Store `png` at `images/<sha[:2]>/<sha>.png`; returns that key."""
    digest = digest or hashlib.sha256(png).hexdigest()
    key = image_key(digest)
    try:
        try:
            _store(artifacts, key, png, digest)
        except FileNotFoundError:
            # The scratch file vanished before it was stored (the host's cache folder, where a
            # bucket's scratch lives, deleted under the job): the PNG is still in memory.
            _store(artifacts, key, png, digest)
    except OSError as error:
        resources.check(error)  # a full disk is the host's trouble: the job goes back
        raise
    return key


def _store(artifacts: JobArtifacts, key: str, png: bytes, digest: str) -> None:
    written = artifacts.new_scratch(".png")
    try:
        written.write_bytes(png)
    except BaseException:
        written.unlink(missing_ok=True)
        raise
    artifacts.keep(key, written, digest)
