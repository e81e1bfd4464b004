"""The fork server forked first thing, ahead of the parent's own start-up.

The fork server spends about 0.6 s importing the child code (the browser driver, libvips, the
diff's compiled loops), and the parent 0.35 s importing its own (SQLAlchemy, the commands, the
host's loop) before it could fork it: on a host that starts for one build, that was a second
before the first job could be handed out. Forked by `python -m supervisor run` before the
parent imports anything else, the two import at once, on two cores; the parent adopts the
server when its loop starts (`supervisor.host.forkserver.StartingForkServer.fork`) and sends it
what a copy of the started parent would have had (`ipc.forkserver.Settings`). A fork server
forked later (one that died is replaced) is forked from the started parent, as always.

This module imports nothing but the standard library's essentials: it runs before the rest.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
from collections.abc import Sequence

_PR_SET_CHILD_SUBREAPER = 36

#: The fork server forked ahead and the parent's end of its control socket, until adopted.
_ahead: tuple[int, socket.socket] | None = None


def become_subreaper() -> None:
    """Adopt orphaned descendants (Linux `PR_SET_CHILD_SUBREAPER`), so children are ours to reap."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")


def runs_a_host(arguments: Sequence[str]) -> bool:
    """Whether the command line starts a host: `run`, or options with no command (what `run`
    takes by default), and not a request for help."""
    if any(argument in ("-h", "--help") for argument in arguments):
        return False
    return not arguments or arguments[0] == "run" or arguments[0].startswith("-")


def fork_ahead(arguments: Sequence[str]) -> None:
    """Fork the fork server now when `arguments` start a host; nothing otherwise, or when the
    kernel refuses (the host then forks it as it starts, and says so if it still cannot)."""
    global _ahead
    if _ahead is not None or not runs_a_host(arguments):
        return
    with contextlib.suppress(OSError):
        _ahead = fork_server(ahead=True)


def fork_server(*, ahead: bool) -> tuple[int, socket.socket]:
    """Fork a fork server (the parent adopting its children first): its pid and the parent's
    end of its control socket; OSError when the kernel refuses. One forked `ahead` waits for
    the parent's settings before it says it is ready (`child.worker.forkserver.serve_ahead`)."""
    become_subreaper()
    ours, theirs = socket.socketpair()
    supervisor_pid = os.getpid()
    try:
        pid = os.fork()
    except OSError:
        ours.close()
        theirs.close()
        raise
    if pid == 0:  # pragma: no cover - the fork server's side, tested through its children
        ours.close()
        try:
            from child.worker import forkserver

            serve = forkserver.serve_ahead if ahead else forkserver.serve
            serve(theirs, supervisor_pid)
        except BaseException as error:
            from ipc.forkserver import say_failed

            with contextlib.suppress(OSError):
                say_failed(theirs, f"{type(error).__name__}: {error}")
        finally:
            os._exit(70)
    theirs.close()
    return pid, ours


def adopt() -> tuple[int, socket.socket] | None:
    """The fork server forked ahead (its pid and control socket), once; None if there is none."""
    global _ahead
    ahead, _ahead = _ahead, None
    return ahead
