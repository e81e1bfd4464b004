"""Signals, as the loop sees them: handlers only queue the signal and wake the loop's wait.

No work happens in a handler (it could interrupt a transaction halfway); the loop reads the
queue at the top of each turn. A socket pair carries the wake-up (`signal.set_wakeup_fd`), so a
signal or a child's death (SIGCHLD) ends the loop's `select` at once.
"""

from __future__ import annotations

import faulthandler
import signal
import socket
import time
from collections import deque

from ipc.messages import STACK_DUMP_SIGNAL

#: The signals that stop a host: the first drains it, a second releases everything at once.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class Signals:
    """The queue of stop signals and the socket that wakes the loop."""

    def __init__(self) -> None:
        self._queued: deque[int] = deque()
        self._wakeup_read: socket.socket | None = None
        self._wakeup_write: socket.socket | None = None

    def queue_stops(self) -> None:
        """From now on SIGTERM and SIGINT are queued (a signal while starting drains the host)."""
        for number in STOP_SIGNALS:
            signal.signal(number, lambda received, _frame: self._queued.append(received))

    def dump_stacks_on_request(self) -> None:
        """`STACK_DUMP_SIGNAL` (SIGUSR1, as for a child) writes every thread's stack to stderr,
        from C, so a host answers it even while stuck: what to ask of a host that stopped
        logging and ignores SIGTERM, before it is killed."""
        faulthandler.register(STACK_DUMP_SIGNAL, all_threads=True)

    def wake_on_signals(self) -> None:
        """Make signals (SIGCHLD included) wake the loop. Called after the first fork server is
        forked; one restarted later lets the socket go (`child.worker.forkserver`)."""
        self._wakeup_read, self._wakeup_write = socket.socketpair()
        self._wakeup_write.setblocking(False)
        self._wakeup_read.setblocking(False)
        signal.set_wakeup_fd(self._wakeup_write.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _received, _frame: None)

    def wait_for_stop(self, seconds: float) -> bool:
        """Sleep up to `seconds` (before the loop runs); True as soon as a stop signal is queued."""
        deadline = time.monotonic() + seconds
        while not self._queued:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(left, 0.05))
        return True

    def pop(self) -> signal.Signals | None:
        """The oldest queued stop signal, if any."""
        return signal.Signals(self._queued.popleft()) if self._queued else None

    def fileno(self) -> int:
        """Readable when a signal arrived (for `select`)."""
        assert self._wakeup_read is not None, "wake_on_signals() first"
        return self._wakeup_read.fileno()

    def clear_wakeups(self) -> None:
        """Empty the wake-up socket (the signals themselves are queued)."""
        assert self._wakeup_read is not None
        try:
            while self._wakeup_read.recv(4096):
                pass
        except BlockingIOError:
            return
