"""The loop's one wait: asleep until a child speaks, a NOTIFY or a signal arrives, or a duty is due.

Everything that can happen to a host wakes one `select`: each child's socket, the signal
socket (a stop signal, or SIGCHLD for a death: `supervisor.host.signals`), a fork server that
is starting, and the LISTEN connection on PostgreSQL (`supervisor.host.wakeup`). Its timeout is
the nearest deadline of the timers, never more than `LONGEST_WAIT_SECONDS`, so stalls, grace
periods and back-offs are checked on waking.
"""

from __future__ import annotations

import select
from collections.abc import Callable
from typing import Any

from supervisor.host.drain import Drain
from supervisor.host.exchange import Exchange
from supervisor.host.pool import Child, Pool
from supervisor.host.settle import Settler
from supervisor.host.signals import Signals
from supervisor.host.timers import ACK_DELAY_SECONDS, Timers
from supervisor.host.wakeup import Listener

#: The longest the loop sleeps: stalls, grace periods and back-offs are checked on waking.
LONGEST_WAIT_SECONDS = 1.0


class Waiting:
    """What wakes the loop, and what it reads when woken."""

    def __init__(
        self,
        pool: Pool,
        exchange: Exchange,
        settler: Settler,
        signals: Signals,
        listener: Listener | None,
        drain: Drain,
        timers: Timers,
        clock: Callable[[], float],
    ) -> None:
        self.pool = pool
        self.exchange = exchange
        self.settler = settler
        self.signals = signals
        self.listener = listener
        self.drain = drain
        self.timers = timers
        self.clock = clock

    def wait(self) -> None:
        """Sleep until a child speaks, a NOTIFY or signal arrives, or the next duty is due."""
        now = self.clock()
        timers = self.timers
        deadlines = [timers.cancel_check_at, timers.memory_check_at, now + LONGEST_WAIT_SECONDS]
        if any(child.idle for child in self.pool.children.values()):
            # A poll only matters with a child to give work, and not before claims may resume:
            # a poll due while they are paused would wake the loop at once, again and again.
            deadlines.append(max(timers.poll_at, timers.claims_paused_until))
        if self.drain.until is not None:
            deadlines.append(self.drain.until)
        if self.settler.completions_since is not None:
            deadlines.append(self.settler.completions_since + ACK_DELAY_SECONDS)
        timeout = max(0.0, min(deadlines) - now)
        sources: list[Any] = [self.signals, *self.pool.children.values()]
        starting = self.pool.starting
        if starting is not None and not self.drain.active and now >= timers.spawn_after:
            sources.append(starting)  # readable once it is ready or died: `Children.keep` looks
        listen_fd = self.listener.fileno() if self.listener else None
        if listen_fd is not None:
            sources.append(listen_fd)
        readable, _, _ = select.select(sources, [], [], timeout)
        for source in readable:
            if source is self.signals:
                self.signals.clear_wakeups()
            elif isinstance(source, Child):
                self.exchange.service(source)
            elif source is starting:
                continue
            elif self.listener is not None:
                self.heard(self.listener.drain())
        if self.listener is not None and self.listener.keep(self.clock()):
            timers.poll_at = 0.0  # we may have missed a NOTIFY meanwhile

    def read_ready(self) -> None:
        """Serve every child with something in its socket, without waiting."""
        children = list(self.pool.children.values())
        if children:
            readable, _, _ = select.select(children, [], [], 0)
            for child in readable:
                self.exchange.service(child)

    def heard(self, payloads: list[str]) -> None:
        """A NOTIFY: new work claims at once, a cancel is checked at once."""
        if "job" in payloads:
            self.timers.poll_at = 0.0
        if "cancel" in payloads:
            self.timers.cancel_check_at = 0.0
