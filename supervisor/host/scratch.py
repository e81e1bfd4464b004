"""Scratch files of the children: temporaries a killed child leaves behind are swept.

Children write temporaries as `<artifacts>/.scratch/<pid>-<name>` and rename them into place, so
a file in there is always unfinished work. When a child dies the parent removes its files; at
start-up the host removes those of children that no longer run (a host killed with its children).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import psutil
from structlog.stdlib import BoundLogger

SCRATCH = ".scratch"


def folder(artifacts: Path) -> Path:
    return artifacts / SCRATCH


def _owner(path: Path) -> int | None:
    prefix = path.name.split("-", 1)[0]
    return int(prefix) if prefix.isdigit() else None


def remove_child_scratch(artifacts: Path, pid: int) -> None:
    for path in folder(artifacts).glob(f"{pid}-*"):
        with contextlib.suppress(OSError):
            path.unlink()


def sweep(artifacts: Path, log: BoundLogger) -> int:
    """Remove scratch whose child is gone; failures are logged, never fatal."""
    removed = 0
    try:
        for path in folder(artifacts).iterdir():
            owner = _owner(path)
            if owner is None or not psutil.pid_exists(owner):
                path.unlink(missing_ok=True)
                removed += 1
    except FileNotFoundError:
        return 0
    except OSError as error:
        log.warning("scratch sweep failed", error=str(error))
    if removed:
        log.info("swept scratch left by killed children", files=removed)
    return removed
