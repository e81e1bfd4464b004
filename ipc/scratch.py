"""Scratch files: where a child writes what it has not finished, so a killed child's leftovers
are found and removed.

The contract: a child writes every unfinished file as `<artifacts>/.scratch/<pid>-<name>` and
renames it into place once complete, so a file in there is always unfinished work and its name
says whose. The parent removes a dead child's files when it reaps it, and at start-up those of
children that no longer run (`supervisor.host.scratch`). The folder is under the artifacts root,
so the rename into place never crosses a filesystem.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path

FOLDER = ".scratch"

_serial = itertools.count()


def folder(artifacts: Path) -> Path:
    return artifacts / FOLDER


def owner(path: Path) -> int | None:
    """The pid that wrote a scratch file, from its name; None for a name that is not ours."""
    prefix = path.name.split("-", 1)[0]
    return int(prefix) if prefix.isdigit() else None


def new_file(artifacts: Path, suffix: str) -> Path:
    """A fresh scratch path of this process (its folder made), e.g. `.scratch/4242-7.png`."""
    scratch = folder(artifacts)
    scratch.mkdir(parents=True, exist_ok=True)
    return scratch / f"{os.getpid()}-{next(_serial)}{suffix}"
