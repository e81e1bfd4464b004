"""The host's local content-addressed cache of files that live in a remote object store.

Where the artifacts live in a remote store (S3), a child reads the images, baselines and
Storybook files a job names from it, and the second build of a project reads mostly the same
baselines as the first. So the children of one host share a cache on local disk: a file is
named by its SHA-256 (`<folder>/<sha[:2]>/<sha256>`), fetched once, and read from disk after.

What it guarantees:

* Verified: a file fetched into the cache is hashed before it is named by its digest; content
  that does not match is refused (`HashMismatch`) and left nowhere.
* Whole or absent: a file is written under the cache's scratch folder (`ipc.scratch`, so a
  killed child's half-written file is swept by the parent) and renamed into place. Two
  children that fill one entry at once both rename a whole file over it; a reader never sees
  half of one.
* Bounded, least recently used first: a hit marks the entry used (its mtime, at most once a
  minute), and when a process's fills push the cache past its bound, the entries unused the
  longest are deleted until it holds at most 90% of it. The scan that finds them is amortised:
  a process scans when its estimate (the total at its last scan plus what it added since)
  passes the bound, or once it has added a tenth of the bound since (so that several children
  starting on one cache cannot each add a whole bound before looking).
* Safe across processes: eviction only deletes whole files, and a file another process deleted
  or replaced first is skipped. No locks are taken.

One race remains: a reader gets an entry's path, and another process evicts that entry before
the reader opens it. Eviction deletes the entries used the longest ago, and both a hit and a
fill make an entry the most recently used, so the entry a job just asked for is among the last
to go: the race needs the cache's bound to be smaller than what the jobs running at once read
within a few minutes, which is a bound set too small. Even then the way out is simple: a caller
whose path is gone calls `get` again, which fetches it anew. A file already opened stays
readable after it is evicted (unlinking leaves open files whole).

The cache's whole folder can be deleted under its processes too (an operator freeing disk):
a fill under way is tried again, and a reader whose file vanished calls `get` again, as above.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import stat
import time
from collections.abc import Callable
from pathlib import Path

from ipc import scratch

#: A fill whose file vanished (the cache's folder deleted under it) is tried this often.
FILL_TRIES = 3

#: A hit re-marks an entry used at most this often (seconds): one `utime` saved per read.
TOUCH_EVERY = 60.0

#: Eviction brings the cache down to this share of its bound, so that it does not evict again
#: at the next fill.
LOW_WATER = 0.9

#: A process scans again once it has added this share of the bound since its last scan.
RESCAN_SHARE = 0.1

_DIGEST = re.compile(r"[0-9a-f]{64}")
_SUBFOLDERS = tuple(f"{index:02x}" for index in range(256))


class HashMismatch(ValueError):
    """Content fetched for a digest that it does not have (the message, one line, names it)."""


class ContentCache:
    """Files by SHA-256 under `folder`, at most about `max_bytes` of them, shared by the
    processes of one host (see the module's docstring for what it guarantees)."""

    def __init__(
        self, folder: Path, max_bytes: int, *, clock: Callable[[], float] = time.time
    ) -> None:
        if max_bytes < 1:
            raise ValueError(
                f"--cache-mib: the cache must be allowed at least 1 byte, not {max_bytes}"
            )
        self.folder = folder
        self.max_bytes = max_bytes
        self._clock = clock
        self._root = os.fspath(folder)
        self._low = int(max_bytes * LOW_WATER)
        self._rescan_after = max(1, int(max_bytes * RESCAN_SHARE))
        #: The total this process found at its last scan; None before its first.
        self._scanned: int | None = None
        #: Bytes this process put in the cache since its last scan.
        self._added = 0

    def get(self, sha256: str, fill: Callable[[Path], None], *, name: str) -> Path:
        """The cached file whose content has SHA-256 `sha256`, fetched by `fill` on a miss.

        `fill(path)` writes the content to `path`, a file that does not exist yet in the
        cache's scratch folder. The content is then hashed: `HashMismatch` (which says `name`,
        the file as a person knows it) if it differs, else it is renamed into place. Whatever
        `fill` raises propagates; either way nothing of a failed fill is left. A fill whose file
        vanished, the cache's folder deleted under it, is tried again (`FILL_TRIES` in all).

        The entry could be evicted by another process before the caller opens the returned
        path (see the module's docstring: only with a bound that is too small). A caller whose
        open raises `FileNotFoundError` simply calls `get` again."""
        path = self._path(sha256)
        if self._touch(path):
            return path
        tries_left = FILL_TRIES
        while True:
            tries_left -= 1
            temporary = scratch.new_file(self.folder, "")
            try:
                size = self._fill(temporary, path, sha256, fill, name)
                break
            except FileNotFoundError:
                # The file being filled vanished: the cache's folder was deleted under this
                # process (an operator freeing disk). Fill it anew, into a folder made anew.
                if tries_left == 0 or os.path.exists(temporary):
                    raise
        self._account(size, keep=sha256)
        return path

    def _fill(
        self,
        temporary: Path,
        path: Path,
        sha256: str,
        fill: Callable[[Path], None],
        name: str,
    ) -> int:
        """Fill `temporary`, check its digest and rename it to `path`; its size. Nothing of a
        failed fill is left."""
        try:
            fill(temporary)
            with open(temporary, "rb") as file:
                actual = hashlib.file_digest(file, "sha256").hexdigest()
                size = os.fstat(file.fileno()).st_size
            if actual != sha256:
                raise HashMismatch(f"{name}: its content has SHA-256 {actual}, not {sha256}")
            self._place(temporary, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        return size

    def add(self, sha256: str, source: Path) -> Path:
        """Put `source`, whose SHA-256 the caller just computed, in the cache; its path there.

        `source` is moved, not copied: renamed into place (it should be on the cache's
        filesystem), or, across filesystems, copied through the scratch folder and then
        removed. It is not hashed again."""
        path = self._path(sha256)
        size = os.stat(source).st_size
        try:
            self._place(source, path)
        except OSError as error:
            if error.errno != errno.EXDEV:
                raise
            temporary = scratch.new_file(self.folder, "")
            try:
                shutil.copyfile(source, temporary)
                self._place(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            os.unlink(source)
        self._account(size, keep=sha256)
        return path

    def size_bytes(self) -> int:
        """The bytes the cache holds now, by a scan of its folder (for tests and stats)."""
        total, _ = self._scan()
        return total

    def _path(self, sha256: str) -> Path:
        if not _DIGEST.fullmatch(sha256):
            raise ValueError(f"{sha256!r} is not a SHA-256 digest (64 lowercase hex digits)")
        return self.folder / sha256[:2] / sha256

    def _touch(self, path: Path) -> bool:
        """Whether `path` is cached, marking it used unless it was within `TOUCH_EVERY`."""
        try:
            modified = os.stat(path).st_mtime
        except FileNotFoundError:
            return False
        now = self._clock()
        if now - TOUCH_EVERY < modified <= now:
            return True
        try:
            os.utime(path, (now, now))
        except FileNotFoundError:
            return False  # evicted between the two calls
        return True

    def _place(self, source: Path, path: Path) -> None:
        """Mark `source` used now and rename it to `path` (atomic; its folder made at need)."""
        now = self._clock()
        os.utime(source, (now, now))
        try:
            os.replace(source, path)
        except FileNotFoundError:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, path)

    def _account(self, size: int, *, keep: str) -> None:
        """Count `size` bytes added, and scan and evict when the estimate calls for it."""
        self._added += size
        if (
            self._scanned is None
            or self._scanned + self._added > self.max_bytes
            or self._added >= self._rescan_after
        ):
            self._evict(keep)

    def _evict(self, keep: str) -> None:
        """Scan; if the cache is over its bound, delete the entries used the longest ago (never
        `keep`, the entry being returned) until it holds at most `LOW_WATER` of it."""
        total, entries = self._scan()
        if total > self.max_bytes:
            entries.sort()
            for _, size, name, path in entries:
                if total <= self._low:
                    break
                if name == keep:
                    continue
                with contextlib.suppress(FileNotFoundError):  # another process evicted it
                    os.unlink(path)
                total -= size
        self._scanned = total
        self._added = 0

    def _scan(self) -> tuple[int, list[tuple[int, int, str, str]]]:
        """The total bytes cached and each entry as (mtime in ns, size, name, path)."""
        total = 0
        entries: list[tuple[int, int, str, str]] = []
        for subfolder in _SUBFOLDERS:
            try:
                listing = os.scandir(os.path.join(self._root, subfolder))
            except FileNotFoundError:
                continue
            with listing:
                for entry in listing:
                    try:
                        status = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # evicted since the listing
                        continue
                    if stat.S_ISREG(status.st_mode):
                        total += status.st_size
                        entries.append((status.st_mtime_ns, status.st_size, entry.name, entry.path))
        return total, entries
