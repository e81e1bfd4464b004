"""A Storybook build's upload: its files stored content-addressed, then one `plan` job queued.

This is `enqueue-build --storybook DIR`, what CI calls with its `storybook-static/` folder. The
folder must be a static build (`index.json` v4/v5 or `stories.json` v3, read by
`ipc.storybook_index`), and every file is checked before the first is stored, so a refused upload
stores nothing. Files go to `storybooks/<sha256>/<name>` (`ipc.storybook`), written once however
many builds hold them, and the manifest that maps the build's paths to them last, so a manifest
is never there without its files. Then one transaction creates the build, its capture attempt,
its frozen baselines (`supervisor.builds.baselines.freeze`: its snapshots' names are known only
once the plan has run) and the `plan` job (`supervisor.builds.plan`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import structlog
from sqlalchemy import Connection, insert

from ipc.artifacts.store import ArtifactStore, StoreError
from ipc.storybook import (
    StorybookRef,
    file_key,
    manifest_document,
    manifest_key,
)
from ipc.storybook_index import IndexProblem, read_index_file
from supervisor.builds import baselines
from supervisor.builds.files import (
    Report,
    UploadError,
    link_target,
    sha256_of,
    shown,
    store_missing,
)
from supervisor.builds.projects import ensure_project
from supervisor.builds.uploads import QueuedBuild, check_request
from supervisor.db import queue
from supervisor.db.tables import builds, capture_attempts

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class StoredStorybook:
    """A Storybook build now under the artifacts: its manifest, and what storing it took."""

    ref: StorybookRef
    stories: int
    files: int
    #: Files this upload stored; the others were stored already by an earlier build.
    written: int
    bytes: int


def store_storybook(
    store: ArtifactStore, folder: Path, report: Report | None = None
) -> StoredStorybook:
    """Check the static build in `folder`, then store its files and manifest (see the module)."""
    if not folder.is_dir():
        raise UploadError(
            f"{shown(folder)}: {'not a folder' if folder.exists() else 'no such folder'}"
        )
    try:
        entries = read_index_file(folder)
    except IndexProblem as error:
        raise UploadError(str(error)) from None
    stories = sum(1 for entry in entries if entry.type == "story")
    return store_files(store, folder, stories, report)


def store_files(
    store: ArtifactStore, folder: Path, stories: int = 0, report: Report | None = None
) -> StoredStorybook:
    """Store every file of `folder` the store lacks, then its manifest, without looking at
    what they are.

    `store_storybook` checks the build first; this alone is what a store may hold that no
    upload checked (written by another version, or by hand), which a child must refuse itself.
    """
    files = _build_files(folder)
    try:
        digests = {path: sha256_of(source) for path, source in files.items()}
    except OSError as error:
        raise UploadError(f"{shown(folder)}: cannot be read: {error.strerror or error}") from None
    sources = {file_key(path, digest): files[path] for path, digest in digests.items()}
    written = store_missing(store, sources, report)
    manifest = json.dumps(
        manifest_document(digests), sort_keys=True, separators=(",", ":")
    ).encode()
    digest = hashlib.sha256(manifest).hexdigest()
    try:
        store.put_bytes(manifest_key(digest), manifest)
    except (OSError, StoreError) as error:
        raise UploadError(
            f"{store.location}: cannot store the Storybook's manifest there: {error}"
        ) from None
    size = sum(source.stat().st_size for source in files.values())
    return StoredStorybook(
        StorybookRef(manifest=manifest_key(digest), sha256=digest),
        stories,
        len(files),
        written,
        size,
    )


def _build_files(folder: Path) -> dict[str, Path]:
    """Each file of the build by its path under `folder` (posix), links followed if they stay in.

    A link that leaves the folder would upload a file that is not the build's; an unreadable
    folder would silently leave files out. Both are refused, naming the path.
    """
    root = folder.resolve()
    found: dict[str, Path] = {}
    for directory, _folders, names in os.walk(folder, onerror=_refuse_unreadable):
        for name in names:
            path = Path(directory) / name
            real = link_target(path)
            if not real.is_relative_to(root):
                raise UploadError(f"{shown(path)}: a link to outside the folder ({shown(real)})")
            if not real.is_file():
                raise UploadError(f"{shown(path)}: not a regular file")
            if not os.access(real, os.R_OK):
                raise UploadError(f"{shown(path)}: cannot be read")
            found[path.relative_to(folder).as_posix()] = real
    return found


def _refuse_unreadable(error: OSError) -> None:
    raise UploadError(f"{shown(Path(error.filename))}: cannot be read: {error.strerror}")


def enqueue_storybook(
    conn: Connection,
    *,
    project: str,
    branch: str,
    storybook: StoredStorybook,
    shards: int | None = None,
    commit: str | None = None,
) -> QueuedBuild:
    """Create the build, its capture attempt and frozen baselines, and queue its `plan` job.

    `shards` is how many capture jobs the plan splits the snapshots into (None: as many as
    `supervisor.builds.plan.SNAPSHOTS_PER_SHARD` calls for).
    """
    check_request(project, branch, shards or 1)
    project_id = ensure_project(conn, project)
    build_id: int = conn.execute(
        insert(builds)
        .values(
            project_id=project_id,
            branch=branch,
            commit=commit,
            status="pending",
            source="storybook",
            storybook=dict(storybook.ref),
        )
        .returning(builds.c.id)
    ).scalar_one()
    conn.execute(insert(capture_attempts).values(build_id=build_id, status="queued"))
    baselines.freeze(conn, project_id, branch, build_id)
    data = {"build_id": build_id, "storybook": dict(storybook.ref), "shards": shards}
    job_id = queue.enqueue(conn, "plan", data, build_id=build_id)
    log.info(
        "build queued",
        build_id=build_id,
        project=project,
        branch=branch,
        source="storybook",
        stories=storybook.stories,
    )
    return QueuedBuild(build_id, (), (job_id,), None, source="storybook", stories=storybook.stories)
