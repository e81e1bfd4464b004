"""Scratch files of the children: temporaries a killed child leaves behind are swept.

Children write unfinished files under a scratch folder (`ipc.scratch`, which says how they are
named): the artifacts folder's when the store is a folder, the cache's when it is a bucket
(`child.artifacts`). When a child dies the parent removes its files from both; at start-up the
host removes those of children that no longer run (a host killed with its children).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import psutil
from structlog.stdlib import BoundLogger

from ipc import scratch
from ipc.artifacts.folder import FolderStore
from ipc.artifacts.store import ArtifactStore


def roots(store: ArtifactStore, cache_dir: Path) -> tuple[Path, ...]:
    """The folders whose scratch the children of a host with `store` and `cache_dir` write."""
    return (store.root, cache_dir) if isinstance(store, FolderStore) else (cache_dir,)


def remove_child_scratch(folders: Sequence[Path], pid: int) -> None:
    """Remove what a child that just died left unfinished.

    Read by owner, not globbed: a glob pattern per child pid fills pathlib's and `re`'s
    caches, a slow growth of the parent over a long life (`benchmarks/growth_bench.py`)."""
    for root in folders:
        try:
            paths = list(scratch.folder(root).iterdir())
        except OSError:
            continue
        for path in paths:
            if scratch.owner(path) == pid:
                with contextlib.suppress(OSError):
                    path.unlink()


def sweep(folders: Sequence[Path], log: BoundLogger) -> int:
    """Remove scratch whose child is gone; failures are logged, never fatal."""
    removed = 0
    for root in folders:
        try:
            for path in scratch.folder(root).iterdir():
                owner = scratch.owner(path)
                if owner is None or not _running(owner):
                    path.unlink(missing_ok=True)
                    removed += 1
        except FileNotFoundError:
            continue
        except OSError as error:
            log.warning("scratch sweep failed", folder=str(root), error=str(error))
    if removed:
        log.info("swept scratch left by killed children", files=removed)
    return removed


def _running(pid: int) -> bool:
    """Whether `pid` still runs: a zombie no longer writes (children of a killed host are
    re-parented, and not every init reaps them at once)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
