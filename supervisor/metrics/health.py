"""What `/healthz` answers: whether a load balancer or an orchestrator should count on this host.

The loop thread decides and publishes; the HTTP server's thread reads. Each decision is a small
frozen `Health` that replaces the last one in a single reference assignment, so the reader
always sees one whole decision, never half of two, without a lock the loop could wait on.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

#: What the host is doing, as `/healthz` names it (the first word of its body).
HealthState = Literal[
    "starting",  # the image engine is not checked yet: the host may not claim
    "ok",  # the engine passed, the database answered, children spawn
    "unhealthy",  # the database is away, or spawning backs off
    "draining",  # told to stop: it claims nothing more
]


@dataclass(frozen=True)
class Health:
    """One decision: the state, and the line `/healthz` answers with."""

    state: HealthState
    line: str

    @property
    def ok(self) -> bool:
        """Whether `/healthz` answers 200 (503 otherwise)."""
        return self.state == "ok"


STARTING = Health("starting", "starting: engine not checked yet")


def judge(
    *,
    engine_checked: bool,
    draining: str | None,
    database_error: str | None,
    spawn_deaths: int | None,
    fork_error: str | None = None,
) -> Health:
    """The host's health from what the loop knows, worst first.

    `draining` is what started the drain (`SIGTERM`, `--drain`); `database_error` the last
    error while the database is away; `spawn_deaths` the children that died without a job when
    spawning backs off for it; `fork_error` why forks fail when they do.
    """
    if draining is not None:
        return Health("draining", f"draining: {draining}")
    if not engine_checked:
        return STARTING
    if database_error is not None:
        return Health("unhealthy", f"unhealthy: cannot reach the database: {database_error}")
    if fork_error is not None:
        return Health("unhealthy", f"unhealthy: backing off spawning: {fork_error}")
    if spawn_deaths is not None:
        return Health(
            "unhealthy",
            f"unhealthy: backing off spawning after {spawn_deaths} children died",
        )
    return Health("ok", "ok")


#: How long the loop may wait on one connection to the database before `/healthz` says so: our
#: transactions take milliseconds, and one cut off the network (a partition: the statement
#: neither answers nor fails) would otherwise look healthy until TCP gives up on it, 15 to 25 s.
DATABASE_WAIT_SECONDS = 8.0


class HealthBoard:
    """The latest decision, written by the loop and read by the server's thread, and since when
    the loop has waited on the database, if it does: the loop cannot publish while a statement
    blocks it, so the reader judges that wait itself, by `clock`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._current = STARTING
        self._clock = clock
        self._waiting_since: float | None = None
        self._held = 0

    def publish(self, health: Health) -> None:
        """Replace the decision (one reference assignment: atomic for the reader)."""
        self._current = health

    def database_call_began(self) -> None:
        """The loop took a connection to the database (the wait counts from its first)."""
        self._held += 1
        if self._held == 1:
            self._waiting_since = self._clock()

    def database_call_ended(self) -> None:
        """The loop gave a connection back (the wait ends with its last)."""
        self._held = max(0, self._held - 1)
        if self._held == 0:
            self._waiting_since = None

    @property
    def current(self) -> Health:
        """The loop's decision, unless it has waited on the database past
        `DATABASE_WAIT_SECONDS` meanwhile (a host starting or draining still says so)."""
        decided, since = self._current, self._waiting_since
        if since is None or decided.state in ("starting", "draining"):
            return decided
        waited = self._clock() - since
        if waited < DATABASE_WAIT_SECONDS:
            return decided
        return Health("unhealthy", f"unhealthy: waiting on the database for {waited:.0f} s")
