"""The host against what surrounds it: a database that is not there, a clock that disagrees with
the database's, descriptors that must not cross a fork, a cancel that must land in 5 s."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import Engine, text

from supervisor.commands.main import main as cli_main
from supervisor.db import queue
from supervisor.db.connection import is_postgres, transaction
from tests.hosts import FAST, ROOT, StartHost, ended, enqueue, make_build, running_child, wait_for
from tests.processes.test_host_faults import fork_server_of, ready_children


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_database_that_is_not_there_is_waited_for_quietly_and_sigterm_still_stops(
    tmp_path: Path,
) -> None:
    url = f"postgresql+psycopg://storyshelf@127.0.0.1:{free_port()}/nowhere"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STORYSHELF_LOG_LEVEL": "info"}
    command = [sys.executable, "-m", "supervisor", "run", "--database-url", url,
               "--artifacts", str(tmp_path / "artifacts"), "--concurrency", "1"]  # fmt: skip
    host = subprocess.Popen(command, env=env, cwd=ROOT, stderr=subprocess.PIPE, text=True)
    time.sleep(12)
    host.send_signal(signal.SIGTERM)
    asked = time.monotonic()
    _, stderr = host.communicate(timeout=10)
    assert host.returncode == 0, stderr[-3000:]
    assert time.monotonic() - asked < 3.0, "SIGTERM ends a host that waits for its database"
    waits = [line for line in stderr.splitlines() if "waiting for the database" in line]
    # Backing off 0.5, 1, 2, 4, 8 s (plus jitter) leaves room for about five tries in 12 s.
    assert 2 <= len(waits) <= 7, "\n".join(waits)
    listens = [line for line in stderr.splitlines() if "listen connection failed" in line]
    assert len(listens) <= 4, "\n".join(listens)


def inet_connections(pid: int) -> list[str]:
    return [f"{c.laddr} -> {c.raddr}" for c in psutil.Process(pid).net_connections(kind="inet")]


def database_files(pid: int, database: Path) -> list[str]:
    return [f.path for f in psutil.Process(pid).open_files() if f.path.startswith(str(database))]


def test_no_database_connection_or_file_crosses_a_fork(
    engine: Engine, database_url: str, tmp_path: Path, start_host: StartHost
) -> None:
    """`run --migrate` opens the database before the fork server starts; a fork server
    restarted later is a copy of a parent holding connections, the LISTEN socket and, on SQLite,
    the `.db`, `-wal` and `-shm` files. None of it reaches the fork server or a child."""
    database = Path(engine.url.database or "") if not is_postgres(engine) else Path("/nonexistent")
    host = start_host(*FAST, "--concurrency", "1", "--migrate")
    job_id = enqueue(engine, "sleep", {"seconds": 0.1})
    assert ended(engine, job_id)["status"] == "completed"
    if is_postgres(engine):
        assert inet_connections(host.pid), "the parent itself holds database connections"
    else:
        assert database_files(host.pid, database), "the parent itself holds the database files"
    for generation in ("first", "restarted"):
        fork_server = fork_server_of(host)
        [child] = ready_children(host, 1)
        for pid in (fork_server.pid, child):
            assert inet_connections(pid) == [], f"{generation} fork server or its child, {pid}"
            assert database_files(pid, database) == [], f"{generation}: {pid}"
        fork_server.kill()
        os.kill(child, signal.SIGKILL)
        wait_for(lambda old=fork_server.pid: fork_server_of(host).pid != old)  # type: ignore[misc]
        wait_for(lambda old=child: ready_children(host, 1) != [old])  # type: ignore[misc]
    assert host.stop() == 0


def test_a_hung_job_that_is_cancelled_ends_within_five_seconds(
    engine: Engine, start_host: StartHost, database_url: str
) -> None:
    """The child cannot read the cancel (it hangs in native-like silence): the cancel check and
    the grace before the kill still fit in 5 s, on SQLite too (which has no NOTIFY)."""
    build = make_build(engine)
    job_id = enqueue(engine, "hang", {}, build_id=build)
    host = start_host("--concurrency", "1", "--lease-seconds", "60", "--stall-seconds", "40",
                      "--poll-seconds", "0.3")  # fmt: skip
    running_child(host, job_id)
    time.sleep(0.5)
    asked = time.monotonic()
    assert cli_main(["cancel", str(build), "--database-url", database_url]) == 0
    row = ended(engine, job_id, timeout=10)
    assert row["status"] == "cancelled"
    assert time.monotonic() - asked < 5.0


def commit_count(engine: Engine) -> int:
    """Transactions committed in the test's database so far (PostgreSQL's statistics)."""
    with engine.connect() as conn:
        count = conn.execute(
            text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
        ).scalar_one()
    return int(count)


def faketime_library() -> Path | None:
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib"):
        library = Path(folder) / "faketime" / "libfaketime.so.1"
        if library.exists():
            return library
    return None


@pytest.mark.parametrize("shift", ["+30s", "-30s"])
def test_a_host_whose_clock_disagrees_with_the_database_neither_spins_nor_waits(
    engine: Engine, database_url: str, tmp_path: Path, shift: str
) -> None:
    """Due, expired and backoff are decided on the database's clock: a job due in 3 s by it
    starts after about 3 s on a host 30 s ahead or behind, and the host does not spin."""
    if not is_postgres(engine):
        pytest.skip("SQLite has no clock of its own: every host on the file shares the machine's")
    library = faketime_library()
    if library is None:
        if os.environ.get("CI") == "true":
            pytest.fail("libfaketime is required in CI (apt-get install faketime)")
        pytest.skip("libfaketime is not installed")
    env = {
        **os.environ,
        "LD_PRELOAD": str(library),
        # A fixed offset moves the monotonic clock too, which changes no interval; leaving it
        # unfaked breaks Python's absolute-deadline sleeps under libfaketime 0.9.
        "FAKETIME": shift,
        "STORYSHELF_PLUGINS": "tests.kinds",
        "PYTHONPATH": str(ROOT),
    }
    command = [sys.executable, "-m", "supervisor", "run", "--database-url", database_url,
               "--artifacts", str(tmp_path / "artifacts"), *FAST]  # fmt: skip
    log = (tmp_path / "host.log").open("wb")
    host = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    try:
        before = commit_count(engine)
        with transaction(engine) as conn:
            job_id = queue.enqueue(conn, "sleep", {"seconds": 0.1}, delay_seconds=3.0)
        enqueued = time.monotonic()
        row = ended(engine, job_id, timeout=20)
        took = time.monotonic() - enqueued
        assert row["status"] == "completed"
        assert 2.0 < took < 8.0, f"a job due in 3 s started after {took:.1f} s"
        cpu = psutil.Process(host.pid).cpu_times()
        commits = commit_count(engine) - before
        assert commits < 400, f"{commits} commits for one delayed job: the host spins"
        assert cpu.user + cpu.system < 3.0, cpu
    finally:
        host.send_signal(signal.SIGTERM)
        host.wait(30)
        log.close()
