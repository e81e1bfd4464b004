"""The browser's own network: a network namespace that holds a loopback interface and nothing
else, where the child's Chromium, Playwright's driver and the build's server live.

Why a namespace and not only the browser's switches: a page reaches the network by more ways
than the request interception sees. A WebSocket opens any loopback port with its full upgrade
request, and WebRTC sends STUN and TURN over UDP and TCP to any address it is given, past both
the interception and the host resolver's rules (both measured). In a namespace of its own the
browser has no route anywhere: its loopback holds only the DevTools port it opens and the
build's server, whose listening socket is made inside it; everything else is refused by the
kernel.

The namespace is made once per child, the first time the browser needs it, on a thread of its
own (`unshare` of a network namespace changes only the calling thread), and kept by a
descriptor; a thread enters it for as long as it starts a process or opens a socket that must
be inside (`entered`), then goes back. Processes and sockets keep the namespace they were made
in. Making one needs CAP_SYS_ADMIN (a host run as root, or given the capability); without it
the browser shares the host's network, contained by its switches and the interception only,
and the child says so once (`network shared`).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import socket
import struct
import threading
from collections.abc import Iterator

import structlog

log = structlog.get_logger(__name__)

_CLONE_NEWNET = 0x40000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
#: struct ifreq: the interface's name, then a union of 24 bytes (the flags are its first short).
_IFREQ = "16sh22x"
_LIBC = ctypes.CDLL(None, use_errno=True)


class _Namespace:
    """A network namespace, held by a descriptor."""

    def __init__(self, descriptor: int) -> None:
        self.descriptor = descriptor


_lock = threading.Lock()
_own: _Namespace | None = None
_tried = False


def contained() -> bool:
    """Whether the browser gets a network of its own in this process (made on first ask)."""
    return _network() is not None


@contextlib.contextmanager
def entered() -> Iterator[None]:
    """The calling thread inside the browser's network while the block runs: what it starts
    and the sockets it opens stay there. Nothing changes where there is no such network."""
    own = _network()
    if own is None:
        yield
        return
    host = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        _setns(own.descriptor)
        try:
            yield
        finally:
            _setns(host)
    finally:
        os.close(host)


def _network() -> _Namespace | None:
    global _own, _tried
    with _lock:
        if not _tried:
            _tried = True
            _own = _make()
        return _own


def _make() -> _Namespace | None:
    """A new namespace with its loopback up, made on a thread that ends with it; None (said
    once) when this process may not make one."""
    made: list[_Namespace | OSError] = []

    def unshare() -> None:
        try:
            if _LIBC.unshare(_CLONE_NEWNET) != 0:
                number = ctypes.get_errno()
                raise OSError(number, os.strerror(number))
            _loopback_up()
            made.append(_Namespace(os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)))
        except OSError as error:
            made.append(error)

    thread = threading.Thread(target=unshare, name="browser-network")
    thread.start()
    thread.join()
    outcome = made[0]
    if isinstance(outcome, OSError):
        reason = (
            "no CAP_SYS_ADMIN to make one"
            if outcome.errno in (errno.EPERM, errno.EACCES)
            else outcome.strerror or str(outcome)
        )
        log.warning(
            "network shared",
            reason=reason,
            detail="the browser shares the host's network: its switches and the request "
            "interception contain it, not the kernel",
        )
        return None
    log.debug("browser network made")
    return outcome


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as control:
        request = struct.pack(_IFREQ, b"lo", 0)
        flags = struct.unpack(_IFREQ, fcntl.ioctl(control, _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(control, _SIOCSIFFLAGS, struct.pack(_IFREQ, b"lo", flags | _IFF_UP))


def _setns(descriptor: int) -> None:
    if _LIBC.setns(descriptor, _CLONE_NEWNET) != 0:
        number = ctypes.get_errno()
        raise OSError(number, f"cannot enter the browser's network: {os.strerror(number)}")
