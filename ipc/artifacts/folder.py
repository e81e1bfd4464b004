"""The artifact store as a folder: the embedded default, and a host's only store when several
hosts share one machine (or a network file system).

Keys are paths under the root. Every write goes to a temporary file beside its target and is
renamed into place, so a reader never sees half a file and two writers of one key both leave it
whole. Errors of the file system stay `OSError`s: a full disk or a folder that cannot be written
is told apart by its errno where it matters (`child.worker.resources`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from ipc.artifacts.keys import check_key
from ipc.artifacts.store import StoredObject, StoreRefused
from ipc.scratch import FOLDER as SCRATCH_FOLDER


class FolderStore:
    """Artifacts under `root` (see the module)."""

    def __init__(self, root: Path) -> None:
        self.root = root.absolute()
        self.location = str(self.root)

    def __repr__(self) -> str:
        return f"FolderStore({self.location!r})"

    def path(self, key: str) -> Path:
        """Where `key` lies (its key checked; links are the reader's to check)."""
        return self.root / check_key(key)

    def where(self, key: str) -> str:
        return str(self.path(key))

    def check(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise StoreRefused(f"{self.root}: not a folder")
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise StoreRefused(f"{self.root}: cannot be made: {error.strerror or error}") from None
        if not self.root.is_dir():
            raise StoreRefused(f"{self.root}: not a folder")
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise StoreRefused(f"{self.root}: cannot be written")

    def exists(self, key: str) -> bool:
        return self.path(key).is_file()

    def written(self, keys: Collection[str]) -> dict[str, float]:
        found = {}
        for key in keys:
            try:
                found[key] = self.path(key).stat().st_mtime
            except (FileNotFoundError, NotADirectoryError):
                continue
        return found

    def refresh(self, keys: Collection[str]) -> set[str]:
        gone = set()
        for key in keys:
            try:
                os.utime(self.path(key))
            except FileNotFoundError:
                gone.add(key)
        return gone

    def put_file(self, key: str, path: Path) -> None:
        with self.writer(key) as out, path.open("rb") as source:
            shutil.copyfileobj(source, out, 1 << 20)

    def put_files(self, files: Collection[tuple[str, Path]]) -> None:
        for key, path in files:
            self.put_file(key, path)

    def put_bytes(self, key: str, data: bytes) -> None:
        with self.writer(key) as out:
            out.write(data)

    def copy_files(self, pairs: Collection[tuple[str, str]]) -> set[str]:
        missing = set()
        for source, target in pairs:
            try:
                self._link(self.path(source), self.path(target))
            except FileNotFoundError:
                if not self.path(source).is_file():
                    missing.add(source)
                    continue
                raise
        return missing

    def _link(self, source: Path, target: Path) -> None:
        """`target` made the same file as `source`: a hard link, renamed into place so that a
        reader never sees half of it; a copy where links cannot be made (another file system)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".upload-{os.urandom(8).hex()}"
        try:
            os.link(source, temporary)
        except FileNotFoundError:
            raise
        except OSError:
            key = target.relative_to(self.root).as_posix()
            with self.writer(key) as out, source.open("rb") as read:
                shutil.copyfileobj(read, out, 1 << 20)
            return
        try:
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    @contextmanager
    def writer(self, key: str) -> Iterator[BinaryIO]:
        target = self.path(key)
        target.parent.mkdir(parents=True, exist_ok=True)
        # Made as any file the host writes is (mode 0666 less the umask, like the images: a
        # report's pages readable by the user's web server), where `mkstemp` would give 0600.
        temporary = target.parent / f".upload-{os.urandom(8).hex()}"
        handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        try:
            with os.fdopen(handle, "wb") as out:
                yield out
            os.replace(temporary, target)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise

    def read_bytes(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def download(self, key: str, target: Path) -> None:
        shutil.copyfile(self.path(key), target)

    def listing(self, prefix: str) -> Iterator[StoredObject]:
        top = self.root / prefix
        for directory, folders, files in os.walk(top):
            folders[:] = [name for name in folders if name != SCRATCH_FOLDER]
            for name in files:
                if name.startswith(".upload-"):
                    continue  # a write in progress: not a key yet
                path = Path(directory) / name
                try:
                    facts = path.stat()
                except FileNotFoundError:
                    continue
                key = path.relative_to(self.root).as_posix()
                yield StoredObject(key, facts.st_size, facts.st_mtime)

    def delete(self, keys: Collection[str]) -> None:
        for key in keys:
            self.path(key).unlink(missing_ok=True)
