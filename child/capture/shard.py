"""The child's side of a `capture` job: compare each snapshot of a shard with its baseline.

The payload (built by `supervisor.builds.capture.prepare`) carries all this needs: the artifact
store (read through `child.artifacts`), the diff options, the folder for diff images, and each
snapshot with its baseline's key and SHA-256, judged one by one (`child.capture.judge`). A payload that names a Storybook build (`"storybook"`) is one capture kind too: its
snapshots are stories, rendered in the browser first (`child.storybook.capture`). One bad
snapshot (a damaged image, a path that leaves the artifacts root, an image missing from the
store or not of its digest) fails only itself, so a shard always returns a result for every
snapshot; only a broken payload, a store that does not answer (the job is retried) or a native
crash fails the job.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from child.artifacts.access import for_job
from child.capture.judge import SnapshotResult, capture_one, diff_options, log_reads
from child.storybook import capture as stories
from child.worker.handler import Progress

#: The least time between two progress reports of a shard, in seconds. Progress proves the
#: child alive (the host kills one silent for `stall_seconds`, seconds at the least) and is when
#: a cancel is read; a byte-identical snapshot takes tens of microseconds, and a report after
#: each cost the child and the host more than the snapshot itself. A compared snapshot takes
#: longer than this, so each of those is still reported.
PROGRESS_SECONDS = 0.1


def run(
    payload: dict[str, Any], progress: Progress, clock: Callable[[], float] = time.monotonic
) -> dict[str, Any]:
    """Capture every snapshot of the payload, reporting progress after a snapshot whenever
    `PROGRESS_SECONDS` have passed since the last report (or the start)."""
    if "storybook" in payload:
        return stories.run(payload, progress)
    shots = payload["snapshots"]
    results: list[SnapshotResult] = []
    artifacts = for_job(
        payload["artifacts"], lambda: progress({"done": len(results), "total": len(shots)})
    )
    options = diff_options(payload["options"])
    diff_dir = payload["diff_dir"]
    reported = clock()
    for done, shot in enumerate(shots, start=1):
        results.append(capture_one(artifacts, diff_dir, shot, options))
        if (now := clock()) - reported >= PROGRESS_SECONDS:
            progress({"done": done, "total": len(shots)})
            reported = now
    log_reads(payload, artifacts)
    return {"snapshots": results}
