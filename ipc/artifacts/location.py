"""`--artifacts` as a store, and where a host keeps its local copies of a remote store's files.

The same string opens the same store in the parent, which gets it from the command line, and
in a child, which gets it in each job's payload: a folder's path, or `s3://bucket/prefix`.
A host's cache (`child.cache`) is a setting of the host (`--cache-dir`, `--cache-mib`), which
the parent puts in its environment before it forks, as it does with `--chromium`.
"""

from __future__ import annotations

import os
from pathlib import Path

from ipc.artifacts.folder import FolderStore
from ipc.artifacts.s3 import S3Store
from ipc.artifacts.store import ArtifactStore

S3_SCHEME = "s3://"
#: A host's cache folder and its bound, as `run` exports them for its children.
CACHE_DIR_VARIABLE = "STORYSHELF_CACHE_DIR"
CACHE_MIB_VARIABLE = "STORYSHELF_CACHE_MIB"
DEFAULT_CACHE_DIR = Path(".storyshelf") / "cache"
#: 2 GiB: the screenshots of a few thousand stories and their baselines, a Storybook or two.
DEFAULT_CACHE_MIB = 2048


class BadLocation(ValueError):
    """`--artifacts` names no store (the message says why)."""


def open_store(location: str | Path, *, quick: bool = False) -> ArtifactStore:
    """The store `location` names: `s3://bucket[/prefix]`, or else a folder; `quick`: a bucket
    tried once with short timeouts (`S3Store`)."""
    text = str(location)
    if not text.startswith(S3_SCHEME):
        return FolderStore(Path(text))
    bucket, _, prefix = text[len(S3_SCHEME) :].partition("/")
    if not bucket:
        raise BadLocation(f"--artifacts {text}: no bucket named (s3://bucket/prefix)")
    return S3Store(bucket, prefix, quick=quick)


def is_remote(location: str) -> bool:
    """Whether `location` is a store that children read through the host's cache."""
    return location.startswith(S3_SCHEME)


def export_cache(folder: Path, mib: int) -> None:
    """Tell the children forked from now on where the host's cache is and how big it may grow
    (set before the fork server is forked, as `supervisor.host.chromium` does the browser)."""
    os.environ[CACHE_DIR_VARIABLE] = str(folder.absolute())
    os.environ[CACHE_MIB_VARIABLE] = str(mib)


def cache_dir() -> Path:
    """The cache folder the host exported, else the default (made absolute)."""
    return Path(os.environ.get(CACHE_DIR_VARIABLE) or DEFAULT_CACHE_DIR).absolute()


def cache_bytes() -> int:
    """The cache's bound the host exported, else the default, in bytes."""
    return int(os.environ.get(CACHE_MIB_VARIABLE) or DEFAULT_CACHE_MIB) * 2**20
