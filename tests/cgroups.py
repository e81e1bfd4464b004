"""A pids cgroup of the test's own, to make the kernel refuse forks and threads for real."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts import wait_for

PIDS_CGROUPS = Path("/sys/fs/cgroup/pids")


@contextlib.contextmanager
def pids_cgroup(name: str) -> Iterator[Path]:
    """A pids cgroup of our own (cgroup v1 or v2); skips where none can be made. Processes in
    it are moved back to the root when it is removed."""
    root = PIDS_CGROUPS if PIDS_CGROUPS.is_dir() else Path("/sys/fs/cgroup")
    group = root / f"storyshelf-test-{name}-{os.getpid()}"
    try:
        group.mkdir()
        (group / "pids.max").write_text("max")
    except OSError as error:
        with contextlib.suppress(OSError):
            group.rmdir()
        pytest.skip(f"no writable pids cgroup to refuse forks with: {error}")
    try:
        yield group
    finally:
        with contextlib.suppress(OSError):
            (group / "pids.max").write_text("max")
        for pid in (group / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):
                (root / "cgroup.procs").write_text(pid)
        wait_for(lambda: not (group / "cgroup.procs").read_text().strip(), timeout=10)
        group.rmdir()


def confine(group: Path, pid: int, limit: int | str) -> None:
    """Move `pid` into `group` and cap the tasks the group may have."""
    (group / "cgroup.procs").write_text(str(pid))
    (group / "pids.max").write_text(str(limit))
