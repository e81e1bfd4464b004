"""The socket and uvicorn around the app: where it listens, and what bounds each connection.

The socket is bound before uvicorn starts, so that an address in use is said in one line by
`serve` (uvicorn would log it and exit 1), and port 0 can pick a free port that `serve` then
prints. Each connection is bounded, since every one held costs a slot of `MAX_CONNECTIONS`:

- a request's head (line and headers) may be at most `MAX_HEAD_BYTES` (uvicorn's
  `h11_max_incomplete_event_size`), and must arrive within `HEAD_SECONDS` of the connection's
  opening or of the last answer: uvicorn times out an idle connection only after a first
  answer (`timeout_keep_alive`), so a connection opened and left silent would be held for good
  (`HeadBoundH11`);
- an idle keep-alive connection is closed after `KEEP_ALIVE_SECONDS`;
- past `MAX_CONNECTIONS` connections or requests at once, uvicorn answers 503;
- a review's body is bounded in bytes and seconds by the API itself (`supervisor.serve.api`).

uvicorn's own events (a malformed request, the concurrency limit) are logged through structlog
like the rest (`StructlogHandler`), not printed in uvicorn's format.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket

import h11
import structlog
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

log = structlog.get_logger(__name__)

#: How long a connection may take to send a request's head (after opening, or after the last
#: answer), in seconds: a person's browser sends it at once.
HEAD_SECONDS = 10.0
#: How long an idle keep-alive connection is kept, in seconds (uvicorn's default).
KEEP_ALIVE_SECONDS = 5
#: Connections, or requests in progress, at once; more are answered 503 by uvicorn. Reviews
#: are a handful of people; the database pool, not this, bounds the work in flight.
MAX_CONNECTIONS = 64
#: The most bytes of a request's line and headers.
MAX_HEAD_BYTES = 16 * 2**10
#: How long SIGTERM waits for requests in progress before closing them, in seconds.
SHUTDOWN_SECONDS = 5
LISTEN_BACKLOG = 128


def listening(host: str, port: int) -> socket.socket:
    """A socket bound and listening on `host:port` (`OSError` when it cannot be)."""
    family = socket.AF_INET6 if is_ipv6(host) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def address_of(sock: socket.socket) -> str:
    """Where `sock` listens, the port resolved (`127.0.0.1:41234`, `[::1]:41234`)."""
    host, port = sock.getsockname()[:2]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False


def is_loopback(host: str) -> bool:
    """Whether `host` is reachable from this machine only (`localhost` included)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class HeadBoundH11(H11Protocol):
    """uvicorn's HTTP/1.1, with a deadline for each request's head (see the module)."""

    head_seconds = HEAD_SECONDS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_deadline: asyncio.TimerHandle | None = None
        self._await_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        super().connection_lost(exc)

    def _await_head(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        self._head_deadline = self.loop.call_later(self.head_seconds, self._head_late)

    def _head_late(self) -> None:
        """Close the connection if no request's head has come in since it was armed: h11
        reads the client as `IDLE` until a whole head has arrived."""
        self._head_deadline = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            log.info("connection closed: no request", client=_client(self.client))
            self.transport.close()


def _client(client: tuple[str, int] | None) -> str | None:
    return f"{client[0]}:{client[1]}" if client else None


def server(app: ASGIApp, *, head_seconds: float = HEAD_SECONDS) -> uvicorn.Server:
    """uvicorn on `app` with the bounds of the module; `head_seconds` for tests."""
    protocol = type("HeadBound", (HeadBoundH11,), {"head_seconds": head_seconds})
    config = uvicorn.Config(
        app,
        http=protocol,
        loop="asyncio",
        ws="none",
        lifespan="off",
        log_config=None,
        access_log=False,
        proxy_headers=False,
        server_header=False,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        limit_concurrency=MAX_CONNECTIONS,
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=SHUTDOWN_SECONDS,
        backlog=LISTEN_BACKLOG,
    )
    return uvicorn.Server(config)


class StructlogHandler(logging.Handler):
    """uvicorn's log records as structlog events (uvicorn logs through `logging`)."""

    def emit(self, record: logging.LogRecord) -> None:
        log.log(record.levelno, record.getMessage(), source=record.name, exc_info=record.exc_info)


def route_uvicorn_logs() -> None:
    """Send uvicorn's warnings and errors through structlog; its start-up lines are ours to say."""
    for name in ("uvicorn", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers = [StructlogHandler()]
        logger.setLevel(logging.WARNING)
        logger.propagate = False
