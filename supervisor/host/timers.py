"""When each of the loop's periodic duties is next due, read and moved by the parts of the loop.

One record rather than a deadline in each part, because the wait (`supervisor.host.waiting`)
sleeps until the earliest of them, and a message or a NOTIFY pulls one forward.
"""

from __future__ import annotations

from dataclasses import dataclass

#: How long finished jobs may wait to be acknowledged together (sooner with the next claim).
ACK_DELAY_SECONDS = 0.05


@dataclass
class Timers:
    """When each periodic duty is next due (monotonic seconds)."""

    poll_at: float = 0.0
    #: No claims before this (a child lacked resources: see `Exchange.unable`).
    claims_paused_until: float = 0.0
    cancel_check_at: float = 0.0
    memory_check_at: float = 0.0
    spawn_after: float = 0.0
