"""The host with real forked children and real signals, on PostgreSQL and SQLite (the tests of
supervision alone, `SUPERVISION_ONLY`, on SQLite)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from sqlalchemy import Engine

from ipc.messages import STACK_DUMP_SIGNAL
from supervisor.commands.main import main as cli_main
from tests.hosts import (
    FAST,
    ROOT,
    SUPERVISION_ONLY,
    StartHost,
    ended,
    enqueue,
    job,
    make_build,
    running_child,
    wait_for,
)


def test_host_runs_jobs_and_exits_when_the_queue_is_empty(
    engine: Engine, start_host: StartHost
) -> None:
    ids = [enqueue(engine, "noop", {"n": n}) for n in range(20)]
    host = start_host(*FAST, "--drain")
    assert host.wait() == 0
    assert {job(engine, job_id)["status"] for job_id in ids} == {"completed"}
    finished = host.events("job finished", outcome="completed")
    assert len(finished) == 20
    assert {"job_id", "build_id", "kind", "attempt", "child_pid"} <= set(finished[0])


def test_a_host_asked_for_its_threads_writes_their_stacks_and_goes_on(
    engine: Engine, start_host: StartHost
) -> None:
    """`STACK_DUMP_SIGNAL` shows where a host waits, from C, so even a stuck one answers."""
    host = start_host(*FAST)
    host.wait_for_event("host starting")
    host.signal(STACK_DUMP_SIGNAL)
    # The dump is written a line at a time, innermost frame first: the host's own frames come
    # last, so they are waited for, not read the moment the dump's first line appears.
    wait_for(lambda: "(most recent call first)" in host.log_path.read_text())
    wait_for(lambda: "supervisor/host/" in host.log_path.read_text())
    job_id = enqueue(engine, "noop", {"n": 1})
    assert ended(engine, job_id)["status"] == "completed"
    host.signal(signal.SIGTERM)
    assert host.wait() == 0


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_child_killed_mid_job_costs_a_retry_then_the_job_completes(
    engine: Engine, start_host: StartHost, sig: signal.Signals
) -> None:
    job_id = enqueue(engine, "sleep", {"seconds": 3.0, "step": 0.05})
    host = start_host(*FAST)
    pid = running_child(host, job_id)
    os.kill(pid, sig)
    row = ended(engine, job_id)
    assert (row["status"], row["crashes"], row["crash_causes"]) == (
        "completed",
        1,
        [sig.name if sig != signal.SIGKILL else "SIGKILL (likely out of memory)"],
    )
    assert row["attempt"] == 2
    assert host.process.poll() is None, "the host must survive its children"


def test_job_that_keeps_crashing_is_failed_while_others_complete(
    engine: Engine, start_host: StartHost
) -> None:
    poison = enqueue(engine, "crash", {"signal": "SIGSEGV"}, max_attempts=10)
    good = [enqueue(engine, "sleep", {"seconds": 0.2}) for _ in range(6)]
    start_host(*FAST, "--drain")
    row = ended(engine, poison)
    assert row["status"] == "failed"
    assert row["error"] == "crash kept crashing its worker: SIGSEGV x3"
    assert row["crashes"] == 3
    assert {ended(engine, job_id)["status"] for job_id in good} == {"completed"}


@SUPERVISION_ONLY
def test_a_failure_no_retry_can_mend_fails_on_its_first_attempt_while_others_retry(
    engine: Engine, start_host: StartHost
) -> None:
    final = enqueue(engine, "give_up", {"message": "webhook answered 410 Gone"})
    retried = enqueue(engine, "give_up", {"message": "later", "retry": True}, max_attempts=2)
    start_host(*FAST, "--drain")
    row = ended(engine, final)
    assert (row["status"], row["attempt"], row["error"]) == (
        "failed",
        1,
        "webhook answered 410 Gone",
    )
    row = ended(engine, retried)
    assert (row["status"], row["attempt"], row["error"]) == ("failed", 2, "later")


@SUPERVISION_ONLY
def test_a_hung_child_is_killed_after_the_stall_time(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "hang", {}, max_attempts=10)
    host = start_host(*FAST, "--max-crashes", "2")
    row = ended(engine, job_id, timeout=40)
    assert row["status"] == "failed"
    assert row["error"] == "hang kept crashing its worker: hung (no progress for 3 s) x2"
    # Before the kill, the child wrote where it hung: each thread's stack, into the host's log.
    log = host.log_path.read_text()
    assert len(re.findall(r'tests/kinds\.py", line \d+ in _hang', log)) == 2, log[-3000:]


@SUPERVISION_ONLY
def test_garbled_frame_kills_the_child_and_counts_a_crash(
    engine: Engine, start_host: StartHost
) -> None:
    job_id = enqueue(engine, "garble", {}, max_attempts=10)
    ok = enqueue(engine, "noop", {})
    host = start_host(*FAST, "--max-crashes", "1")
    row = ended(engine, job_id)
    assert row["status"] == "failed"
    assert "protocol error: undecodable frame" in row["error"]
    assert ended(engine, ok)["status"] == "completed"
    assert host.process.poll() is None


@SUPERVISION_ONLY
def test_oversized_frame_is_a_protocol_error(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "garble", {"hex": "7fffffff00"}, max_attempts=10)
    start_host(*FAST, "--max-crashes", "1")
    assert "exceeds the limit" in ended(engine, job_id)["error"]


def test_cancel_of_a_running_job_ends_it_within_five_seconds(
    engine: Engine, start_host: StartHost, database_url: str
) -> None:
    build = make_build(engine)
    job_id = enqueue(engine, "sleep", {"seconds": 60}, build_id=build)
    host = start_host(*FAST)
    pid = running_child(host, job_id)
    asked = time.monotonic()
    assert cli_main(["cancel", str(build), "--database-url", database_url]) == 0
    row = ended(engine, job_id, timeout=10)
    assert row["status"] == "cancelled"
    assert time.monotonic() - asked < 5.0
    assert host.wait_for_event("job finished", job_id=job_id)["outcome"] == "cancelled"
    assert psutil.pid_exists(pid), "a child that stops when asked is kept"


def test_sigterm_lets_running_jobs_finish(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "sleep", {"seconds": 1.5})
    host = start_host(*FAST)
    running_child(host, job_id)
    host.signal(signal.SIGTERM)
    assert host.wait() == 0
    assert job(engine, job_id)["status"] == "completed"


def test_drain_timeout_releases_jobs_without_spending_an_attempt(
    engine: Engine, start_host: StartHost
) -> None:
    job_id = enqueue(engine, "sleep", {"seconds": 60})
    host = start_host(*FAST, "--drain-seconds", "0.5")
    pid = running_child(host, job_id)
    host.signal(signal.SIGTERM)
    assert host.wait() == 0
    row = job(engine, job_id)
    assert (row["status"], row["attempt"], row["locked_by"], row["crashes"]) == (
        "queued",
        0,
        None,
        0,
    )
    assert wait_for(lambda: not psutil.pid_exists(pid))


def test_second_signal_releases_at_once(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "sleep", {"seconds": 60})
    host = start_host(*FAST, "--drain-seconds", "60")
    running_child(host, job_id)
    host.signal(signal.SIGTERM)
    host.wait_for_event("draining")
    host.signal(signal.SIGINT)
    assert host.wait(timeout=10) == 0
    assert job(engine, job_id)["status"] == "queued"


@SUPERVISION_ONLY
def test_child_over_the_hard_memory_limit_is_killed(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "eat", {"mib": 400, "seconds": 5}, max_attempts=10)
    start_host(*FAST, "--hard-rss-mib", "250", "--max-crashes", "1")
    row = ended(engine, job_id)
    assert row["status"] == "failed"
    assert row["error"] == "eat kept crashing its worker: memory limit x1"


@SUPERVISION_ONLY
def test_child_over_the_soft_memory_limit_is_recycled_after_its_job(
    engine: Engine, start_host: StartHost
) -> None:
    first = enqueue(engine, "eat", {"mib": 200, "seconds": 1.5})
    host = start_host(*FAST, "--concurrency", "1", "--soft-rss-mib", "150")
    pid = running_child(host, first)
    assert ended(engine, first)["status"] == "completed"
    wait_for(
        lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    )
    second = enqueue(engine, "sleep", {"seconds": 0.1})
    assert ended(engine, second)["status"] == "completed"
    assert job(engine, second)["child_pid"] is None
    assert host.events("child over the soft memory limit; recycling after its job")


@SUPERVISION_ONLY
def test_children_dying_too_fast_make_the_host_back_off_and_say_so(
    engine: Engine, start_host: StartHost
) -> None:
    for _ in range(4):
        enqueue(engine, "crash", {"signal": "SIGKILL"}, max_attempts=10)
    host = start_host(*FAST, "--max-crashes", "10")
    event = host.wait_for_event("host unhealthy: children keep dying; spawning backs off")
    assert event["backoff_seconds"] >= 1.0
    assert host.process.poll() is None


@SUPERVISION_ONLY
def test_children_die_with_the_host(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "sleep", {"seconds": 60})
    host = start_host(*FAST)
    pid = running_child(host, job_id)
    host.process.kill()
    host.process.wait()
    assert wait_for(
        lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
        5,
    )


def test_status_lists_running_jobs_with_their_child(
    engine: Engine, start_host: StartHost, database_url: str
) -> None:
    import json

    job_id = enqueue(engine, "sleep", {"seconds": 60})
    host = start_host(*FAST)
    pid = running_child(host, job_id)
    result = subprocess.run(
        [sys.executable, "-m", "supervisor", "status", "--json", "--database-url", database_url],
        capture_output=True, text=True, cwd=ROOT, check=True,
    )  # fmt: skip
    (running,) = json.loads(result.stdout)["running"]
    assert running["job_id"] == job_id and running["child_pid"] == pid and running["attempt"] == 1
    assert set(running) == {
        "job_id",
        "kind",
        "build_id",
        "attempt",
        "locked_by",
        "child_pid",
        "lease_expires_at",
    }
    assert host.stop(at_once=True) == 0


def catches(pid: int, signum: int) -> bool:
    """Whether process `pid` has a handler of its own for `signum` (/proc's `SigCgt` mask)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:")).split()[1]
    return bool(int(caught, 16) >> (signum - 1) & 1)


@SUPERVISION_ONLY
def test_sigterm_while_the_host_starts_drains_it_and_exits_0(
    engine: Engine, start_host: StartHost
) -> None:
    host = start_host(*FAST)
    # Its handlers in place (the fork server, forked ahead of them, may still be importing).
    wait_for(lambda: catches(host.pid, signal.SIGTERM), interval=0.002)
    host.signal(signal.SIGTERM)
    assert host.wait() == 0
    assert host.events("draining")


@SUPERVISION_ONLY
def test_killing_a_child_kills_what_it_started(engine: Engine, start_host: StartHost) -> None:
    job_id = enqueue(engine, "spawn", {}, max_attempts=10)
    host = start_host(*FAST, "--max-crashes", "1")
    pid = running_child(host, job_id)
    started = wait_for(lambda: psutil.Process(pid).children())
    assert ended(engine, job_id)["status"] == "failed"
    assert wait_for(
        lambda: all(not p.is_running() or p.status() == psutil.STATUS_ZOMBIE for p in started), 5
    )


@SUPERVISION_ONLY
def test_a_child_that_crashes_on_its_own_leaves_nothing_it_started(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    noted = tmp_path / "started"
    noted.mkdir()
    job_id = enqueue(engine, "spawn", {"crash_noting_to": str(noted)}, max_attempts=2)
    host = start_host(*FAST, "--max-crashes", "2")
    assert ended(engine, job_id)["status"] == "failed"
    started = [int(path.name) for path in noted.iterdir()]
    assert len(started) == 2
    assert wait_for(lambda: not any(_alive(pid) for pid in started), 5)
    host.stop()


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@SUPERVISION_ONLY
def test_host_sleeps_while_its_children_work(engine: Engine, start_host: StartHost) -> None:
    first, second = (enqueue(engine, "sleep", {"seconds": 6, "step": 1.0}) for _ in range(2))
    host = start_host(*FAST)
    running_child(host, first)
    running_child(host, second)
    process = psutil.Process(host.pid)
    before = process.cpu_times()
    time.sleep(2.0)
    after = process.cpu_times()
    busy = (after.user + after.system) - (before.user + before.system)
    assert busy < 0.5, f"the host used {busy:.2f} s of CPU in 2 s while only waiting"


ONE_CHILD = (*FAST, "--concurrency", "1")
GIVING_BACK = "giving back a job claimed ahead: its child is busy with a long one"


def short_jobs_then(engine: Engine, kind: str, data: dict[str, object]) -> tuple[int, list[int]]:
    """Enough short jobs for a host to claim ahead, then a `kind` job, then short jobs behind it."""
    for n in range(40):
        enqueue(engine, "noop", {"n": n})
    middle = enqueue(engine, kind, data)
    return middle, [enqueue(engine, "noop", {"n": n}) for n in range(10)]


def test_jobs_claimed_ahead_of_a_long_job_are_given_back_once(
    engine: Engine, start_host: StartHost
) -> None:
    long_job, behind = short_jobs_then(engine, "sleep", {"seconds": 2.5})
    host = start_host(*ONE_CHILD, "--drain")
    assert host.wait() == 0
    rows = [job(engine, job_id) for job_id in [long_job, *behind]]
    assert {(row["status"], row["attempt"]) for row in rows} == {("completed", 1)}
    given_back = [event["job_id"] for event in host.events(GIVING_BACK)]
    assert given_back, "short jobs queued behind the long one were claimed ahead"
    assert set(given_back) <= set(behind)
    assert len(given_back) == len(set(given_back)), "nothing is claimed again behind a long job"


def test_jobs_claimed_ahead_for_a_child_that_dies_are_released_not_crashed(
    engine: Engine, start_host: StartHost
) -> None:
    doomed, behind = short_jobs_then(engine, "sleep", {"seconds": 3.0})
    host = start_host(*ONE_CHILD, "--drain")
    pid = running_child(host, doomed, timeout=60)
    wait_for(lambda: any(job(engine, job_id)["child_pid"] == pid for job_id in behind), 5.0)
    os.kill(pid, signal.SIGKILL)
    assert host.wait() == 0
    assert (job(engine, doomed)["crashes"], job(engine, doomed)["status"]) == (1, "completed")
    for job_id in behind:
        row = job(engine, job_id)
        assert (row["status"], row["attempt"], row["crashes"]) == ("completed", 1, 0)
    released = {e["job_id"] for e in host.events("job finished", outcome="released")}
    assert released and released <= set(behind)
