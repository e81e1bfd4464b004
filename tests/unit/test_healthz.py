"""What `/healthz` answers, decided from what the loop knows."""

from __future__ import annotations

import threading

import pytest

from supervisor.metrics.health import (
    DATABASE_WAIT_SECONDS,
    STARTING,
    Health,
    HealthBoard,
    judge,
)


def decide(**given: object) -> Health:
    facts: dict[str, object] = {
        "engine_checked": True,
        "draining": None,
        "database_error": None,
        "spawn_deaths": None,
        "fork_error": None,
    }
    facts.update(given)
    return judge(**facts)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("given", "ok", "line"),
    [
        ({}, True, "ok"),
        ({"engine_checked": False}, False, "starting: engine not checked yet"),
        (
            {"database_error": "database unavailable: connection refused"},
            False,
            "unhealthy: cannot reach the database: database unavailable: connection refused",
        ),
        (
            {"spawn_deaths": 5},
            False,
            "unhealthy: backing off spawning after 5 children died",
        ),
        (
            {"fork_error": "cannot spawn a child: could not fork"},
            False,
            "unhealthy: backing off spawning: cannot spawn a child: could not fork",
        ),
        ({"draining": "SIGTERM"}, False, "draining: SIGTERM"),
        # Worst first: a draining host is draining whatever else is wrong.
        ({"draining": "SIGTERM", "database_error": "gone"}, False, "draining: SIGTERM"),
        (
            {"database_error": "gone", "spawn_deaths": 5},
            False,
            "unhealthy: cannot reach the database: gone",
        ),
    ],
)
def test_health_decisions(given: dict[str, object], ok: bool, line: str) -> None:
    health = decide(**given)
    assert (health.ok, health.line) == (ok, line)


def test_the_board_starts_as_starting_and_shows_the_latest_decision() -> None:
    board = HealthBoard()
    assert board.current is STARTING and not board.current.ok
    board.publish(decide())
    assert board.current.ok


def test_a_reader_thread_only_ever_sees_whole_decisions() -> None:
    board = HealthBoard()
    decisions = [decide(), decide(draining="SIGTERM"), decide(database_error="gone")]
    allowed = {(d.state, d.line) for d in decisions}
    seen: set[tuple[str, str]] = set()
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            current = board.current
            seen.add((current.state, current.line))

    reader = threading.Thread(target=read)
    reader.start()
    for index in range(20_000):
        board.publish(decisions[index % 3])
    done.set()
    reader.join()
    assert seen <= allowed | {(STARTING.state, STARTING.line)}


def test_a_database_call_held_past_the_bound_is_unhealthy_until_it_ends() -> None:
    """A statement to a database cut off the network neither answers nor fails for as long as
    TCP waits: the loop cannot publish meanwhile, so the board judges the wait itself."""
    now = [100.0]
    board = HealthBoard(clock=lambda: now[0])
    board.publish(decide())
    board.database_call_began()
    board.database_call_began()  # a second connection while the first is held
    board.database_call_ended()
    now[0] += DATABASE_WAIT_SECONDS - 0.1
    assert board.current.ok
    now[0] += 0.1
    assert board.current == Health("unhealthy", "unhealthy: waiting on the database for 8 s")
    board.publish(decide(draining="SIGTERM"))
    assert board.current.state == "draining"
    board.publish(decide())
    board.database_call_ended()
    assert board.current.ok
    now[0] += 60
    assert board.current.ok
