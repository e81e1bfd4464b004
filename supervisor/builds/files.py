"""Writing a build's files under the artifacts folder: content-addressed, whole or not at all.

Uploads of screenshots (`supervisor.builds.uploads`) and of Storybook builds
(`supervisor.builds.storybooks`) both store files by their SHA-256, so a file is written once
whatever the number of builds that hold it, and both need the same two guarantees: a reader never
sees half a file, and two uploads storing one file at once both end with it whole.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: Bytes read at a time while hashing or copying a file.
CHUNK_BYTES = 1 << 20


def sha256_of(path: Path) -> str:
    """The SHA-256 of the file at `path`, in hex."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def store_copy(source: Path, target: Path) -> bool:
    """Copy `source` to `target` unless it is there already; True if it was written."""

    def copy(out: BinaryIO) -> None:
        with source.open("rb") as data:
            while chunk := data.read(CHUNK_BYTES):
                out.write(chunk)

    return _write_once(target, copy)


def store_bytes(data: bytes, target: Path) -> bool:
    """Write `data` to `target` unless it is there already; True if it was written."""
    return _write_once(target, lambda out: out.write(data))


def _write_once(target: Path, write: Callable[[BinaryIO], object]) -> bool:
    """Write `target` through a temporary file in its folder renamed into place, unless it exists."""
    if target.exists():
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as out:
            write(out)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return True


def shown(path: Path) -> str:
    """`path` for a one-line message: quoted and escaped when it holds an unprintable character."""
    text = str(path)
    return text if text.isprintable() else repr(text)
