"""The fork server's control protocol, between the parent and the fork server it forked.

The parent's side is `supervisor.host.forkserver`, the server's `child.worker.forkserver`. Over
the socket pair made before the fork:

1. the server writes `READY` once it has imported the child code, or `FAILED` and the reason
   if it could not;
2. the parent writes a spawn request: a 4-byte count of libvips threads for the new child;
3. the server answers a 4-byte child pid with the parent's end of the child's socket attached
   (SCM_RIGHTS), or a negative errno and no socket when the fork failed.

The parent sends one request at a time and reads its answer before the next.
"""

from __future__ import annotations

import os
import socket
import struct

REQUEST = struct.Struct(">I")
REPLY = struct.Struct(">i")
READY = b"R"
FAILED = b"E"
#: The longest reason a fork server that failed to start sends.
MAX_REASON_BYTES = 4000


class ForkServerError(RuntimeError):
    """The fork server could not start: it could not load the child code."""


class ForkRefused(ForkServerError):
    """The kernel refused a fork (a pids limit, EAGAIN, ENOMEM): try again later."""


class ForkServerGone(ForkServerError):
    """The fork server died, hung or closed its socket: start a new one."""


# -- the fork server's side ------------------------------------------------------------------


def recv_request(control: socket.socket) -> int | None:
    """The next request's thread count; None when the parent closed the control socket."""
    data = b""
    while len(data) < REQUEST.size:
        chunk = control.recv(REQUEST.size - len(data))
        if not chunk:
            return None
        data += chunk
    (threads,) = REQUEST.unpack(data)
    return int(threads)


def reply_spawned(control: socket.socket, pid: int, child_end: socket.socket) -> None:
    socket.send_fds(control, [REPLY.pack(pid)], [child_end.fileno()])


def reply_failed(control: socket.socket, errno: int) -> None:
    control.sendall(REPLY.pack(-(errno or 1)))


def say_failed(control: socket.socket, reason: str) -> None:
    control.sendall(FAILED + reason.encode(errors="replace")[:MAX_REASON_BYTES])


# -- the parent's side -----------------------------------------------------------------------


def read_ready(answer: bytes) -> None:
    """Check the server's first word; `ForkServerError` with its reason when it failed."""
    if answer != READY:
        why = answer[len(FAILED) :].decode(errors="replace") or "it exited"
        raise ForkServerError(f"the fork server could not load the child code: {why}")


def request_spawn(control: socket.socket, threads: int) -> tuple[int, socket.socket]:
    """Ask for a child; its pid and the parent's end of its socket."""
    try:
        control.sendall(REQUEST.pack(threads))
        data, fds, _flags, _address = socket.recv_fds(control, REPLY.size, 1)
    except OSError as error:  # a reset, a closed socket, or no answer within the timeout
        raise ForkServerGone(f"fork server unreachable: {error}") from error
    (pid,) = REPLY.unpack(data) if len(data) == REPLY.size else (0,)
    if pid > 0 and fds:
        return pid, socket.socket(fileno=fds[0])
    for fd in fds:
        os.close(fd)
    if len(data) != REPLY.size:
        raise ForkServerGone("the fork server closed its control socket")
    raise ForkRefused(f"the fork server could not fork: {os.strerror(-pid)}")
