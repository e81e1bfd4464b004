"""What a cut-off host's `/healthz` says, asked from the host's own namespace.

A host serves `/healthz` on its loopback (`run --metrics-address 127.0.0.1:PORT`), which only
its own namespace reaches, and which a cut leaves alone: whatever decides whether to count on
the host (a load balancer beside it, an orchestrator's probe) still asks it. The soak makes
each probe's socket inside that namespace (`namespaces.inside`) and speaks HTTP/1.0 itself:
one short request, the status line read, the connection closed by the server.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

from scripts.partitions.namespaces import inside

#: How long one probe may take: `/healthz` reads a decision the host's loop published and
#: never waits on the database.
PROBE_TIMEOUT_SECONDS = 1.0


@dataclass(frozen=True)
class Answer:
    """One probe: seconds since the cut began, the HTTP status (None: no answer) and the
    first word of the body (`ok`, `unhealthy`, `starting`, `draining`)."""

    at: float
    status: int | None
    state: str


def ask(namespace: str, home: str, port: int, at: float) -> Answer:
    """GET /healthz on 127.0.0.1:`port` inside `namespace`; `home` is the soak's namespace."""
    with inside(namespace, home):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(PROBE_TIMEOUT_SECONDS)
        sock.connect(("127.0.0.1", port))
        sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
    except OSError as error:
        return Answer(at, None, type(error).__name__)
    finally:
        sock.close()
    head, _, body = reply.partition(b"\r\n\r\n")
    fields = head.split(b" ", 2)
    status = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    state = body.decode(errors="replace").split(":", 1)[0].split()[:1]
    return Answer(at, status, state[0] if state else "")


@dataclass
class Watch:
    """A cut host's answers, from the cut until it is let back."""

    pid: int
    port: int
    answers: list[Answer] = field(default_factory=list)

    def first_unhealthy(self) -> float | None:
        """Seconds from the cut to the first 503 that says `unhealthy`; None if none did."""
        return next(
            (a.at for a in self.answers if a.status == 503 and a.state == "unhealthy"), None
        )
