"""Back-offs of a host whose own parts fail (`supervisor.host.health`), on a fake clock."""

from __future__ import annotations

from supervisor.host.health import (
    DB_RETRY_FIRST_SECONDS,
    DB_RETRY_MAX_SECONDS,
    SPAWN_BACKOFF_MAX_SECONDS,
    DatabaseBackoff,
    SpawnBackoff,
)


def test_restart_limit_backs_off_and_recovers() -> None:
    health = SpawnBackoff(limit=3, window_seconds=30.0)
    assert [health.child_failed(t) for t in (0.0, 1.0)] == [0.0, 0.0]
    assert health.child_failed(2.0) == 1.0 and not health.healthy
    assert health.child_failed(3.0) == 2.0
    health.child_succeeded()
    assert health.healthy and health.child_failed(100.0) == 0.0


def test_spawn_backoff_doubles_up_to_its_cap() -> None:
    spawning = SpawnBackoff(limit=1, window_seconds=30.0)
    delays = [spawning.child_failed(float(t)) for t in range(10)]
    assert delays[:4] == [1.0, 2.0, 4.0, 8.0]
    assert delays[-1] == SPAWN_BACKOFF_MAX_SECONDS


def test_deaths_outside_the_window_are_forgotten() -> None:
    spawning = SpawnBackoff(limit=3, window_seconds=30.0)
    assert spawning.child_failed(0.0) == spawning.child_failed(10.0) == 0.0
    assert spawning.child_failed(45.0) == 0.0, "the death at 0 s is out of the window"
    assert spawning.healthy


def test_database_retries_wait_longer_each_failure_in_a_row() -> None:
    database = DatabaseBackoff()
    assert database.ready(0.0)
    assert database.failed(0.0) == DB_RETRY_FIRST_SECONDS
    assert not database.ready(DB_RETRY_FIRST_SECONDS / 2)
    assert database.ready(DB_RETRY_FIRST_SECONDS)
    assert database.failed(1.0) == 2 * DB_RETRY_FIRST_SECONDS
    assert [database.failed(2.0) for _ in range(10)][-1] == DB_RETRY_MAX_SECONDS
    database.succeeded()
    assert database.failed(100.0) == DB_RETRY_FIRST_SECONDS
