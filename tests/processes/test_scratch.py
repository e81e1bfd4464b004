"""What a child killed mid-write leaves in scratch is removed (`ipc.scratch`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psutil
from sqlalchemy import Engine

from tests.hosts import FAST, StartHost, ended, enqueue, running_child, wait_for


def half_written(artifacts: Path, child_pid: int) -> Path:
    """The scratch file the `half_write` kind left unfinished in `child_pid`, once it exists."""
    note = artifacts / f"half-written-{child_pid}"
    unfinished = Path(wait_for(lambda: note.exists() and note.read_text()))
    assert unfinished.exists() and unfinished.name.startswith(f"{child_pid}-")
    return unfinished


def test_a_child_killed_mid_write_has_its_scratch_removed(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    job_id = enqueue(engine, "half_write", {"artifacts": str(artifacts)}, max_attempts=10)
    host = start_host(*FAST, "--max-crashes", "1")
    child_pid = running_child(host, job_id)
    unfinished = half_written(artifacts, child_pid)
    os.kill(child_pid, signal.SIGKILL)
    assert ended(engine, job_id)["status"] == "failed"
    wait_for(lambda: not unfinished.exists())
    assert host.process.poll() is None


def test_scratch_left_by_a_killed_host_is_swept_by_the_next(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    job_id = enqueue(engine, "half_write", {"artifacts": str(artifacts)}, max_attempts=10)
    first = start_host(*FAST)
    child_pid = running_child(first, job_id)
    unfinished = half_written(artifacts, child_pid)
    first.process.kill()  # the host and, with it, its children: nobody removes the file
    first.process.wait(10)
    wait_for(lambda: not _alive(child_pid))
    assert unfinished.exists()
    second = start_host(*FAST)
    second.wait_for_event("host starting")
    assert not unfinished.exists()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for a parent that is gone."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
