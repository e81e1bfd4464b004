"""A build's upload: its screenshots stored, its rows written, its capture jobs queued.

This is what CI calls (`python -m supervisor enqueue-build`). Images are stored first, outside
the transaction, content-addressed (`images/ab/abcdef....png`): a file is written once whatever
the number of builds that contain it, and an upload that fails afterwards leaves only files
that the next upload of the same screenshots reuses. Then one transaction creates the project if
new, the build, its capture attempt, its shards and one `capture` job per shard, so a build is
either fully queued or not there at all. Each snapshot's baseline is read in that transaction
and carried in its job (`supervisor.builds.baselines`): a build's baselines are fixed when it is
created.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import Connection, insert

from supervisor.builds import baselines
from supervisor.builds.projects import ensure_project
from supervisor.db import queue
from supervisor.db.tables import builds, capture_attempts, capture_shards

log = structlog.get_logger(__name__)

#: Bytes read at a time while hashing an image.
HASH_CHUNK_BYTES = 1 << 20


class UploadError(ValueError):
    """An upload that cannot become a build (the message says why)."""


@dataclass(frozen=True)
class StoredImage:
    """One snapshot of the upload: its name and where its image now lives under the artifacts."""

    name: str
    image: str  # relative to the artifacts root, posix separators
    sha256: str

    def as_job_data(self) -> dict[str, str]:
        return {"name": self.name, "image": self.image, "sha256": self.sha256}


@dataclass(frozen=True)
class QueuedBuild:
    """What `enqueue_build` created."""

    build_id: int
    shard_ids: tuple[int, ...]
    job_ids: tuple[int, ...]
    snapshot_count: int

    def as_json(self) -> dict[str, Any]:
        return {
            "build_id": self.build_id,
            "shard_ids": list(self.shard_ids),
            "job_ids": list(self.job_ids),
            "snapshots": self.snapshot_count,
        }


def find_images(folder: Path) -> list[tuple[str, Path]]:
    """The PNGs under `folder` (recursively) with their snapshot names, sorted by name.

    A snapshot's name is its path under `folder` without `.png`, with `/` separators, so the
    same upload names its stories the same on every operating system.
    """
    if not folder.is_dir():
        raise UploadError(f"{folder}: no such folder")
    found = [
        (path.relative_to(folder).with_suffix("").as_posix(), path)
        for path in folder.rglob("*")
        if path.suffix.lower() == ".png" and path.is_file()
    ]
    if not found:
        raise UploadError(f"{folder}: no PNG images in this folder")
    return sorted(found)


def store_image(artifacts: Path, source: Path) -> tuple[str, str]:
    """Store `source` under `images/` by its SHA-256, once; returns (relative path, sha256).

    The copy goes to a temporary file in the target folder and is renamed into place, so a
    reader never sees half an image and two uploads storing it at once both end with it whole.
    """
    digest = _sha256(source)
    relative = f"images/{digest[:2]}/{digest}.png"
    target = artifacts / relative
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        _copy_atomically(source, target)
    return relative, digest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(HASH_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def _copy_atomically(source: Path, target: Path) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-", suffix=".png")
    try:
        with os.fdopen(handle, "wb") as out, source.open("rb") as data:
            while chunk := data.read(HASH_CHUNK_BYTES):
                out.write(chunk)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def store_images(artifacts: Path, folder: Path) -> list[StoredImage]:
    """Store every PNG of `folder` (see `find_images`, `store_image`), in name order."""
    stored = []
    for name, path in find_images(folder):
        relative, digest = store_image(artifacts, path)
        stored.append(StoredImage(name, relative, digest))
    return stored


def split_evenly(images: Sequence[StoredImage], shards: int) -> list[list[StoredImage]]:
    """Consecutive runs of the name-sorted images, sizes differing by at most one.

    Never more shards than images: an empty shard would be a job with nothing to capture.
    """
    if shards < 1:
        raise UploadError(f"--shards must be 1 or more, not {shards}")
    count = min(shards, len(images))
    size, extra = divmod(len(images), count)
    runs, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        runs.append(list(images[start:end]))
        start = end
    return runs


def enqueue_build(
    conn: Connection,
    *,
    project: str,
    branch: str,
    images: Sequence[StoredImage],
    shards: int = 1,
    commit: str | None = None,
) -> QueuedBuild:
    """Create the build, its capture attempt, its shards and their capture jobs."""
    if not images:
        raise UploadError("a build needs at least one image")
    if not branch.strip():
        raise UploadError("the branch must not be empty")
    runs = split_evenly(images, shards)
    project_id = ensure_project(conn, project)
    build_id: int = conn.execute(
        insert(builds)
        .values(project_id=project_id, branch=branch, commit=commit, status="pending")
        .returning(builds.c.id)
    ).scalar_one()
    conn.execute(insert(capture_attempts).values(build_id=build_id, status="queued"))
    found = baselines.find(conn, project_id, [image.name for image in images])
    shard_ids, job_ids = [], []
    for index, run in enumerate(runs):
        shard_id, job_id = _queue_shard(conn, build_id, index, run, found)
        shard_ids.append(shard_id)
        job_ids.append(job_id)
    log.info("build queued", build_id=build_id, project=project, branch=branch, shards=len(runs))
    return QueuedBuild(build_id, tuple(shard_ids), tuple(job_ids), len(images))


def _queue_shard(
    conn: Connection,
    build_id: int,
    index: int,
    run: Sequence[StoredImage],
    found: dict[str, baselines.JobBaseline],
) -> tuple[int, int]:
    shard_id: int = conn.execute(
        insert(capture_shards)
        .values(build_id=build_id, index=index, status="queued")
        .returning(capture_shards.c.id)
    ).scalar_one()
    data = {
        "build_id": build_id,
        "shard_id": shard_id,
        "snapshots": [{**image.as_job_data(), "baseline": found.get(image.name)} for image in run],
    }
    job_id = queue.enqueue(conn, "capture", data, build_id=build_id, shard_id=shard_id)
    return shard_id, job_id
