"""Back-offs of a host whose own parts fail (`supervisor.host.health`), on a fake clock."""

from __future__ import annotations

import random

import pytest

from supervisor.host.health import (
    DB_RETRY_FIRST_SECONDS,
    DB_RETRY_MAX_SECONDS,
    FORK_RETRY_FIRST_SECONDS,
    JITTER,
    SPAWN_BACKOFF_MAX_SECONDS,
    DatabaseBackoff,
    SpawnBackoff,
)


def spawn_backoff(limit: int) -> SpawnBackoff:
    return SpawnBackoff(limit=limit, window_seconds=30.0, rand=random.Random(1))


def test_restart_limit_backs_off_and_recovers() -> None:
    health = spawn_backoff(3)
    assert [health.child_failed(t) for t in (0.0, 1.0)] == [0.0, 0.0]
    assert health.child_failed(2.0) == 1.0 and not health.healthy
    assert health.child_failed(3.0) == 2.0
    health.child_succeeded()
    assert health.healthy and health.child_failed(100.0) == 0.0


def test_spawn_backoff_doubles_up_to_its_cap() -> None:
    spawning = spawn_backoff(1)
    delays = [spawning.child_failed(float(t)) for t in range(10)]
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert delays[-1] == SPAWN_BACKOFF_MAX_SECONDS


def test_deaths_outside_the_window_are_forgotten() -> None:
    spawning = spawn_backoff(3)
    assert spawning.child_failed(0.0) == spawning.child_failed(10.0) == 0.0
    assert spawning.child_failed(45.0) == 0.0, "the death at 0 s is out of the window"
    assert spawning.healthy


def test_failed_forks_back_off_with_jitter_until_one_works() -> None:
    spawning = spawn_backoff(3)
    delays = [spawning.fork_failed() for _ in range(12)]
    assert not spawning.healthy
    for failures, delay in enumerate(delays, start=1):
        exact = min(SPAWN_BACKOFF_MAX_SECONDS, FORK_RETRY_FIRST_SECONDS * 2 ** (failures - 1))
        assert exact <= delay <= exact * (1 + JITTER)
    assert len(set(delays[-3:])) == 3, "capped delays still differ: hosts do not retry in step"
    assert spawning.forked(), "the first spawn that works says the host recovered"
    assert spawning.healthy and not spawning.forked()


def test_database_retries_wait_longer_each_failure_in_a_row() -> None:
    database = DatabaseBackoff(random.Random(2))
    assert database.ready(0.0)
    first = database.failed(0.0)
    assert first == pytest.approx(DB_RETRY_FIRST_SECONDS, rel=JITTER)
    assert not database.ready(DB_RETRY_FIRST_SECONDS / 2)
    assert database.ready(first)
    assert database.failed(1.0) >= 2 * DB_RETRY_FIRST_SECONDS
    capped = [database.failed(2.0) for _ in range(12)][-1]
    assert DB_RETRY_MAX_SECONDS <= capped <= DB_RETRY_MAX_SECONDS * (1 + JITTER)
    assert not database.healthy
    assert database.succeeded(), "the first answer after failures is a recovery"
    assert database.healthy and not database.succeeded()
    assert database.failed(100.0) < 2 * DB_RETRY_FIRST_SECONDS
