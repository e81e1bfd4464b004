"""The HTTP server of `run --metrics-address`: `/metrics` for Prometheus, `/healthz` for whatever
decides whether to count on this host.

One thread of the parent serves both (a thread per request, so a scrape that waits on the
database never holds up `/healthz`). It starts once the first fork server runs, which is forked
before any thread exists; the socket is bound before that, so that an address that cannot be
used is refused at start (the fork server closes every descriptor it inherits, this one too).
A fork server restarted later is forked beside this thread, so the thread never takes a lock
the fork server could need: it reads only what the loop publishes (`HealthBoard`) and the
registry, and it logs nothing per request or per scrape (a log line in progress would leave the
log's lock held in the fork server).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import make_wsgi_app

from supervisor.metrics.address import AddressError, parse_address
from supervisor.metrics.registry import HostMetrics

__all__ = ["AddressError", "MetricsServer", "parse_address"]

log = structlog.get_logger(__name__)

StartResponse = Callable[..., Any]


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    # A host that leaves never waits for a scrape still reading the queue.
    block_on_close = False
    # Not reused by a child: the fork server closes every descriptor it inherits.
    allow_reuse_address = True


class _IPv6Server(_Server):
    address_family = socket.AF_INET6


class _QuietHandler(WSGIRequestHandler):
    """No line per request on stderr (and no log lock held by this thread at a fork)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


class MetricsServer:
    """Bound at construction (an `OSError` when the address cannot be used), served from
    `start()` until `close()`."""

    def __init__(self, address: tuple[str, int], metrics: HostMetrics) -> None:
        self.metrics = metrics
        self._prometheus = make_wsgi_app(metrics.registry)
        host, port = address
        server_class = _IPv6Server if _is_ipv6(host) else _Server
        self._server = make_server(
            host, port, self.app, server_class=server_class, handler_class=_QuietHandler
        )
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        """Where it listens, the port resolved (`127.0.0.1:41234`)."""
        host, port = self._server.server_address[:2]
        host = host.decode() if isinstance(host, bytes) else host
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"

    def start(self) -> None:
        """Serve from a daemon thread: a host that exits never waits for a scrape."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="metrics", kwargs={"poll_interval": 0.2}
        )
        self._thread.daemon = True
        self._thread.start()
        log.info("metrics serving", address=self.address)

    def close(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(5.0)
        self._server.server_close()

    def app(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        """`/metrics` to prometheus_client's exposition, `/healthz` to ours, 404 otherwise."""
        path = environ.get("PATH_INFO", "")
        if path == "/metrics":
            body: Iterable[bytes] = self._prometheus(environ, start_response)
            return body
        if path == "/healthz":
            health = self.metrics.health.current
            status = "200 OK" if health.ok else "503 Service Unavailable"
            return _text(start_response, status, health.line)
        return _text(start_response, "404 Not Found", "not found: try /metrics or /healthz")


def _text(start_response: StartResponse, status: str, line: str) -> list[bytes]:
    body = f"{line}\n".encode()
    start_response(
        status,
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
