"""The parent's handle on the fork server (see `child.worker.forkserver` for why it exists).

`ForkServer.start()` must run before the parent opens a database connection or starts a thread:
the fork server is a copy of the parent at that moment, and every child is a copy of it. The
parent becomes a child subreaper first, so the children the fork server double-forks are
adopted by, reaped by, and die with the parent. The parent itself never imports the child code.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import time

import structlog

from ipc.forkserver import (
    READY,
    ForkRefused,
    ForkServerGone,
    read_ready,
    request_spawn,
    send_settings,
)
from ipc.logs import configured
from supervisor.host.ahead import adopt, fork_server

log = structlog.get_logger(__name__)

#: Importing the child code and libvips takes a second or two; the first start from a fresh
#: checkout also compiles the diff's loops into numba's cache (`child.diff.kernels`): about 10 s
#: on a quiet machine, past 30 under a load average of 12, where a shorter limit killed the
#: server again and again. The loop goes on meanwhile (`StartingForkServer`).
READY_TIMEOUT_SECONDS = 90.0
#: A spawn takes milliseconds; a fork server that does not answer within this is hung.
SPAWN_TIMEOUT_SECONDS = 10.0


class ForkServer:
    """The parent's end of the fork server's control socket, and its pid."""

    def __init__(self, pid: int, control: socket.socket) -> None:
        self.pid = pid
        self._control = control
        control.settimeout(SPAWN_TIMEOUT_SECONDS)

    @classmethod
    def start(cls) -> ForkServer:
        """Fork the fork server and wait until it has imported the child code.

        `ForkRefused` when the kernel refuses the fork, `ForkServerGone` when the new server
        died or hung before it was ready, `ForkServerError` when it cannot load the child code.
        """
        starting = StartingForkServer.fork()
        if not select.select([starting], [], [], READY_TIMEOUT_SECONDS)[0]:
            starting.give_up()
        server = starting.ready()
        assert server is not None, "readable: it answered or closed its socket"
        return server

    def spawn(self, threads: int) -> tuple[int, socket.socket]:
        """A new child (pid, and the parent's end of its socket)."""
        return request_spawn(self._control, threads)

    def stop(self) -> None:
        """Close the control socket; the fork server exits when it reads the end of it."""
        self._control.close()

    def kill(self) -> None:
        """End a fork server that stopped answering (it is reaped like any child)."""
        self._control.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)


class StartingForkServer:
    """A fork server forked but not ready yet: it imports the child code (seconds) while the
    host's loop goes on, and is asked whether it is ready when its socket becomes readable."""

    def __init__(self, pid: int, control: socket.socket, deadline: float) -> None:
        self.pid = pid
        self._control = control
        #: When it is given up on (monotonic seconds).
        self.deadline = deadline

    @classmethod
    def fork(cls) -> StartingForkServer:
        """Fork the fork server, or adopt the one forked ahead of the start-up
        (`supervisor.host.ahead`), sending it the environment and log settings it waits for;
        `ForkRefused` when the kernel refuses."""
        ahead = adopt()
        if ahead is not None:
            pid, control = ahead
            try:
                send_settings(control, dict(os.environ), configured())
            except OSError:  # it died: forked anew below (it is reaped like any child)
                control.close()
            else:
                return cls(pid, control, time.monotonic() + READY_TIMEOUT_SECONDS)
        try:
            pid, control = fork_server(ahead=False)
        except OSError as error:
            raise ForkRefused(f"cannot fork the fork server: {error.strerror}") from error
        return cls(pid, control, time.monotonic() + READY_TIMEOUT_SECONDS)

    def fileno(self) -> int:
        """Its control socket, for `select`: readable once it answered or died."""
        return self._control.fileno()

    def ready(self) -> ForkServer | None:
        """The fork server once it said it is ready; None while it still starts.

        `ForkServerGone` when it died or passed `READY_TIMEOUT_SECONDS` (it is killed),
        `ForkServerError` when it cannot load the child code.
        """
        if not select.select([self._control], [], [], 0)[0]:
            if time.monotonic() > self.deadline:
                self.give_up()
            return None
        try:
            answer = self._control.recv(4096)
        except OSError:
            answer = b""
        if answer != READY:
            self._control.close()
            if not answer:  # killed before it could say anything
                raise ForkServerGone("the fork server died while starting")
        read_ready(answer)
        log.debug("fork server ready", pid=self.pid)
        return ForkServer(self.pid, self._control)

    def give_up(self) -> None:
        """Kill a fork server that did not start in time; `ForkServerGone`."""
        self.kill()
        raise ForkServerGone("the fork server did not start in time")

    def kill(self) -> None:
        """Kill it while it starts (it is reaped like any child)."""
        self._control.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
