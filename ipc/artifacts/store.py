"""What every artifact store does, and the three ways it can fail.

Two stores implement it: a folder (`ipc.artifacts.folder`, the embedded default) and an
S3-compatible bucket (`ipc.artifacts.s3`), so hosts on different machines share nothing but
PostgreSQL and the bucket. The parent stores uploads and reports through it; a child reads
through its host's cache (`child.artifacts`) and stores its captures and diffs.

A store's failures are sorted by what the job should do about them:

* `ArtifactMissing`: the key is not there. The snapshot that named it fails with that line; a
  retry would find it missing again.
* `StoreUnavailable`: a timeout, a refused connection, a 5xx. Transient: the job is retried
  with backoff, never counted a crash, and nothing of it is recorded.
* `StoreRefused`: the store answers but will not do it (no such bucket, bad credentials). A
  setting to mend: `run` and `enqueue-build` check the store first and say so in one line.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Protocol


class StoreError(Exception):
    """An artifact store could not do what was asked (the message, one line, says why)."""


class ArtifactMissing(StoreError):
    """The key is not in the store."""


class StoreUnavailable(StoreError):
    """The store did not answer in time or failed on its side: worth a retry later."""


class StoreRefused(StoreError):
    """The store refused the request for good (a missing bucket, credentials it does not take)."""


@dataclass(frozen=True)
class StoredObject:
    """A key in the store, its size and when it was last written (POSIX seconds)."""

    key: str
    size: int
    modified: float


class ArtifactStore(Protocol):
    """Keys (`ipc.artifacts.keys`) to bytes. Every write is whole or not there: a reader never
    sees half a file, and two writers of one key both leave it whole."""

    #: What `--artifacts` names: a folder's absolute path, or `s3://bucket/prefix`. A child
    #: opens the same store from it (`ipc.artifacts.location.open_store`).
    location: str

    def where(self, key: str) -> str:
        """`key` as a person would find it: a file's path, or its `s3://` URL."""
        ...

    def check(self) -> None:
        """Raise `StoreError` unless the store can be read and written (for start-up)."""
        ...

    def exists(self, key: str) -> bool: ...

    def written(self, keys: Collection[str]) -> dict[str, float]:
        """When each of `keys` that is stored was last written (POSIX seconds); a key not
        stored is left out. Asked concurrently where the store is remote."""
        ...

    def refresh(self, keys: Collection[str]) -> set[str]:
        """Mark each of `keys` written now, its bytes unchanged (a file an upload reuses is
        then young for prune's grace period: `supervisor.builds.files`); the keys that were
        gone meanwhile, to be stored again."""
        ...

    def put_file(self, key: str, path: Path) -> None:
        """Store the file at `path` as `key`, replacing what was there."""
        ...

    def put_files(self, files: Collection[tuple[str, Path]]) -> None:
        """`put_file` for each pair (concurrently where the store is remote)."""
        ...

    def put_bytes(self, key: str, data: bytes) -> None:
        """Store `data` as `key` (a bucket serves it as what its name's extension says)."""
        ...

    def copy_files(self, pairs: Collection[tuple[str, str]]) -> set[str]:
        """Copy each `(source, target)` key within the store, without the bytes leaving it
        where the store can (a bucket copies on its side; a folder links); returns the sources
        that are not there, whose targets are left unwritten."""
        ...

    def writer(self, key: str) -> AbstractContextManager[BinaryIO]:
        """A file to write `key` into, stored when the block ends without an exception."""
        ...

    def read_bytes(self, key: str) -> bytes: ...

    def download(self, key: str, target: Path) -> None:
        """Write `key`'s bytes to the file `target` (created or truncated)."""
        ...

    def listing(self, prefix: str) -> Iterator[StoredObject]:
        """Every key under `prefix` (a folder: `images/`), in no particular order."""
        ...

    def delete(self, keys: Collection[str]) -> None:
        """Remove `keys`; those already gone are no error."""
        ...
