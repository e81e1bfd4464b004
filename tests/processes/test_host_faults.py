"""Faults of the host's own parts, which must cost no job and never end the host: forks that
the kernel refuses, a fork server that dies, children that never say hello, a child that dies
right after acknowledging its job, a payload too large to hand over, a kind whose bookkeeping
raises. Real processes, real signals, a real pids cgroup; PostgreSQL and SQLite."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import Engine, select

from supervisor.db.tables import builds, jobs
from tests.capture_helpers import upload, write_png
from tests.cgroups import confine, pids_cgroup
from tests.hosts import (
    FAST,
    ROOT,
    SUPERVISION_ONLY,
    HostProcess,
    StartHost,
    ended,
    enqueue,
    wait_for,
)


def fork_server_of(host: HostProcess) -> psutil.Process:
    """The host's fork server: its one child that is not a session leader (children call
    setsid, the fork server does not)."""

    def find() -> psutil.Process | None:
        for process in psutil.Process(host.pid).children():
            with contextlib.suppress(psutil.Error, OSError):
                if os.getsid(process.pid) != process.pid and process.status() != "zombie":
                    return process
        return None

    return wait_for(find)


def ready_children(host: HostProcess, count: int) -> list[int]:
    """Pids of `count` children that said hello (each logs `child ready`)."""

    def ready() -> list[int] | None:
        pids = [int(event["child_pid"]) for event in host.events("child ready")]
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        return alive[-count:] if len(alive) >= count else None

    return wait_for(ready)


@SUPERVISION_ONLY
@pytest.mark.parametrize(
    ("refused", "headroom"),
    [("the fork server's fork", 0), ("the intermediate's fork", 1)],
)
def test_refused_forks_back_off_and_recover(
    engine: Engine, start_host: StartHost, refused: str, headroom: int
) -> None:
    """With no room for a fork (or room for the intermediate only, whose own fork then fails),
    the host says it is unhealthy, keeps going, and spawns again once forks work."""
    host = start_host(*FAST, "--concurrency", "1")
    [child] = ready_children(host, 1)
    fork_server = fork_server_of(host)
    with pids_cgroup("refuse") as group:
        confine(group, fork_server.pid, 1 + headroom)
        os.kill(child, signal.SIGKILL)
        unhealthy = host.wait_for_event("host unhealthy: cannot spawn a child; spawning backs off")
        assert "could not fork" in unhealthy["error"], unhealthy
        job_id = enqueue(engine, "sleep", {"seconds": 0.1})
        time.sleep(1.5)
        assert host.process.poll() is None, host.log_tail()
        assert len(host.events("host unhealthy: cannot spawn a child; spawning backs off")) >= 2
        assert fork_server.is_running() and fork_server.children() == [], (
            "no intermediate is left serving the fork server's socket"
        )
        (group / "pids.max").write_text("max")
        assert ended(engine, job_id)["status"] == "completed"
    host.wait_for_event("host healthy again: children spawn")
    assert host.stop() == 0


@SUPERVISION_ONLY
def test_a_fork_server_that_cannot_be_restarted_is_retried(
    engine: Engine, start_host: StartHost
) -> None:
    """The fork server dies while the host itself may not fork: the host waits it out."""
    host = start_host(*FAST, "--concurrency", "1")
    [child] = ready_children(host, 1)
    fork_server = fork_server_of(host)
    with pids_cgroup("restart") as group:
        confine(group, host.pid, 1)
        fork_server.kill()
        os.kill(child, signal.SIGKILL)
        # The first spawn may meet the dead server's socket first ("unreachable"); the restart
        # that follows is refused a fork.
        wait_for(
            lambda: any(
                "cannot fork the fork server" in event["error"]
                for event in host.events("host unhealthy: cannot spawn a child; spawning backs off")
            )
        )
        job_id = enqueue(engine, "sleep", {"seconds": 0.1})
        time.sleep(1.0)
        assert host.process.poll() is None, host.log_tail()
        (group / "pids.max").write_text("max")
        assert ended(engine, job_id)["status"] == "completed"
    assert host.stop() == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_fork_server_killed_around_a_spawn_is_replaced(
    engine: Engine, start_host: StartHost, sig: signal.Signals
) -> None:
    """The fork server dies at the moment a child must be replaced, again and again (15 s
    each, on one database: the fork server never touches it)."""
    host = start_host(*FAST, "--concurrency", "2")
    for _ in range(3):
        children = ready_children(host, 2)
        fork_server = fork_server_of(host)
        fork_server.send_signal(sig)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda old=fork_server.pid: fork_server_of(host).pid != old)  # type: ignore[misc]
    ids = [enqueue(engine, "sleep", {"seconds": 0.1}) for _ in range(6)]
    assert {ended(engine, job_id)["status"] for job_id in ids} == {"completed"}
    assert len(host.events("fork server started")) >= 2
    assert host.process.poll() is None
    assert host.stop() == 0


@SUPERVISION_ONLY
def test_a_child_that_never_says_hello_is_killed_and_replaced(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "silent"
    os.environ["SILENT_CHILDREN_MARKER"] = str(marker)
    host = HostProcess(
        database_url,
        tmp_path / "artifacts",
        *FAST,
        "--concurrency",
        "1",
        plugins="tests.kinds,tests.silent_children",
    )
    try:
        [child] = ready_children(host, 1)
        marker.touch()
        os.kill(child, signal.SIGKILL)
        killed = host.wait_for_event("killing child", reason="hung (no hello within 3 s)")
        assert killed["child_pid"] != child
        job_id = enqueue(engine, "sleep", {"seconds": 0.1})
        marker.unlink()
        assert ended(engine, job_id, timeout=60)["status"] == "completed"
        assert host.stop() == 0
    finally:
        del os.environ["SILENT_CHILDREN_MARKER"]
        if host.process.poll() is None:
            host.process.kill()


def test_a_child_that_dies_right_after_accepting_counts_a_crash(
    engine: Engine, start_host: StartHost
) -> None:
    """Its `Accepted` may still be unread when its death is (the host was busy settling other
    jobs): the death is a crash of the job all the same, never a death before the job."""
    busy = [enqueue(engine, "sleep", {"seconds": 0.02}) for _ in range(40)]
    crashing = [
        enqueue(engine, "crash", {"signal": "SIGKILL", "quiet": True}, max_attempts=10)
        for _ in range(10)
    ]
    host = start_host(*FAST, "--max-crashes", "1")
    for job_id in crashing:
        row = ended(engine, job_id, timeout=60)
        assert (row["status"], row["crashes"]) == ("failed", 1), row
    assert {ended(engine, job_id)["status"] for job_id in busy} == {"completed"}
    assert host.events("child died before accepting the job; giving it back") == []


@SUPERVISION_ONLY
def test_a_payload_too_large_for_a_frame_fails_its_job_only(
    engine: Engine, start_host: StartHost
) -> None:
    huge = enqueue(engine, "huge", {})
    fine = enqueue(engine, "sleep", {"seconds": 0.1})
    host = start_host(*FAST)
    row = ended(engine, huge)
    assert row["status"] == "failed"
    assert row["error"] == (
        "cannot hand the job to a child: its data of 17.0 MiB exceeds the 16 MiB frame limit"
    )
    assert row["attempt"] == 1, "a payload that cannot fit is not retried"
    assert ended(engine, fine)["status"] == "completed"
    assert host.process.poll() is None


def test_bookkeeping_that_raises_fails_the_job_and_the_host_goes_on(
    engine: Engine, start_host: StartHost
) -> None:
    broken = enqueue(engine, "fail_badly", {}, max_attempts=1)
    host = start_host(*FAST)
    row = ended(engine, broken)
    assert row["status"] == "failed"
    assert host.wait_for_event("cannot close the failed job's build")
    after = enqueue(engine, "sleep", {"seconds": 0.1})
    assert ended(engine, after)["status"] == "completed"
    assert host.process.poll() is None


@SUPERVISION_ONLY
def test_a_child_without_threads_gives_its_job_back_unspent_and_the_build_ends_well(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    """A pids limit that leaves libvips no thread is the host's trouble: the capture job goes
    back without spending an attempt (no snapshot recorded as damaged), and runs once the
    limit is lifted."""
    host = start_host(*FAST, "--concurrency", "1")
    [child] = ready_children(host, 1)
    with pids_cgroup("threads") as group:
        confine(group, child, "max")
        (group / "pids.max").write_text((group / "pids.current").read_text().strip())
        for name in ("a", "b"):
            write_png(tmp_path / "shots" / f"{name}.png", marks=((8, 8, 20, 10),))
        queued = upload(engine, tmp_path / "artifacts", tmp_path / "shots")
        unable = host.wait_for_event("host unhealthy: a child lacks resources; giving its job back")
        assert "thread" in unable["reason"], unable
        # While its claims are paused the host waits; it must not spin on a poll that is due.
        host_process = psutil.Process(host.pid)
        before = sum(host_process.cpu_times()[:2])
        time.sleep(1.5)
        spent = sum(host_process.cpu_times()[:2]) - before
        assert spent < 0.5, f"the host spent {spent:.2f} CPU s in 1.5 s with its claims paused"
        (group / "pids.max").write_text("max")
        with engine.connect() as conn:
            [job_id] = conn.execute(
                select(jobs.c.id).where(jobs.c.build_id == queued.build_id)
            ).scalars()
        row = ended(engine, job_id)
    assert (row["status"], row["attempt"], row["crashes"]) == ("completed", 1, 0), row
    with engine.connect() as conn:
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert build.status == "passed"
    assert host.stop() == 0


RESTART = """
import os, random, time
from supervisor.host.pool import Pool
pool = Pool(None, 1, 10, random.Random(0))
began = time.monotonic()
assert not pool.restart_fork_server() and pool.starting is not None
forked = time.monotonic() - began
while not pool.restart_fork_server():
    time.sleep(0.005)
ready = time.monotonic() - began
assert pool.starting is None and pool.fork_server is not None
pid = pool.fork_server.pid
pool.stop_fork_server()
os.waitpid(pid, 0)
print(forked, ready)
"""


def test_a_fork_server_restart_does_not_wait_for_it_to_load_the_child_code() -> None:
    """The loop goes on while a new fork server imports the child code (seconds): children
    that must be heard meanwhile are not taken for hung because the host was waiting."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", RESTART], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    forked, ready = map(float, out.stdout.splitlines()[-1].split())
    assert forked < ready / 4, f"the first call took {forked:.3f} s of the {ready:.3f} s start"
