"""Storing an upload's files in the artifact store: content-addressed, only what is missing.

Uploads of screenshots (`supervisor.builds.uploads`) and of Storybook builds
(`supervisor.builds.storybooks`) both store files by their SHA-256, so a file is stored once
whatever the number of builds that hold it. The store is asked first which keys it has and
since when (at once, concurrently when it is a bucket), and only those it lacks are sent; a
build is queued only after its files are all in the store.

A file the upload reuses may be one that no build names any more, which prune deletes once it
is older than its grace period (`supervisor.builds.prune`): between the upload's question and
its build row, prune would take it. So a reused file last written more than
`REFRESH_AFTER_SECONDS` ago is marked written now (no bytes sent), and a grace period longer
than that plus an upload keeps every file of an upload in progress.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from ipc.artifacts.store import ArtifactStore, StoreError

#: A reused file last written longer ago than this is marked written now (see the module): an
#: hour, so that prune's default grace of 24 h leaves any upload 23 h, and a build every minute
#: refreshes a file at most once an hour.
REFRESH_AFTER_SECONDS = 3600.0
#: Bytes read at a time while hashing a file.
CHUNK_BYTES = 1 << 20
#: Files stored between two progress lines, and the least number of new files that earns any:
#: a small upload says nothing, a large one says how far it is.
PROGRESS_EVERY_FILES = 500

Report = Callable[[str], None]


class UploadError(ValueError):
    """An upload that cannot become a build (the message says why)."""


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file at `path`, in hex."""
    with path.open("rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


def store_missing(
    store: ArtifactStore,
    files: Mapping[str, Path],
    report: Report | None = None,
    clock: Callable[[], float] = time.time,
) -> int:
    """Store each file of `files` (key to local path) that the store has not, and refresh
    those it has from long ago (see the module); returns how many were stored.

    A large upload is `report`ed every `PROGRESS_EVERY_FILES` files. `UploadError` when the
    store cannot take them: what was stored before is content-addressed,
    for the next upload to reuse.
    """
    try:
        stored = store.written(files.keys())
        long_ago = clock() - REFRESH_AFTER_SECONDS
        gone = store.refresh([key for key, at in stored.items() if at < long_ago])
        missing = sorted(files.keys() - stored.keys() | gone)
        for start in range(0, len(missing), PROGRESS_EVERY_FILES):
            batch = missing[start : start + PROGRESS_EVERY_FILES]
            store.put_files([(key, files[key]) for key in batch])
            if report is not None and len(missing) >= PROGRESS_EVERY_FILES:
                report(f"stored {start + len(batch):,} of {len(missing):,} new files")
    except (OSError, StoreError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        raise UploadError(f"{store.location}: cannot store the upload there: {reason}") from None
    return len(missing)


def link_target(path: Path) -> Path:
    """Where the link at `path` leads, its links followed; `UploadError` for a link that leads
    back to itself (or a loop of links), which has no end to upload."""
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # ELOOP; Python 3.11 and 3.12 raise RuntimeError for it
        raise UploadError(f"{shown(path)}: a link that leads back to itself") from None


def shown(path: Path) -> str:
    """`path` for a one-line message: quoted and escaped when it holds an unprintable character."""
    text = str(path)
    return text if text.isprintable() else repr(text)
