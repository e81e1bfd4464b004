"""What a job kind's handler is to the child's loop, built-in or plugged in (`ipc.plugins`).

A handler gets the payload the parent prepared (everything it needs: the child never opens the
database) and a `progress` callback to call after each unit of work, which renews the job's
lease and proves the child is not hung. It returns the result (msgpack-able) or raises; a raised
error is sent to the parent, which retries the job with backoff, unless it is a
`ipc.failures.PermanentFailure`: that job fails at once.

The handlers' own modules import these types from here, never the registry of handlers
(`child.worker.handlers`), which imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Progress = Callable[[dict[str, Any]], None]
Handler = Callable[[dict[str, Any], Progress], Any]
#: Starts what coming jobs will need while the child is idle (`ipc.messages.Warm`, whose `build`
#: it gets), calling the beat it is given at least every second of its start.
Warmer = Callable[[dict[str, Any] | None, Callable[[], None]], None]
