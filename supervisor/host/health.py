"""Back-offs of a host whose own parts fail: children that keep dying, a database that is away.

Neither is the fault of a job, so neither fails one: the host waits longer between tries, says
it is unhealthy, and goes on. Both take the time from the caller, so their decisions are tested
with a fake clock.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: The longest spawning waits after children kept dying.
SPAWN_BACKOFF_MAX_SECONDS = 60.0
#: The first wait after a database error, doubled per failure in a row ...
DB_RETRY_FIRST_SECONDS = 0.5
#: ... up to this.
DB_RETRY_MAX_SECONDS = 10.0


@dataclass
class SpawnBackoff:
    """Children that died without completing a job, to stop spawning them in a tight loop."""

    limit: int
    window_seconds: float
    deaths: deque[float] = field(default_factory=deque)
    backoff_seconds: float = 0.0

    def child_failed(self, now: float) -> float:
        """Record a fruitless death; the delay before the next spawn (0 while under the limit)."""
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > self.window_seconds:
            self.deaths.popleft()
        if len(self.deaths) < self.limit:
            return 0.0
        self.backoff_seconds = min(SPAWN_BACKOFF_MAX_SECONDS, max(1.0, self.backoff_seconds * 2))
        return self.backoff_seconds

    def child_succeeded(self) -> None:
        """A child finished a job: the host is healthy again."""
        self.deaths.clear()
        self.backoff_seconds = 0.0

    @property
    def healthy(self) -> bool:
        """Not backing off (the health endpoint reports this)."""
        return self.backoff_seconds == 0.0


@dataclass
class DatabaseBackoff:
    """Steps that talk to the database wait out an outage instead of hammering the server."""

    failures: int = 0
    retry_at: float = 0.0

    def ready(self, now: float) -> bool:
        """Whether the back-off after the last failure has passed."""
        return now >= self.retry_at

    def failed(self, now: float) -> float:
        """One more failure in a row; the delay before the next try."""
        self.failures += 1
        delay = min(DB_RETRY_MAX_SECONDS, DB_RETRY_FIRST_SECONDS * 2.0 ** min(self.failures - 1, 6))
        self.retry_at = now + delay
        return delay

    def succeeded(self) -> None:
        """The database answered: the next failure starts from the first delay."""
        self.failures = 0
