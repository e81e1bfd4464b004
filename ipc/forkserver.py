"""The fork server's control protocol, between the parent and the fork server it forked.

The parent's side is `supervisor.host.forkserver`, the server's `child.worker.forkserver`. Over
the socket pair made before the fork:

0. a fork server forked ahead of the parent's start-up (`supervisor.host.ahead`) first reads the
   parent's settings: a 4-byte length and that much JSON, the environment the children are to
   see and how the logs are configured (`Settings`). One forked from the started parent is a
   copy of it and reads none;
1. the server writes `READY` once it has imported the child code, or `FAILED` and the reason
   if it could not;
2. the parent writes a spawn request: a 4-byte count of libvips threads for the new child;
3. the server answers a 4-byte child pid with the parent's end of the child's socket attached
   (SCM_RIGHTS), or a negative errno and no socket when the fork failed.

The parent sends one request at a time and reads its answer before the next.
"""

from __future__ import annotations

import json
import os
import socket
import struct
from typing import TypedDict, cast

from ipc.logs import LOG_LEVELS, LogLevel, LogSettings

REQUEST = struct.Struct(">I")
REPLY = struct.Struct(">i")
READY = b"R"
FAILED = b"E"
#: The longest reason a fork server that failed to start sends.
MAX_REASON_BYTES = 4000
#: The length of the settings that come before anything else, for a fork server forked ahead.
SETTINGS_LENGTH = struct.Struct(">I")
#: The most settings the server reads: an environment is a few KiB.
MAX_SETTINGS_BYTES = 1 << 20


class Settings(TypedDict):
    """What a fork server forked ahead of the parent's start-up takes from the parent."""

    #: The parent's environment as it is once started (the browser and the cache folder it
    #: chose are exported there), which every child reads.
    environment: dict[str, str]
    log_level: LogLevel
    #: JSON logs, text, or None for JSON unless stderr is a terminal (`ipc.logs.configure`).
    json_logs: bool | None


class ForkServerError(RuntimeError):
    """The fork server could not start: it could not load the child code."""


class ForkRefused(ForkServerError):
    """The kernel refused a fork (a pids limit, EAGAIN, ENOMEM): try again later."""


class ForkServerGone(ForkServerError):
    """The fork server died, hung or closed its socket: start a new one."""


# -- the fork server's side ------------------------------------------------------------------


def recv_request(control: socket.socket) -> int | None:
    """The next request's thread count; None when the parent closed the control socket."""
    data = _recv_exactly(control, REQUEST.size)
    if data is None:
        return None
    (threads,) = REQUEST.unpack(data)
    return int(threads)


def recv_settings(control: socket.socket) -> Settings | None:
    """The parent's settings (step 0); None when it closed the socket first, or sent what is
    not settings."""
    header = _recv_exactly(control, SETTINGS_LENGTH.size)
    if header is None:
        return None
    (length,) = SETTINGS_LENGTH.unpack(header)
    body = _recv_exactly(control, length) if length <= MAX_SETTINGS_BYTES else None
    if body is None:
        return None
    try:
        settings = json.loads(body)
        environment = {str(key): str(value) for key, value in settings["environment"].items()}
        level, as_json = settings["log_level"], settings["json_logs"]
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    if level not in LOG_LEVELS or as_json not in (True, False, None):
        return None
    return Settings(environment=environment, log_level=cast(LogLevel, level), json_logs=as_json)


def _recv_exactly(control: socket.socket, size: int) -> bytes | None:
    data = b""
    while len(data) < size:
        chunk = control.recv(size - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def reply_spawned(control: socket.socket, pid: int, child_end: socket.socket) -> None:
    socket.send_fds(control, [REPLY.pack(pid)], [child_end.fileno()])


def reply_failed(control: socket.socket, errno: int) -> None:
    control.sendall(REPLY.pack(-(errno or 1)))


def say_failed(control: socket.socket, reason: str) -> None:
    control.sendall(FAILED + reason.encode(errors="replace")[:MAX_REASON_BYTES])


# -- the parent's side -----------------------------------------------------------------------


def send_settings(
    control: socket.socket, environment: dict[str, str], logs: LogSettings | None
) -> None:
    """Step 0, to a fork server forked ahead: the environment and the log settings (the
    defaults when the logs were never configured)."""
    level, as_json = logs if logs is not None else LogSettings("info", None)
    body = json.dumps(
        {"environment": environment, "log_level": level, "json_logs": as_json}
    ).encode()
    control.sendall(SETTINGS_LENGTH.pack(len(body)) + body)


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
