"""A child's life: say hello, then run the jobs the parent sends, in order, until told to stop.

The child holds no database connection and writes nothing the parent has not asked for: it gets
each job's payload in `Run`, acknowledges it (`Accepted`) before starting, reports `Progress`
after each unit of work and ends with `Done`, `Failed` or `Cancelled` (a result too big for a
frame ends its job as `Failed`: the parent would refuse the frame and count the child broken). A
cancel can only be read between units (native code cannot be interrupted from inside), which is
why the parent owns every kill. Leaving is always `os._exit`: nothing inherited from the fork
server runs at exit.

The parent may send the next `Run` while a job still runs, so that a child of short jobs never
waits for the parent between two. Such a job waits in `Channel.inbox` and is only `Accepted`
when it starts: a death before that gives it back without spending an attempt. A job that ends
while the next waits sends its end and the next one's `Accepted` in one write, so the parent
reads both at once; a cancel of a job that waits answers `Cancelled` as soon as it is read.

Every write to the parent goes through one lock of `Channel`'s: a job's progress may be
reported from a thread of the child's (the page watchdog's beat, `child.browser.watchdog`) while
its main thread writes, and two frames must never interleave. Such a thread can outlive its job
(a request of the page still served), so progress is only sent between the job's start and its
end (`Channel.report`).

A `Warm` is acted on between jobs: the child starts what the coming jobs need (its browser)
while it has nothing else to do. A job sent meanwhile is accepted and reported as waiting while
the start goes on, so a slow launch never looks like a hung child; a start that fails is only
logged: the job that needs it fails or goes back with the reason.

The child's log lines carry its pid, and while a job runs its id, kind and build.
"""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import socket
import threading
import traceback
from collections import deque
from collections.abc import Callable
from typing import Any, NoReturn

import structlog

from child.browser.errors import first_line
from child.worker.engine import check_engine
from child.worker.handler import Handler, Warmer
from child.worker.resources import OutOfResources
from ipc.failures import JobError, PermanentFailure
from ipc.framing import MAX_FRAME_BYTES, FrameReader, FrameTooLarge, encode
from ipc.messages import (
    PROTOCOL_VERSION,
    STACK_DUMP_SIGNAL,
    TO_CHILD,
    Accepted,
    Cancel,
    Cancelled,
    Done,
    Failed,
    Hello,
    Progress,
    ProtocolError,
    Run,
    Stop,
    Unable,
    Warm,
)

#: The longest error a failed job reports (4 UTF-8 bytes a character at worst: 256 KiB): the
#: head of an error says what went wrong, and a failure must always fit in a frame.
MAX_ERROR_CHARS = 64 * 2**10

log = structlog.get_logger(__name__)


class JobCancelled(Exception):
    """The parent asked to stop the running job; raised out of `progress`."""


class Channel:
    """The child's end of its socket: messages in the order sent, cancels read between units."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        #: Messages read but not acted on yet, in order (a `Run` sent ahead, a `Stop`).
        self.inbox: deque[Run | Stop | Warm] = deque()
        self._reader = FrameReader(TO_CHILD)
        self._sending = threading.Lock()
        #: The job whose progress may be reported: from its start until its end is sent.
        self._reporting: int | None = None

    def send(self, frames: bytes) -> None:
        """Write encoded frames to the parent, whole, whichever thread calls."""
        with self._sending:
            self.sock.sendall(frames)

    def start(self, job_id: int) -> None:
        """Report `job_id`'s progress from now on (`report`)."""
        with self._sending:
            self._reporting = job_id

    def report(self, job_id: int, detail: dict[str, Any]) -> None:
        """Send `job_id`'s progress, unless its end went out already: a thread of the job can
        outlive it (the site's server still reading a file from a slow store, beating), and
        progress for a job the child no longer runs makes the parent kill it."""
        frame = encode(Progress(job_id, detail))
        with self._sending:
            if self._reporting == job_id:
                self.sock.sendall(frame)

    def end(self, frames: bytes) -> None:
        """Send the end of the running job (and whatever goes with it); no progress after."""
        with self._sending:
            self._reporting = None
            self.sock.sendall(frames)

    def next(self) -> Run | Stop | Warm | None:
        """The next message to act on, blocking; None when the parent is gone."""
        while not self.inbox:
            try:
                data = self.sock.recv(65536)
            except InterruptedError:  # pragma: no cover - Python retries EINTR itself
                continue
            if not data:
                if self._reader.pending:
                    os._exit(3)  # a frame cut short: the parent died mid-send
                return None
            self._take(data, None)
        return self.inbox.popleft()

    def poll_for_cancel(self, job_id: int) -> bool:
        """Read what the parent sent meanwhile: True if it cancelled `job_id`."""
        cancelled = False
        while select.select([self.sock], [], [], 0)[0]:
            data = self.sock.recv(65536)
            if not data:
                os._exit(0)  # the parent is gone: nobody wants the result
            cancelled |= self._take(data, job_id)
        return cancelled

    def cancelled_before_start(self, job_id: int) -> bool:
        """Read what the parent sent meanwhile: True if it cancelled `job_id`, accepted but not
        started, which is then answered and taken out of the inbox."""
        if not self.poll_for_cancel(job_id):
            return False
        self._take_run(job_id)
        self.end(encode(Cancelled(job_id)))
        return True

    def _take(self, data: bytes, running: int | None) -> bool:
        """Queue the runs and stops in `data`; answer cancels of jobs that wait at once. True
        when `running` was cancelled."""
        cancelled = False
        try:
            messages = list(self._reader.feed(data))
        except ProtocolError:
            os._exit(3)
        for message in messages:
            if not isinstance(message, Cancel):
                self.inbox.append(message)
            elif message.job_id == running:
                cancelled = True
            elif (waiting := self._take_run(message.job_id)) is not None:
                self.send(encode(Cancelled(waiting.job_id)))
        return cancelled

    def _take_run(self, job_id: int) -> Run | None:
        """The waiting `Run` of `job_id`, out of the inbox (a cancel of a job not started)."""
        for message in self.inbox:
            if isinstance(message, Run) and message.job_id == job_id:
                self.inbox.remove(message)
                return message
        return None

    def waiting_run(self) -> Run | None:
        """The next message if it is a job that already arrived (read without blocking)."""
        while select.select([self.sock], [], [], 0)[0]:
            data = self.sock.recv(65536)
            if not data:
                break
            self._take(data, None)
        head = self.inbox[0] if self.inbox else None
        return head if isinstance(head, Run) else None


def serve(
    sock: socket.socket, handlers: dict[str, Handler], warm: Warmer = lambda build, beat: None
) -> NoReturn:
    """The child's loop; never returns. `warm` starts what a `Warm` announces."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when children stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    faulthandler.register(STACK_DUMP_SIGNAL, all_threads=True)  # C-level: works while stuck
    structlog.contextvars.bind_contextvars(child_pid=os.getpid())
    engine, engine_error = check_engine()
    channel = Channel(sock)
    channel.send(
        encode(
            Hello(
                version=PROTOCOL_VERSION, pid=os.getpid(), engine=engine, engine_error=engine_error
            )
        )
    )
    accepted = False  # the next job's `Accepted` went out already (with the last job's end)
    while isinstance(message := channel.next(), Run | Warm):
        if isinstance(message, Warm):
            accepted = warm_up(channel, warm, message.build)
            continue
        if not accepted:
            channel.send(encode(Accepted(message.job_id)))
        accepted = run_job(channel, handlers, message)
    os._exit(0)


def warm_up(channel: Channel, warm: Warmer, build: dict[str, Any] | None) -> bool:
    """Run `warm` for `build`; True when the next job arrived meanwhile and was accepted.

    Its beat, on the main thread, looks for a job sent meanwhile and accepts it; from then on
    every beat reports it waiting, as the job's own start of the browser would. (Beats from
    another thread only report: the socket is read by the main thread alone.)"""
    waiting: Run | None = None

    def beat() -> None:
        nonlocal waiting
        if threading.current_thread() is threading.main_thread():
            if waiting is not None and channel.cancelled_before_start(waiting.job_id):
                waiting = None
            if waiting is None and (waiting := channel.waiting_run()) is not None:
                channel.send(encode(Accepted(waiting.job_id)))
                channel.start(waiting.job_id)
        if waiting is not None:
            channel.report(waiting.job_id, {"waiting": True})

    try:
        warm(build, beat)
    except Exception as error:  # the job that needs it meets the same trouble, and says so
        log.info("could not warm up", error=first_line(error))
    return waiting is not None


def run_job(channel: Channel, handlers: dict[str, Handler], run: Run) -> bool:
    """Run one accepted job and send how it ended; an error in the handler is a value, not a
    death. True when the next job's `Accepted` went out with the end (it was already waiting)."""

    def progress(detail: dict[str, Any]) -> None:
        """Report progress; on the main thread, also read whether the job was cancelled (the
        socket is read by the main thread only: a beat from another thread just reports)."""
        channel.report(run.job_id, detail)
        on_main = threading.current_thread() is threading.main_thread()
        if on_main and channel.poll_for_cancel(run.job_id):
            raise JobCancelled

    handler = handlers.get(run.kind)

    def work() -> Any:
        if handler is None:
            raise LookupError(f'no handler registered for job kind "{run.kind}" in the child')
        return handler(run.payload, progress)

    build_id = run.payload.get("build_id") if isinstance(run.payload, dict) else None
    channel.start(run.job_id)
    with structlog.contextvars.bound_contextvars(
        job_id=run.job_id, kind=run.kind, build_id=build_id
    ):
        ending = end_of(run.job_id, work)
    end = _result_frame(ending) if isinstance(ending, Done) else encode(ending)
    following = channel.waiting_run()
    if following is not None:
        end += encode(Accepted(following.job_id))
    channel.end(end)
    return following is not None


def end_of(job_id: int, work: Callable[[], Any]) -> Done | Failed | Cancelled | Unable:
    """How job `job_id` ended, as the parent is told: `work`'s result, or what it raised as a
    value (a cancel, resources the child lacked, a failure in its own words or final, any
    other error with its type)."""
    try:
        result = work()
    except JobCancelled:
        return Cancelled(job_id)
    except OutOfResources as error:
        return Unable(job_id, _bounded(str(error)))
    except JobError as error:  # said for people: the message alone
        return Failed(job_id, _bounded(str(error)), final=isinstance(error, PermanentFailure))
    except Exception as error:
        detail = "".join(traceback.format_exception_only(error)).strip()
        return Failed(job_id, _bounded(detail))
    return Done(job_id, result)


def _result_frame(done: Done) -> bytes:
    """The frame of `done`, or, when it cannot be framed (too big, or of types msgpack cannot
    encode), of the job's failure saying why.

    The parent would refuse the frame and kill the child, and the same result would kill the
    next child on every retry: the job fails once, with its real reason, and the child goes on.
    """
    try:
        frame = encode(done)
    except FrameTooLarge as error:
        limit = MAX_FRAME_BYTES // 2**20
        reason = f"result of {error.size / 2**20:.1f} MiB exceeds the {limit} MiB frame limit"
        frame = encode(Failed(done.job_id, reason))
    except (TypeError, ValueError, OverflowError) as error:  # what msgpack raises
        frame = encode(Failed(done.job_id, _bounded(f"result cannot be sent: {error}")))
    return frame


def _bounded(detail: str) -> str:
    """`detail` cut to `MAX_ERROR_CHARS`, so that a job's failure always fits in a frame."""
    if len(detail) <= MAX_ERROR_CHARS:
        return detail
    return f"{detail[:MAX_ERROR_CHARS]}... ({len(detail) - MAX_ERROR_CHARS} more characters)"
