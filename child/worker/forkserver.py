"""The fork server: a clean process that forks the children on the parent's request.

It is forked by the parent first thing, before any database connection or thread, and imports the
child code (and pyvips, so children start in milliseconds) but never runs a libvips operation: a
process that ran one and then forks can deadlock its children. Each child is forked twice so the
parent, a child subreaper, adopts it: the parent then reaps it and reads its exit status itself.
The control protocol it speaks with the parent is `ipc.forkserver`.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import gc
import itertools
import os
import signal
import socket
import struct
import time
from typing import NoReturn

from child.worker.handler import Handler
from ipc.forkserver import READY, recv_request, recv_settings, reply_failed, reply_spawned
from ipc.logs import configure

#: The intermediate's report of the child's pid to the fork server.
PID = struct.Struct(">i")
#: How long a new child waits to be adopted by the parent before it gives up.
ADOPTION_TIMEOUT_SECONDS = 2.0
_PR_SET_PDEATHSIG = 1
#: Thread pools that libraries start on import unless told to use one thread.
SINGLE_THREADED = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def serve(control: socket.socket, supervisor_pid: int) -> NoReturn:
    """The fork server's loop: one child per request, until the parent closes the control socket."""
    _detach(control)
    from child.worker.handlers import registered_handlers

    handlers = registered_handlers()
    _serve(control, supervisor_pid, handlers)


def serve_ahead(control: socket.socket, supervisor_pid: int) -> NoReturn:
    """`serve`, for a fork server forked before the parent's own start-up
    (`supervisor.host.ahead`): it imports the child code while the parent imports its own, then
    waits for the settings the parent has once started (its environment, its logs:
    `ipc.forkserver.Settings`), which a copy of the started parent would have had."""
    _detach(control)
    configure()  # what the child code says as it loads (the diff's loops compiling), on stderr
    from child.worker.handlers import registered_handlers

    handlers = registered_handlers()
    settings = recv_settings(control)
    if settings is None:
        os._exit(0)  # the parent did not start a host after all
    os.environ.clear()
    os.environ.update(settings["environment"])
    _single_threaded()  # again: the parent's environment replaced the one `_detach` set
    configure(settings["log_level"], json=settings["json_logs"])
    _serve(control, supervisor_pid, handlers)


def _detach(control: socket.socket) -> None:
    """What a fork server does first: the parent's signals ignored (it decides), death with
    it, no descriptor but its socket, and libraries kept to one thread."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides; ^C reaches us too
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _die_with_parent()
    _drop_inherited(control)
    _single_threaded()


def _single_threaded() -> None:
    """A process that forks must have no other thread; numpy's BLAS would start one on import."""
    for variable in SINGLE_THREADED:
        os.environ[variable] = "1"


def _serve(control: socket.socket, supervisor_pid: int, handlers: dict[str, Handler]) -> NoReturn:
    """Ready, then one child per request. What the server has loaded is moved out of the
    collector's reach first (`gc.freeze`): a child's collections would otherwise write to every
    object they scan, copying the pages it shares with the server (measured on vue-sb9: a child
    at 55 MiB of PSS, against 77 without, and the server at 125 against 146)."""
    gc.collect()
    gc.freeze()
    control.sendall(READY)
    while True:
        threads = recv_request(control)
        if threads is None:
            os._exit(0)
        ours, theirs = socket.socketpair()
        try:
            pid = _fork_adoptable(ours, theirs, control, supervisor_pid, threads, handlers)
        except OSError as error:
            reply_failed(control, error.errno or 1)
        else:
            reply_spawned(control, pid, theirs)
        finally:
            ours.close()
            theirs.close()


def _fork_adoptable(
    ours: socket.socket,
    theirs: socket.socket,
    control: socket.socket,
    supervisor_pid: int,
    threads: int,
    handlers: dict[str, Handler],
) -> int:
    """Fork a child through an intermediate that exits at once, so the parent adopts the child."""
    read_pid, write_pid = os.pipe()
    try:
        intermediate = os.fork()
    except OSError:
        os.close(read_pid)
        os.close(write_pid)
        raise
    if intermediate == 0:
        _intermediate(read_pid, write_pid, ours, theirs, control, supervisor_pid, threads, handlers)
    os.close(write_pid)
    os.waitpid(intermediate, 0)
    with os.fdopen(read_pid, "rb") as pipe:
        data = pipe.read(PID.size)
    (pid,) = PID.unpack(data) if len(data) == PID.size else (-errno.EIO,)
    if pid <= 0:
        raise OSError(-pid, os.strerror(-pid))
    return int(pid)


def _intermediate(
    read_pid: int,
    write_pid: int,
    ours: socket.socket,
    theirs: socket.socket,
    control: socket.socket,
    supervisor_pid: int,
    threads: int,
    handlers: dict[str, Handler],
) -> NoReturn:
    """Fork the child, report its pid (or the fork's errno, negated) and leave at once: an
    intermediate that returned would serve the fork server's loop on a copy of its socket."""
    try:
        os.close(read_pid)
        child = os.fork()
    except OSError as error:
        _write_pid(write_pid, -(error.errno or errno.EAGAIN))
        os._exit(1)
    except BaseException:
        os._exit(1)
    if child == 0:
        os.close(write_pid)
        theirs.close()
        control.close()
        _become_child(ours, supervisor_pid, threads, handlers)
    _write_pid(write_pid, child)
    os._exit(0)


def _write_pid(write_pid: int, pid: int) -> None:
    with contextlib.suppress(OSError):
        os.write(write_pid, PID.pack(pid))


def _drop_inherited(control: socket.socket) -> None:
    """Close whatever the parent had open when it forked us but the control socket.

    A fork server restarted by a running host is a copy of a parent with database connections,
    a LISTEN socket, SQLite's `.db`, `-wal` and `-shm` files and its children's sockets: none of
    it may reach a child. The parent's objects that own those descriptors stay referenced from
    the parent's frames below us and are never used here; only the descriptors go. The parent's
    signal wake-up socket is let go first, so our own signals do not wake the parent's loop.
    """
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    keep = sorted({0, 1, 2, control.fileno()})
    for low, high in itertools.pairwise([*keep, os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)


def _become_child(
    sock: socket.socket, supervisor_pid: int, threads: int, handlers: dict[str, Handler]
) -> NoReturn:
    from child.worker.engine import configure_libvips, return_large_blocks
    from child.worker.handlers import warm
    from child.worker.loop import serve as serve_child

    os.setsid()  # a process group of its own: the parent kills whatever the child started with it
    deadline = time.monotonic() + ADOPTION_TIMEOUT_SECONDS
    while os.getppid() != supervisor_pid:
        if time.monotonic() > deadline:
            os._exit(1)
        time.sleep(0.0002)
    _die_with_parent()
    if os.getppid() != supervisor_pid:  # the parent died before the signal was armed
        os._exit(1)
    configure_libvips(threads)
    return_large_blocks()
    serve_child(sock, handlers, warm)


def _die_with_parent() -> None:
    """Ask the kernel for SIGKILL when our parent dies (Linux `PR_SET_PDEATHSIG`)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
