"""A child's life: say hello, then run one job at a time as the parent asks, until told to stop.

The child holds no database connection and writes nothing the parent has not asked for: it gets
each job's payload in `Run`, acknowledges it (`Accepted`) before starting, reports `Progress`
after each unit of work and ends with `Done`, `Failed` or `Cancelled` (a result too big for a
frame ends its job as `Failed`: the parent would refuse the frame and count the child broken). A
cancel can only be read between units (native code cannot be interrupted from inside), which is
why the parent owns every kill. Leaving is always `os._exit`: nothing inherited from the fork
server runs at exit.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import traceback
from typing import Any, NoReturn

from child.worker.engine import check_engine
from child.worker.handlers import Handler
from child.worker.resources import OutOfResources
from ipc.framing import (
    MAX_FRAME_BYTES,
    FrameReader,
    FrameTooLarge,
    encode,
    recv_message,
    send_message,
)
from ipc.messages import (
    PROTOCOL_VERSION,
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
)

#: The longest error a failed job reports (4 UTF-8 bytes a character at worst: 256 KiB): the
#: head of an error says what went wrong, and a failure must always fit in a frame.
MAX_ERROR_CHARS = 64 * 2**10


class JobCancelled(Exception):
    """The parent asked to stop the running job; raised out of `progress`."""


class Channel:
    """The child's end of its socket: blocking sends, and a non-blocking look for a cancel."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.stop_requested = False
        self._reader = FrameReader(TO_CHILD)

    def poll_for_cancel(self, job_id: int) -> bool:
        """Read what the parent sent meanwhile: True if it cancelled `job_id`."""
        cancelled = False
        while select.select([self.sock], [], [], 0)[0]:
            data = self.sock.recv(65536)
            if not data:
                os._exit(0)  # the parent is gone: nobody wants the result
            for message in self._reader.feed(data):
                cancelled |= isinstance(message, Cancel) and message.job_id == job_id
                self.stop_requested |= isinstance(message, Stop)
        return cancelled


def serve(sock: socket.socket, handlers: dict[str, Handler]) -> NoReturn:
    """The child's loop; never returns."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when children stop
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    engine, engine_error = check_engine()
    channel = Channel(sock)
    send_message(
        sock,
        Hello(version=PROTOCOL_VERSION, pid=os.getpid(), engine=engine, engine_error=engine_error),
    )
    while not channel.stop_requested:
        try:
            message = recv_message(sock, TO_CHILD)
        except ProtocolError:
            os._exit(3)
        if message is None or isinstance(message, Stop):
            break
        if isinstance(message, Run):
            run_job(channel, handlers, message)
    os._exit(0)


def run_job(channel: Channel, handlers: dict[str, Handler], run: Run) -> None:
    """Run one job and send how it ended; an error in the handler is a value, not a death."""
    send_message(channel.sock, Accepted(run.job_id))

    def progress(detail: dict[str, Any]) -> None:
        send_message(channel.sock, Progress(run.job_id, detail))
        if channel.poll_for_cancel(run.job_id):
            raise JobCancelled

    handler = handlers.get(run.kind)
    try:
        if handler is None:
            raise LookupError(f'no handler registered for job kind "{run.kind}" in the child')
        result = handler(run.payload, progress)
    except JobCancelled:
        send_message(channel.sock, Cancelled(run.job_id))
        return
    except OutOfResources as error:
        send_message(channel.sock, Unable(run.job_id, _bounded(str(error))))
        return
    except Exception as error:
        detail = "".join(traceback.format_exception_only(error)).strip()
        send_message(channel.sock, Failed(run.job_id, _bounded(detail)))
        return
    _send_result(channel.sock, Done(run.job_id, result))


def _send_result(sock: socket.socket, done: Done) -> None:
    """Send `done`, or, when it cannot be framed (too big, or of types msgpack cannot encode),
    the job's failure saying why.

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
    sock.sendall(frame)


def _bounded(detail: str) -> str:
    """`detail` cut to `MAX_ERROR_CHARS`, so that a job's failure always fits in a frame."""
    if len(detail) <= MAX_ERROR_CHARS:
        return detail
    return f"{detail[:MAX_ERROR_CHARS]}... ({len(detail) - MAX_ERROR_CHARS} more characters)"
