"""Scratch files of the children: temporaries a killed child leaves behind are swept.

Children write unfinished files under the scratch folder (`ipc.scratch`, which says how they
are named). When a child dies the parent removes its files; at start-up the host removes those
of children that no longer run (a host killed with its children).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil
from structlog.stdlib import BoundLogger

from ipc import scratch


def remove_child_scratch(artifacts: Path, pid: int) -> None:
    """Remove what a child that just died left unfinished.

    Read by owner, not globbed: a glob pattern per child pid fills pathlib's and `re`'s
    caches, a slow growth of the parent over a long life (`benchmarks/growth_bench.py`)."""
    try:
        paths = list(scratch.folder(artifacts).iterdir())
    except OSError:
        return
    for path in paths:
        if scratch.owner(path) == pid:
            with contextlib.suppress(OSError):
                path.unlink()


def sweep(artifacts: Path, log: BoundLogger) -> int:
    """Remove scratch whose child is gone; failures are logged, never fatal."""
    removed = 0
    try:
        for path in scratch.folder(artifacts).iterdir():
            owner = scratch.owner(path)
            if owner is None or not _running(owner):
                path.unlink(missing_ok=True)
                removed += 1
    except FileNotFoundError:
        return 0
    except OSError as error:
        log.warning("scratch sweep failed", error=str(error))
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
