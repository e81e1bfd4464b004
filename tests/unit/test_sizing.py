"""Concurrency sized from the limits that bind: cgroup v2 and v1, affinity, memory."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from supervisor.host.cadence import Cadence
from supervisor.host.deaths import Kill, OomCounter, death_cause, describe_status
from supervisor.host.sizing import (
    GIB,
    cgroup_v1_limits,
    cgroup_v2_limits,
    own_cgroup_dir,
    size_host,
)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_takes_the_tightest_limit_of_the_lineage(tmp_path: Path) -> None:
    leaf = tmp_path / "system.slice" / "capture.service"
    write(tmp_path / "system.slice" / "cpu.max", "150000 100000\n")
    write(tmp_path / "system.slice" / "memory.max", str(4 * GIB))
    write(tmp_path / "system.slice" / "memory.current", str(1 * GIB))
    write(leaf / "cpu.max", "max 100000\n")
    write(leaf / "memory.max", str(2 * GIB))
    write(leaf / "memory.current", str(GIB // 2))
    assert cgroup_v2_limits(leaf, tmp_path) == (1.5, GIB + GIB // 2)


def test_own_cgroup_is_read_from_proc(tmp_path: Path) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    write(tmp_path / "proc", "0::/a/b\n")
    assert own_cgroup_dir(tmp_path, tmp_path / "proc") == tmp_path / "a" / "b"


def test_cgroup_v1_reads_quota_and_memory_limit_of_our_group(tmp_path: Path) -> None:
    write(tmp_path / "proc", "4:memory:/jobs/x\n2:cpu,cpuacct:/jobs/x\n")
    write(tmp_path / "cpu" / "jobs" / "x" / "cpu.cfs_quota_us", "200000")
    write(tmp_path / "cpu" / "jobs" / "x" / "cpu.cfs_period_us", "100000")
    write(tmp_path / "memory" / "jobs" / "x" / "memory.limit_in_bytes", str(3 * GIB))
    write(tmp_path / "memory" / "jobs" / "x" / "memory.usage_in_bytes", str(GIB))
    assert cgroup_v1_limits(tmp_path, tmp_path / "proc") == (2.0, 2 * GIB)


def test_unlimited_cgroup_v1_is_no_limit(tmp_path: Path) -> None:
    write(tmp_path / "proc", "4:memory:/\n")
    write(tmp_path / "memory" / "memory.limit_in_bytes", str(2**63 - 4096))
    write(tmp_path / "cpu" / "cpu.cfs_quota_us", "-1")
    assert cgroup_v1_limits(tmp_path, tmp_path / "proc") == (None, None)


def test_slots_fit_the_cpus_and_the_memory_and_say_why() -> None:
    sizing = size_host(child_memory_bytes=700 * 2**20)
    cpus = len(os.sched_getaffinity(0))
    assert 1 <= sizing.slots <= cpus
    assert sizing.slots * sizing.threads_per_child <= max(cpus, sizing.slots)
    assert f"{sizing.slots} slots: " in sizing.reason and "MiB per child" in sizing.reason


def test_memory_can_be_what_limits_the_slots() -> None:
    assert size_host(child_memory_bytes=2**50).slots == 1


def test_concurrency_override_wins() -> None:
    sizing = size_host(child_memory_bytes=700 * 2**20, override=7)
    assert sizing.slots == 7 and "(--concurrency)" in sizing.reason


@pytest.mark.parametrize(
    ("status", "expected"),
    [(signal.SIGSEGV, "SIGSEGV"), (signal.SIGABRT, "SIGABRT"), (3 << 8, "exit status 3")],
)
def test_wait_status_is_named(status: int, expected: str) -> None:
    assert describe_status(status) == expected


def test_sigkill_is_named_out_of_memory_when_the_cgroup_counted_one(tmp_path: Path) -> None:
    events = tmp_path / "memory.events"
    events.write_text("low 0\noom 0\noom_kill 2\n")
    oom = OomCounter(events)
    assert death_cause(signal.SIGKILL, oom) == "SIGKILL (likely out of memory)"
    events.write_text("low 0\noom 1\noom_kill 3\n")
    assert death_cause(signal.SIGKILL, oom) == "SIGKILL (out of memory)"
    assert death_cause(signal.SIGKILL, oom, killed=Kill("memory limit")) == "memory limit"


def test_poll_cadence_is_active_after_work_and_jittered_upwards() -> None:
    cadence = Cadence()
    assert cadence.next_poll_delay(None, 100.0, rand=lambda: 0.0) == 15.0
    assert cadence.next_poll_delay(90.0, 100.0, rand=lambda: 0.0) == 2.0
    assert cadence.next_poll_delay(30.0, 100.0, rand=lambda: 0.5) == pytest.approx(16.5)
    assert cadence.next_poll_delay(90.0, 100.0, rand=lambda: 1.0) < 2.0 * 1.2


def test_a_kill_reads_as_its_reason_with_what_was_wrong() -> None:
    assert Kill("memory limit").cause == "memory limit"
    assert Kill("hung", "no progress for 45 s").cause == "hung (no progress for 45 s)"
    assert Kill("protocol error", "undecodable frame").cause == "protocol error: undecodable frame"


def test_concurrency_far_above_what_memory_holds_is_capped_with_the_reason() -> None:
    per_child = 2**40  # a tebibyte per child: memory holds one
    sizing = size_host(child_memory_bytes=per_child, override=64)
    assert sizing.slots == 1
    assert "(--concurrency 64 capped by memory)" in sizing.reason
