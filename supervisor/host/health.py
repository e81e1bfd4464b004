"""Back-offs of a host whose own parts fail: children that keep dying, a database that is away.

Neither is the fault of a job, so neither fails one: the host waits longer between tries, says
it is unhealthy, and goes on. Each wait doubles per failure in a row up to a cap, stretched by
random jitter so that hosts that failed together do not retry together. Both take the time and
the randomness from the caller, so their decisions are tested with a fake clock.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

#: The longest spawning waits after children kept dying or forks kept failing.
SPAWN_BACKOFF_MAX_SECONDS = 60.0
#: The first wait after a fork failed, doubled per failure in a row up to the cap above.
FORK_RETRY_FIRST_SECONDS = 0.5
#: The first wait after a database error, doubled per failure in a row ...
DB_RETRY_FIRST_SECONDS = 0.5
#: ... up to this.
DB_RETRY_MAX_SECONDS = 30.0
#: Each wait is stretched by up to this fraction, at random.
JITTER = 0.25


def exponential(failures: int, first: float, cap: float, rand: random.Random) -> float:
    """`first * 2^(failures-1)`, capped, stretched by up to `JITTER` at random."""
    delay = min(cap, first * 2.0 ** min(failures - 1, 30))
    return delay * (1.0 + rand.uniform(0.0, JITTER))


@dataclass
class SpawnBackoff:
    """Children that died without completing a job, and forks that failed, so that spawning
    does not run in a tight loop."""

    limit: int
    window_seconds: float
    rand: random.Random
    deaths: deque[float] = field(default_factory=deque)
    backoff_seconds: float = 0.0
    #: Spawns in a row that failed (the kernel refused a fork, the fork server was gone).
    fork_failures: int = 0
    #: Why the last spawn failed, for `/healthz` while spawning backs off; cleared when children
    #: spawn again in the running host (`supervisor.host.children`).
    fork_error: str | None = None

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

    def fork_failed(self) -> float:
        """A spawn failed; the delay before the next try."""
        self.fork_failures += 1
        return exponential(
            self.fork_failures, FORK_RETRY_FIRST_SECONDS, SPAWN_BACKOFF_MAX_SECONDS, self.rand
        )

    def forked(self) -> bool:
        """Spawning works (again); True when it had been failing."""
        recovered, self.fork_failures = self.fork_failures > 0, 0
        return recovered

    @property
    def healthy(self) -> bool:
        """Not backing off (the health endpoint reports this)."""
        return self.backoff_seconds == 0.0 and self.fork_failures == 0


@dataclass
class DatabaseBackoff:
    """Steps that talk to the database wait out an outage instead of hammering the server.

    Only a step that reached the database clears the count: a step with nothing to ask (no job
    to check for a cancel) says nothing about whether the database is back.
    """

    rand: random.Random
    failures: int = 0
    retry_at: float = 0.0

    def ready(self, now: float) -> bool:
        """Whether the back-off after the last failure has passed."""
        return now >= self.retry_at

    def failed(self, now: float) -> float:
        """One more failure in a row; the delay before the next try."""
        self.failures += 1
        delay = exponential(self.failures, DB_RETRY_FIRST_SECONDS, DB_RETRY_MAX_SECONDS, self.rand)
        self.retry_at = now + delay
        return delay

    def succeeded(self) -> bool:
        """The database answered: the next failure starts from the first delay. True when it
        had been away."""
        recovered, self.failures = self.failures > 0, 0
        return recovered

    @property
    def healthy(self) -> bool:
        """The last step that reached the database succeeded."""
        return self.failures == 0
