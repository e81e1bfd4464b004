"""Poll and cancel-check cadence of the database queue (ADR 0006, decision 11).

Polling is the fallback: on PostgreSQL a NOTIFY wakes an idle host at once, but a host whose
listening connection dropped, and every host on SQLite, finds work by polling.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

#: Poll interval of an idle host, in seconds.
IDLE_POLL_SECONDS = 15.0
#: Poll interval while jobs were recently found, in seconds.
ACTIVE_POLL_SECONDS = 2.0
#: How long after the last job seen a host keeps polling at the active rate, in seconds.
ACTIVE_WINDOW_SECONDS = 60.0
#: Each delay is stretched by up to this fraction (never shortened, so idle stays >= 15 s), so
#: hosts started together drift apart instead of probing in lockstep.
POLL_JITTER = 0.2
#: How often a host reads its running jobs' rows for a cancel, in seconds (on SQLite the only
#: way it hears of one): this plus the child's grace to stop (`CANCEL_GRACE_SECONDS`, 2 s)
#: stays inside the 5 s within which a cancelled job is promised to end. The read is one
#: indexed statement over the host's own jobs.
CANCEL_CHECK_SECONDS = 2.0


@dataclass(frozen=True)
class Cadence:
    """Tunable cadence; tests shrink it, production uses the defaults above."""

    idle_seconds: float = IDLE_POLL_SECONDS
    active_seconds: float = ACTIVE_POLL_SECONDS
    active_window_seconds: float = ACTIVE_WINDOW_SECONDS
    jitter: float = POLL_JITTER

    def next_poll_delay(
        self,
        last_work_at: float | None,
        now: float,
        rand: Callable[[], float] = random.random,
    ) -> float:
        """Seconds until the next poll: active rate inside the window after the last job, else idle."""
        active = last_work_at is not None and now - last_work_at < self.active_window_seconds
        base = self.active_seconds if active else self.idle_seconds
        return base * (1 + self.jitter * min(max(rand(), 0.0), 0.999999))
