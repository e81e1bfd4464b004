"""The child's side of a `publish` job: a build's report as a folder that stands on its own.

The parent sends the build and its snapshots (`ipc.publish.PublishPayload`); this copies every
image and diff the page shows into the report's folder, writes the page last (whole or not at
all), then points the branch's `latest` page at it. Each step can be done again: a retry after
a crash or a store outage finds the copies it made and makes only the rest, and rewrites the
page. The pointer is a convenience beside the report: a store that refuses it (a file in its
way, left by an older version) leaves the branch's pointer where it was and says so in the
result, and the report is published all the same; failing the job for it would leave a written
report unrecorded, queued again by every `build ID` and failing again each time. A picture
that is no longer stored (pruned meanwhile, or lost) is left out and named in
the result, and the page shows it broken: one missing file does not cost the build its report.
Every call to the store beats for the job while it waits (`child.worker.beats`): a bucket that
is away for a while fails the try when its timeouts run out, it does not get the child killed
as hung.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from html import escape
from typing import Any, cast

import structlog

from child.artifacts.access import STORE_CALL_SECONDS
from child.report.render import Listing, report_parts
from child.worker.beats import beating
from child.worker.handler import Progress
from ipc.artifacts.location import open_store
from ipc.artifacts.s3 import CONCURRENCY
from ipc.artifacts.store import ArtifactMissing, ArtifactStore, StoreError, StoreUnavailable
from ipc.build_view import BuildView, SnapshotView, build_from_wire, snapshot_from_values
from ipc.publish import (
    INDEX,
    PublishPayload,
    PublishResult,
    pointed_build,
    pointer_meta,
    pointer_target,
)

log = structlog.get_logger(__name__)

#: Files copied between two reports of progress: as many as a bucket copies at once, so that a
#: batch waits at most as long as one call.
COPY_BATCH = CONCURRENCY


def run(data: dict[str, Any], progress: Progress) -> PublishResult:
    """Publish the report `data` (a `PublishPayload`) describes; returns where it opens."""
    payload = cast(PublishPayload, data)
    store = open_store(payload["artifacts"])
    view = build_from_wire(payload["build"])
    snapshots = [snapshot_from_values(row) for row in payload["snapshots"]]
    folder = payload["folder"]
    copied, missing = _copy_pictures(store, folder, _pictures(snapshots), progress)
    index = f"{folder}/{INDEX}"
    listing = Listing(
        snapshots, payload["counts"], tuple(payload["baseline_builds"]), payload["unlisted"]
    )
    with _waiting(progress), store.writer(index) as out:
        for part in report_parts(view, listing):
            out.write(part.encode())
    progress({"written": index})
    unpointed = None
    if payload["latest"] is not None:
        unpointed = _point(store, payload["latest"], view, progress)
    if missing:
        log.warning("report shows pictures no longer stored", build_id=view.id, missing=missing[:5])
    return {
        "index": index,
        "url": store.where(index),
        "copied": copied,
        "missing": missing,
        "unpointed": unpointed,
    }


def _pictures(snapshots: Iterable[SnapshotView]) -> list[str]:
    """Every image and diff the page links to, once each, in page order."""
    keys: dict[str, None] = {}
    for snapshot in snapshots:
        for key in (snapshot.image_path, snapshot.baseline_image, snapshot.diff_path):
            if key:
                keys[key] = None
    return list(keys)


def _copy_pictures(
    store: ArtifactStore, folder: str, keys: list[str], progress: Progress
) -> tuple[int, list[str]]:
    """Copy `keys` into `folder` under the same keys, skipping those a try before copied; the
    number copied and the sources not stored."""
    copied, missing = 0, []
    for batch in _batches(keys, COPY_BATCH):
        targets = {f"{folder}/{key}": key for key in batch}
        with _waiting(progress):
            there = store.written(list(targets))
        wanted = [(key, target) for target, key in targets.items() if target not in there]
        with _waiting(progress):
            missing.extend(sorted(store.copy_files(wanted)))
        copied += len(wanted)
        progress({"copied": copied})
    return copied - len(missing), missing


def _batches(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _waiting(progress: Progress) -> AbstractContextManager[None]:
    """Beats while a call to the store waits."""
    return beating(lambda: progress({"waiting_on": "store"}), STORE_CALL_SECONDS)


def _point(store: ArtifactStore, key: str, view: BuildView, progress: Progress) -> str | None:
    """Point `key` (the branch's `latest` page) at `view`'s report, unless it already points at
    a newer build: two builds of a branch may publish in either order. Why the store refused
    it, or None; a store that does not answer fails the try, to be retried (see the module)."""
    try:
        try:
            with _waiting(progress):
                pointed = pointed_build(store.read_bytes(key))
        except (ArtifactMissing, FileNotFoundError):  # a bucket's missing key, a folder's
            pointed = None
        if pointed is not None and pointed > view.id:
            return None
        with _waiting(progress):
            store.put_bytes(key, pointer_page(view))
    except StoreUnavailable:
        raise
    except (OSError, StoreError) as error:
        why = f"{key}: {error.strerror if isinstance(error, OSError) and error.strerror else error}"
        log.warning("latest page not moved", build_id=view.id, error=why)
        return why
    return None


def pointer_page(view: BuildView) -> bytes:
    """A page that sends the browser on to `view`'s report, and says which build it is."""
    target = escape(pointer_target(view.branch, view.id))
    title = escape(f"{view.project} @ {view.branch}: build {view.id} ({view.status})")
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f"{pointer_meta(view.id)}"
        f'<meta http-equiv="refresh" content="0; url={target}">'
        f"<title>{title}</title></head>"
        f'<body><p>The newest report: <a href="{target}">{title}</a></p></body></html>\n'
    ).encode()
