"""A build's upload: its screenshots stored, its rows written, its capture jobs queued.

This is what CI calls (`python -m supervisor enqueue-build`). Every image is checked first (see
`find_images`), so a refused upload stores nothing. Images are then stored, outside the
transaction, content-addressed (`images/ab/abcdef....png`): a file is written once whatever
the number of builds that contain it, and an upload that fails afterwards leaves only files
that the next upload of the same screenshots reuses. Then one transaction creates the project if
new, the build, its capture attempt, its shards and one `capture` job per shard, so a build is
either fully queued or not there at all. Each snapshot's baseline is read in that transaction
and carried in its job (`supervisor.builds.baselines`): a build's baselines are fixed when it is
created. A shard never holds more snapshots than its messages to and from the child can carry
(`MAX_SNAPSHOTS_PER_SHARD`), and unless told otherwise an upload is split into shards of about
`SNAPSHOTS_PER_SHARD`, so that every child of every host has a share of a large build.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import structlog
from sqlalchemy import Connection, insert

from ipc.artifacts.keys import image_key
from ipc.artifacts.store import ArtifactStore
from ipc.build_view import BuildSource
from ipc.framing import MAX_FRAME_BYTES
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
from supervisor.db import queue
from supervisor.db.tables import builds, capture_attempts, capture_shards

log = structlog.get_logger(__name__)

#: The first eight bytes of every PNG file (PNG specification, section 5.2).
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The longest snapshot name, in characters: far more than a story id with its mode takes, and
#: bounded so that a snapshot's share of a capture message is bounded too.
MAX_NAME_CHARS = 200
#: What one snapshot adds at most to its capture job's run message, or to its result, in msgpack:
#: a name of `MAX_NAME_CHARS` characters (800 bytes of UTF-8 at worst), the image's and the
#: baseline's content-addressed paths and digests (about 300 bytes), field names and numbers
#: (about 150 bytes), and the rest (2.8 KiB) for a snapshot's error and fields to come.
SNAPSHOT_BYTES_BOUND = 4 * 2**10
#: What a capture message holds besides its snapshots: ids, the artifacts path, the diff options.
MESSAGE_ENVELOPE_BYTES = 64 * 2**10
#: The most snapshots one shard takes (4,080): more, and its run message or its result could
#: outgrow the frame limit that both ends of a child's socket enforce. Uploads with more
#: snapshots get more shards than asked for.
MAX_SNAPSHOTS_PER_SHARD = (MAX_FRAME_BYTES - MESSAGE_ENVELOPE_BYTES) // SNAPSHOT_BYTES_BOUND
#: The snapshots of a shard when the upload names no number of shards. A shard is one job for one
#: child: one shard for a whole build would leave every other child idle, and the last of a few
#: large shards would run alone while the others wait. A job costs the host a dozen statements
#: (claim, start, acknowledgement, the build's reduction) where a byte-identical snapshot costs
#: tens of microseconds and a compared one tens of milliseconds: settling 10,000 byte-identical
#: snapshots, 20 shards of 500 beat 40 of 250 and 80 of 125 (settle_bench), and a shard of
#: compared snapshots stays a matter of seconds.
SNAPSHOTS_PER_SHARD = 500


#: A snapshot as a shard holds it: an uploaded image, or a Storybook plan's snapshot.
Shot = TypeVar("Shot")


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
    #: None for a Storybook build: its snapshots are known once its plan has run.
    snapshot_count: int | None
    source: BuildSource = "images"
    #: A Storybook build's stories, as its index lists them.
    stories: int | None = None

    def as_json(self) -> dict[str, Any]:
        shown = {
            "build_id": self.build_id,
            "source": self.source,
            "shards": len(self.shard_ids),
            "shard_ids": list(self.shard_ids),
            "job_ids": list(self.job_ids),
            "snapshots": self.snapshot_count,
        }
        return shown if self.stories is None else {**shown, "stories": self.stories}


class FoundImage(NamedTuple):
    """A PNG of the upload: its snapshot name, and the file to read (a link's target, checked)."""

    name: str
    path: Path


def find_images(folder: Path) -> list[FoundImage]:
    """The PNGs under `folder` (recursively) with their snapshot names, sorted by name.

    A snapshot's name is its path under `folder` without `.png`, with `/` separators, so the
    same upload names its stories the same on every operating system. Everything that would
    fail later, or store what was not meant to be uploaded, is refused here, before anything
    is written: links that leave the folder, files that are not PNGs, names the tables and the
    capture cannot take, and names that collide. Links to folders are not descended into.
    """
    if not folder.exists():
        raise UploadError(f"{shown(folder)}: no such folder")
    if not folder.is_dir():
        raise UploadError(f"{shown(folder)}: not a folder")
    root, relatives = folder.resolve(), _png_paths(folder)
    found = [_checked(root, folder / relative, relative) for relative in relatives]
    if not found:
        raise UploadError(f"{shown(folder)}: no PNG images in this folder")
    _refuse_case_collisions(folder, relatives)
    return sorted(found)


def _png_paths(folder: Path) -> list[str]:
    """Paths (relative, posix) of the entries under `folder` named `*.png` in any case.

    A file named `.png` counts too, so that its empty name is refused rather than skipped; a
    folder that cannot be read is refused too, rather than its images silently left out.
    """
    paths = []
    for directory, _folders, files in os.walk(folder, onerror=_refuse_unreadable):
        under = Path(directory).relative_to(folder)
        paths += [(under / name).as_posix() for name in files if name.lower().endswith(".png")]
    return sorted(paths)


def _refuse_unreadable(error: OSError) -> None:
    raise UploadError(f"{shown(Path(error.filename))}: cannot be read: {error.strerror}")


def _checked(root: Path, path: Path, relative: str) -> FoundImage:
    """The image at `path`, or the reason it cannot be uploaded."""
    real = path
    if path.is_symlink():
        real = link_target(path)
        if not real.is_relative_to(root):
            raise UploadError(f"{shown(path)}: a link to outside the folder ({shown(real)})")
    if not real.is_file():
        raise UploadError(f"{shown(path)}: not a regular file")
    name = relative[: -len(".png")]
    if problem := snapshot_name_problem(name):
        raise UploadError(f"{shown(path)}: {problem}")
    try:
        with real.open("rb") as file:
            signature = file.read(len(PNG_SIGNATURE))
    except OSError as error:
        raise UploadError(f"{shown(path)}: cannot be read: {error.strerror}") from error
    if signature != PNG_SIGNATURE:
        raise UploadError(f"{shown(path)}: not a PNG image (no PNG signature)")
    return FoundImage(name, real)


def snapshot_name_problem(name: str) -> str | None:
    """Why `name` cannot be a snapshot's name, or None.

    Control characters (a newline above all) break every table that shows names; a part that is
    empty or only dots (`..png` is the name `.`) names no story; a name past `MAX_NAME_CHARS`
    would let a shard's messages outgrow the frame (see `MAX_SNAPSHOTS_PER_SHARD`).
    """
    if any(unicodedata.category(char) == "Cc" for char in name):
        return f"snapshot name {name!r} has a control character"
    if len(name) > MAX_NAME_CHARS:
        return f"snapshot name of {len(name)} characters is longer than {MAX_NAME_CHARS}"
    if not name.strip("."):
        return f"snapshot name {name!r} is empty or only dots"
    if any(not part.strip(".") for part in name.split("/")):
        return f"snapshot name {name!r} has a part that is empty or only dots"
    return None


def _refuse_case_collisions(folder: Path, relatives: Sequence[str]) -> None:
    """Refuse two names equal but for case (`a.png` and `a.PNG` are both the name `a`).

    Equal names would fail the build when it is captured; names that differ only in case cannot
    sit side by side in the folder of a checkout on a case-insensitive file system either.
    """
    seen: dict[str, str] = {}
    for relative in relatives:
        key = relative[: -len(".png")].casefold()
        if key in seen:
            first, second = (shown(folder / path) for path in (seen[key], relative))
            raise UploadError(f"{first} and {second}: names equal but for case")
        seen[key] = relative


def store_images(
    store: ArtifactStore, folder: Path, report: Report | None = None
) -> list[StoredImage]:
    """Store every PNG of `folder` (see `find_images`) by its SHA-256, once; in name order.

    Every image is checked before the first is stored, so a refused upload writes nothing; an
    image the store has already (from an earlier build) is not sent again. A store that cannot
    take them is an `UploadError` naming it.
    """
    stored, sources = [], {}
    for name, path in find_images(folder):
        try:
            digest = sha256_of(path)
        except OSError as error:
            raise UploadError(f"{shown(path)}: cannot be read: {error.strerror}") from None
        stored.append(StoredImage(name, image_key(digest), digest))
        sources[image_key(digest)] = path
    store_missing(store, sources, report)
    return stored


def default_shards(snapshots: int) -> int:
    """The shards of an upload of `snapshots` that names no number: about `SNAPSHOTS_PER_SHARD`
    snapshots each."""
    return max(1, -(-snapshots // SNAPSHOTS_PER_SHARD))


def check_request(project: str, branch: str, shards: int) -> None:
    """Refuse a build that `enqueue_build` would refuse, before any of its images is stored."""
    if not project.strip():
        raise UploadError("a project name must not be empty")
    if not branch.strip():
        raise UploadError("the branch must not be empty")
    if shards < 1:
        raise UploadError(f"--shards must be 1 or more, not {shards}")


def split_evenly(
    images: Sequence[Shot], shards: int, max_per_shard: int = MAX_SNAPSHOTS_PER_SHARD
) -> list[list[Shot]]:
    """Consecutive runs of the name-sorted snapshots, sizes differing by at most one.

    `shards` runs, or more when that many would put more than `max_per_shard` in one; never
    more runs than snapshots: an empty shard would be a job with nothing to capture.
    """
    count = max(min(shards, len(images)), -(-len(images) // max_per_shard))
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
    shards: int | None = None,
    commit: str | None = None,
) -> QueuedBuild:
    """Create the build, its capture attempt, its shards and their capture jobs.

    `shards` None: `default_shards`. The build gets more shards than `shards` when its images
    would not fit in so few (see `MAX_SNAPSHOTS_PER_SHARD`).
    """
    if not images:
        raise UploadError("a build needs at least one image")
    if shards is None:
        shards = default_shards(len(images))
    check_request(project, branch, shards)
    runs = split_evenly(images, shards)
    project_id = ensure_project(conn, project)
    build_id: int = conn.execute(
        insert(builds)
        .values(project_id=project_id, branch=branch, commit=commit, status="pending")
        .returning(builds.c.id)
    ).scalar_one()
    conn.execute(insert(capture_attempts).values(build_id=build_id, status="queued"))
    found = baselines.find(conn, project_id, branch, [image.name for image in images])
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
