"""The children: spawning them through the fork server, talking to them, killing and reaping them.

One child per slot, each with its own socket. The pool knows processes, not jobs: the host
decides what a child's death means. Children are killed by process group, so whatever a child
started dies with it; they are reaped here because the parent adopted them (see
`supervisor.host.forkserver`). Every kill is the parent's: code inside a child cannot interrupt
native code.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import structlog

from ipc.forkserver import ForkServerError, ForkServerGone
from ipc.framing import FrameReader, encode
from ipc.messages import (
    STACK_DUMP_SIGNAL,
    TO_PARENT,
    Hello,
    ProtocolError,
    ToChild,
    ToParent,
)
from supervisor.host.deaths import Kill, KillReason
from supervisor.host.forkserver import ForkServer, StartingForkServer

log = structlog.get_logger(__name__)

#: Jobs a child may have been sent at once: the one it runs and those waiting in its socket, so
#: that a child of short jobs goes on while the parent is busy (in a transaction, say). Only
#: jobs claimed ahead are sent ahead, so a child holds no more than `claim_ahead` allows.
JOBS_SENT_AT_ONCE = 32
#: The largest frame sent to a child that is busy: what waits in its socket then stays far
#: below the socket's buffer (~90 KiB of small frames here), so the parent's send never blocks
#: on a child that reads only between jobs. A bigger job waits here until the child is free.
SEND_AHEAD_FRAME_BYTES = 2048
#: How long a hung child is given to write its stacks before it is killed: once per hang, the
#: loop's only wait on a child.
STACK_DUMP_SECONDS = 0.1


@dataclass(eq=False)
class Child:
    """One child process as the parent knows it: its socket, its job, why it was killed."""

    pid: int
    sock: socket.socket
    spawned_at: float
    #: Jobs after which this child is replaced (jittered so children do not all restart at once).
    max_jobs: int
    reader: FrameReader = field(default_factory=lambda: FrameReader(TO_PARENT))
    hello: Hello | None = None
    #: The ids of the jobs sent to it, in the order it runs them: the first is the one it runs.
    jobs: deque[int] = field(default_factory=deque)
    jobs_done: int = 0
    #: The parent's kill, when it killed it; its death is then read with this reason.
    killed: Kill | None = None
    #: Told to leave (recycled, draining): no new job goes to it.
    stopping: bool = False
    #: Its socket reached end of file: it is dead or dying, to be reaped.
    closed: bool = False
    #: The build it was last told is coming (`ipc.messages.Warm`): told once per build.
    warmed_for: Any = None

    @property
    def job_id(self) -> int | None:
        """The job it runs (or starts next), if it was sent one."""
        return self.jobs[0] if self.jobs else None

    @property
    def ready(self) -> bool:
        """Able to take a job: it said hello, stays, and has room for one more."""
        return (
            self.hello is not None
            and len(self.jobs) < JOBS_SENT_AT_ONCE
            and not (self.stopping or self.closed)
        )

    @property
    def idle(self) -> bool:
        """Ready, with no job sent to it."""
        return self.ready and not self.jobs

    def fileno(self) -> int:
        """The child's socket, for `select`."""
        return self.sock.fileno()


class Pool:
    """The children of one host, spawned through its fork server."""

    def __init__(
        self,
        fork_server: ForkServer | None,
        threads: int,
        max_jobs_per_child: int,
        rand: random.Random,
    ) -> None:
        #: None until started, and from its death until a new one is ready.
        self.fork_server = fork_server
        #: A new fork server that is importing the child code, while the host goes on.
        self.starting: StartingForkServer | None = None
        self.threads = threads
        self.max_jobs_per_child = max_jobs_per_child
        self.rand = rand
        self.children: dict[int, Child] = {}

    # -- the fork server --------------------------------------------------------------------

    def ensure_fork_server(self) -> bool:
        """Start a fork server if there is none, and wait until it is ready; True when one was
        started. For the host's start, when there is nothing else to do.

        Raises what `ForkServer.start` raises: a refused fork, a server that died starting, or
        one that cannot load the child code.
        """
        if self.fork_server is not None:
            return False
        self.kill_starting()
        self.fork_server = ForkServer.start()
        return True

    def restart_fork_server(self) -> bool:
        """Without waiting: fork a new fork server when there is none, or see whether the one
        starting is ready; True when one became ready. The host goes on meanwhile (a restart
        takes seconds, and its children's silence is timed while it waits).

        Raises what `StartingForkServer.fork` and `.ready` raise.
        """
        if self.fork_server is not None:
            return False
        if self.starting is None:
            self.starting = StartingForkServer.fork()
        try:
            self.fork_server = self.starting.ready()
        except ForkServerError:
            self.starting = None
            raise
        if self.fork_server is None:
            return False
        self.starting = None
        return True

    def kill_starting(self) -> None:
        """Kill a fork server still starting (the host leaves, or starts one and waits)."""
        if self.starting is not None:
            self.starting.kill()
            self.starting = None

    @property
    def fork_server_pid(self) -> int | None:
        return self.fork_server.pid if self.fork_server else None

    def fork_server_died(self, pid: int) -> bool:
        """Whether reaped `pid` was the current fork server (then there is none until the next
        `ensure_fork_server`)."""
        if self.fork_server is None or pid != self.fork_server.pid:
            return False
        self.fork_server.stop()
        self.fork_server = None
        return True

    def kill_fork_server(self) -> None:
        """End a fork server that stopped answering; a new one is started on the next try."""
        if self.fork_server is not None:
            self.fork_server.kill()
            self.fork_server = None

    def stop_fork_server(self) -> None:
        """Let the fork server leave (the host is stopping)."""
        self.kill_starting()
        if self.fork_server is not None:
            self.fork_server.stop()
            self.fork_server = None

    # -- children ---------------------------------------------------------------------------

    def spawn(self, now: float) -> Child:
        """Ask the fork server for a child; its jobs-before-recycling are jittered."""
        if self.fork_server is None:
            raise ForkServerGone("no fork server is running")
        pid, sock = self.fork_server.spawn(self.threads)
        sock.setblocking(False)
        jitter = self.rand.uniform(0.8, 1.0)
        child = Child(pid, sock, now, max_jobs=max(1, int(self.max_jobs_per_child * jitter)))
        self.children[pid] = child
        log.debug("child spawned", child_pid=pid)
        return child

    def silent_since_spawn(self, cutoff: float) -> list[Child]:
        """Children spawned before `cutoff` that never said hello (and were not killed yet)."""
        return [
            child
            for child in self.children.values()
            if child.hello is None and child.killed is None and child.spawned_at < cutoff
        ]

    def send(self, child: Child, message: ToChild) -> bool:
        """Send a message; False if the child is gone (its death is read when it is reaped)."""
        return self.send_frame(child, encode(message))

    def send_frame(self, child: Child, frame: bytes) -> bool:
        """Send an encoded message (see `send`)."""
        try:
            child.sock.setblocking(True)
            child.sock.sendall(frame)
        except OSError:
            child.closed = True
            return False
        finally:
            with contextlib.suppress(OSError):
                child.sock.setblocking(False)
        return True

    def receive(self, child: Child) -> list[ToParent]:
        """Messages that arrived from `child`. A protocol error kills it; EOF marks it closed."""
        messages: list[ToParent] = []
        while True:
            try:
                data = child.sock.recv(1 << 20)
            except BlockingIOError:
                return messages
            except OSError:
                data = b""
            if not data:
                child.closed = True
                return messages
            try:
                messages.extend(child.reader.feed(data))
            except ProtocolError as error:
                self.kill(child, "protocol error", str(error))
                return messages

    def kill(self, child: Child, reason: KillReason, detail: str | None = None) -> None:
        """SIGKILL the child's whole process group; its death will be read with the reason.

        A child killed as hung is first asked for its threads' stacks (`STACK_DUMP_SIGNAL`),
        given `STACK_DUMP_SECONDS` to write them: without them a hang's cause is a guess.
        """
        if child.killed is None:
            child.killed = Kill(reason, detail)
            log.warning(
                "killing child", child_pid=child.pid, reason=child.killed.cause, job_id=child.job_id
            )
            if reason == "hung" and child.hello is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, STACK_DUMP_SIGNAL)
                    time.sleep(STACK_DUMP_SECONDS)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            os.kill(child.pid, signal.SIGKILL)

    def stop(self, child: Child, send: ToChild) -> None:
        """Ask an idle child to leave."""
        child.stopping = True
        self.send(child, send)

    def reap(self) -> list[tuple[Child | None, int, int]]:
        """Every child that exited: (our record of it or None for a stranger, pid, wait status).

        A child's process group is killed before the child is reaped, whatever it died of:
        what it started (its browser's helpers, the browser driver) would otherwise outlive it,
        sleeping, when the child died on its own. While its zombie is unreaped the child's pid
        cannot be reused, so the group id still names its group and no stranger's.

        A reaped child's socket stays open, so what it sent before it died can still be read;
        `close` it after.
        """
        reaped: list[tuple[Child | None, int, int]] = []
        while True:
            try:
                dead = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return reaped
            if dead is None or dead.si_pid == 0:
                return reaped
            pid = dead.si_pid
            if pid in self.children:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            reaped.append((self.children.pop(pid, None), pid, status))

    def close(self, child: Child) -> None:
        """Close a reaped child's socket."""
        child.closed = True
        child.sock.close()

    def kill_all(self, reason: KillReason) -> None:
        """Kill every child (the host is leaving, or cannot work)."""
        for child in list(self.children.values()):
            self.kill(child, reason)

    def wait_all(self, timeout: float) -> list[tuple[Child | None, int, int]]:
        """Reap until every child is gone or `timeout` passes."""
        deadline = time.monotonic() + timeout
        reaped = self.reap()
        while self.children and time.monotonic() < deadline:
            time.sleep(0.01)
            reaped += self.reap()
        for child, _pid, _status in reaped:
            if child is not None:
                self.close(child)
        return reaped
