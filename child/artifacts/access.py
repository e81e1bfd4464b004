"""A job's artifacts as the child sees them: a local file for each key it reads, and a way to
store what it made (captures, diffs).

Two ways, by the store the job names (`ipc.artifacts.location`):

* **A folder** is read in place: its files are local already, and a shard of thousands of
  byte-identical snapshots reads none of them (the same digest is `unchanged` without a byte
  read). Keys are resolved under the root with links followed (`child.capture.paths`).
* **A bucket** is read through the host's cache (`child.cache`): each key the job names comes
  with the SHA-256 it must have, so the cache is content-addressed, a download is verified
  before any reader sees it, and the second build of a project finds its baselines there. What
  the child stores goes to the bucket, and a capture into the cache too: it is the baseline of
  the next build.

Either way an unfinished file is written under a scratch folder (`ipc.scratch`) on the same
file system as where it ends, and renamed into place when whole.
"""

from __future__ import annotations

import contextlib
import os
import re
from functools import cache
from pathlib import Path
from typing import Protocol

from child.cache.content import ContentCache
from child.capture.paths import ArtifactsRoot
from child.worker.beats import Beat, beating
from ipc import scratch
from ipc.artifacts import location
from ipc.artifacts.keys import check_key
from ipc.artifacts.s3 import LONGEST_REQUEST_SECONDS
from ipc.artifacts.store import ArtifactStore

#: The longest one call to a bucket is beaten for: what its timeouts and retries allow, and a
#: margin.
STORE_CALL_SECONDS = LONGEST_REQUEST_SECONDS + 10.0


class JobArtifacts(Protocol):
    """What a child does with a job's artifacts."""

    #: The store's location, as the job named it.
    location: str
    #: Keys read for this job, and how many of them had to be downloaded (the rest were in the
    #: host's cache, or local already).
    reads: int
    downloads: int

    def read(self, key: str, sha256: str) -> Path:
        """A local file holding `key`, whose content has `sha256`.

        Raises `UnsafeKey` for a key that leaves the root, `ArtifactMissing` (or
        `FileNotFoundError` in a folder) when it is not stored, `HashMismatch` when what is
        stored is not what the job names, `StoreUnavailable` when the store does not answer."""
        ...

    def new_scratch(self, suffix: str) -> Path:
        """A fresh path to write an unfinished file at (see `keep`)."""
        ...

    def named(self, message: str) -> str:
        """`message` (an error about files this job read) as a person reads it: with the
        store's key in place of each local path the job was given that does not say it."""
        ...

    def keep(self, key: str, written: Path, sha256: str | None = None) -> None:
        """Store the finished file `written` (a `new_scratch` path) as `key`; `written` is gone
        afterwards. `sha256`, when known, lets a remote store's cache keep a copy."""
        ...


class FolderArtifacts:
    """A folder store, read in place (see the module)."""

    def __init__(self, root: Path) -> None:
        self.location = str(root)
        self.reads = self.downloads = 0
        self._root = ArtifactsRoot(root)

    def read(self, key: str, sha256: str) -> Path:
        self.reads += 1
        return self._root.resolve(key)

    def new_scratch(self, suffix: str) -> Path:
        return scratch.new_file(self._root.path, suffix)

    def named(self, message: str) -> str:
        return message  # a path in the folder says where the file is

    def keep(self, key: str, written: Path, sha256: str | None = None) -> None:
        try:
            target = self._root.resolve(key)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(written, target)
        except BaseException:
            written.unlink(missing_ok=True)
            raise


class CachedArtifacts:
    """A remote store, read through the host's cache (see the module)."""

    def __init__(
        self,
        store: ArtifactStore,
        cache: ContentCache,
        folder: Path,
        beat: Beat = lambda: None,
    ) -> None:
        self.location = store.location
        self.reads = self.downloads = 0
        self._store = store
        self._cache = cache
        self._folder = folder
        self._beat = beat
        #: The key of each digest this job read: a path in the cache names only the digest.
        self._keys: dict[str, str] = {}
        self._cached_path = re.compile(
            re.escape(str(cache.folder)) + r"/[0-9a-f]{2}/([0-9a-f]{64})"
        )

    def read(self, key: str, sha256: str) -> Path:
        check_key(key)
        self.reads += 1
        self._keys[sha256] = key
        return self._cache.get(sha256, lambda target: self._download(key, target), name=key)

    def _download(self, key: str, target: Path) -> None:
        self.downloads += 1
        with beating(self._beat, STORE_CALL_SECONDS):
            self._store.download(key, target)

    def new_scratch(self, suffix: str) -> Path:
        return scratch.new_file(self._folder, suffix)

    def named(self, message: str) -> str:
        def key_of(found: re.Match[str]) -> str:
            key = self._keys.get(found[1])
            return found[0] if key is None else f"{self.location}/{key}"

        return self._cached_path.sub(key_of, message)

    def keep(self, key: str, written: Path, sha256: str | None = None) -> None:
        try:
            with beating(self._beat, STORE_CALL_SECONDS):
                self._store.put_file(key, written)
        except BaseException:
            written.unlink(missing_ok=True)
            raise
        if sha256 is None:
            written.unlink()
            return
        # The cache's folder deleted under the job loses its copy: the file is stored still.
        with contextlib.suppress(FileNotFoundError):
            self._cache.add(sha256, written)


def for_job(where: str, beat: Beat = lambda: None) -> JobArtifacts:
    """The artifacts of a job whose payload names `where` (a folder, or `s3://...`), its
    counts its own; `beat` reports the job's progress while a bucket keeps it waiting
    (`child.worker.beats`)."""
    if not location.is_remote(where):
        return FolderArtifacts(Path(where))
    store, content = _remote(where)
    return CachedArtifacts(store, content, content.folder, beat)


@cache
def _remote(where: str) -> tuple[ArtifactStore, ContentCache]:
    """One store and cache per location and process: the client's connections and the cache's
    accounting last across the child's jobs."""
    return location.open_store(where), ContentCache(location.cache_dir(), location.cache_bytes())
