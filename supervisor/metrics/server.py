"""The HTTP server of `run --metrics-address`: `/metrics` for Prometheus, `/healthz` for whatever
decides whether to count on this host.

What a client may cost the host is bounded and small, whatever the clients do. One thread of
the parent runs an event loop (asyncio) that holds every connection: an idle or slow client
costs a socket, never a thread (a thread per connection let 200 idle sockets hold 200 threads,
and under a pids limit left the host unable to fork a child). Each connection must deliver a
whole request within `IDLE_SECONDS` of opening or of its last answer, and take its answer
within as long, or it is closed; at most `MAX_CONNECTIONS` are open, and a new one drops the
oldest idle one. `/healthz` is answered on the loop itself from what the host loop published,
so it answers while clients sit there and while a scrape runs. A scrape may wait on the
database (`queue_depth`, at most its timeouts), so it runs on one thread of its own, and
requests that arrive meanwhile share its answer: at most one scrape thread at a time.
HTTP/1.1 is read and written by h11 (a small, typed, well-kept sans-I/O parser with bounded
buffers, used by httpx and uvicorn): no HTTP parsing of our own, and none of it needs a thread.

The thread starts once the first fork server runs, which is forked before any thread exists;
the socket is bound before that, so that an address that cannot be used is refused at start
(the fork server closes every descriptor it inherits: this one, and the loop's own). A fork
server restarted later is forked beside these threads, so they never take a lock the fork
server could need: they read only what the loop publishes (`HealthBoard`) and the registry,
and they log nothing per request, per connection or per scrape (a log line in progress would
leave the log's lock held in the fork server); asyncio's own reports of the unexpected are
dropped for the same reason.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import h11
import structlog
from prometheus_client.exposition import choose_encoder

from supervisor.metrics.address import AddressError, parse_address
from supervisor.metrics.registry import HostMetrics

__all__ = ["AddressError", "MetricsServer", "parse_address"]

log = structlog.get_logger(__name__)

#: Seconds a connection has to deliver a whole request (from its opening, or from its last
#: answer), and then to take the answer: a Prometheus scrape takes milliseconds of it.
IDLE_SECONDS = 10.0
#: Open connections at most; a new one past this drops the oldest idle one. A host is scraped
#: by a few Prometheus servers and checked by a few load balancers.
MAX_CONNECTIONS = 64
#: The most of a request's line and headers read (h11 answers 431 past it).
MAX_HEAD_BYTES = 16 * 1024
#: Connections waiting to be accepted: the loop accepts at once, this only absorbs a burst.
LISTEN_BACKLOG = 128
#: Bytes read from a socket at a time.
READ_BYTES = 16 * 1024


@dataclass(frozen=True)
class _Answer:
    status: int
    content_type: str
    body: bytes


class MetricsServer:
    """Bound at construction (an `OSError` when the address cannot be used), served from
    `start()` until `close()`."""

    def __init__(
        self,
        address: tuple[str, int],
        metrics: HostMetrics,
        *,
        idle_seconds: float = IDLE_SECONDS,
        max_connections: int = MAX_CONNECTIONS,
    ) -> None:
        self.metrics = metrics
        self.idle_seconds = idle_seconds
        self.max_connections = max_connections
        self._socket = _listening(address)
        self._loop = asyncio.new_event_loop()
        # asyncio would log what it did not expect (a failed accept, a callback's error) from
        # this thread; nothing may log here, and the connection at fault is closed anyway.
        self._loop.set_exception_handler(_dropped)
        self._stopping = asyncio.Event()
        self._thread: threading.Thread | None = None
        #: Open connections, the least recently active first; True while one is answered.
        self._connections: dict[asyncio.StreamWriter, bool] = {}
        #: The scrape in progress, which every `/metrics` request meanwhile waits on.
        self._scrape: asyncio.Future[bytes] | None = None
        self._scrape_type = ""

    @property
    def address(self) -> str:
        """Where it listens, the port resolved (`127.0.0.1:41234`)."""
        host, port = self._socket.getsockname()[:2]
        return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"

    def start(self) -> None:
        """Serve from a daemon thread: a host that exits never waits for a client."""
        self._thread = threading.Thread(target=self._serve, name="metrics", daemon=True)
        self._thread.start()
        log.info("metrics serving", address=self.address)

    def close(self) -> None:
        """Stop serving and close every connection; the socket is closed even if never served."""
        if self._thread is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(5.0)
        if not self._loop.is_running():
            self._loop.close()
        self._socket.close()

    # -- the loop's thread ------------------------------------------------------------------

    def _serve(self) -> None:
        self._loop.run_until_complete(self._accepting())

    async def _accepting(self) -> None:
        """Accept until `close()`; then close every connection and let each one's task end."""
        server = await asyncio.start_server(self._connection, sock=self._socket)
        async with server:
            await self._stopping.wait()
            for writer in list(self._connections):
                writer.transport.abort()
        others = asyncio.all_tasks() - {asyncio.current_task()}
        if others:
            await asyncio.wait(others, timeout=1.0)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Answer requests on one connection until it closes, breaks the protocol or idles."""
        if not self._admit(writer):
            writer.transport.abort()
            return
        http = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_seconds):
                        request = await _read_request(http, reader)
                except h11.RemoteProtocolError as error:
                    await self._refuse(http, writer, error)
                    return
                if request is None or writer.transport.is_closing():
                    return  # closed by the client, or dropped for a newer connection
                self._connections[writer] = True
                answer = await self._answer(request)
                async with asyncio.timeout(self.idle_seconds):
                    await _write(http, writer, request, answer)
                if http.our_state is not h11.DONE or http.their_state is not h11.DONE:
                    return
                http.start_next_cycle()
                self._idle(writer)
        except (TimeoutError, OSError, h11.LocalProtocolError):
            return
        finally:
            self._connections.pop(writer, None)
            writer.transport.abort()

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        """Track a new connection, dropping the oldest idle one at the cap; False when every
        open connection is being answered (the new one is closed then)."""
        if len(self._connections) >= self.max_connections:
            oldest = next((open_ for open_, busy in self._connections.items() if not busy), None)
            if oldest is None:
                return False
            del self._connections[oldest]
            oldest.transport.abort()
        self._connections[writer] = False
        return True

    def _idle(self, writer: asyncio.StreamWriter) -> None:
        """Answered: idle again, and now the most recently active."""
        self._connections.pop(writer, None)
        self._connections[writer] = False

    async def _answer(self, request: h11.Request) -> _Answer:
        """`/metrics` to prometheus_client's exposition, `/healthz` to ours, 404 otherwise."""
        path = request.target.split(b"?", 1)[0]
        if request.method not in (b"GET", b"HEAD"):
            return _text(405, "only GET and HEAD are served")
        if path == b"/metrics":
            return await self._exposition(_header(request, b"accept"))
        if path == b"/healthz":
            health = self.metrics.health.current
            return _text(200 if health.ok else 503, health.line)
        return _text(404, "not found: try /metrics or /healthz")

    async def _exposition(self, accept: str) -> _Answer:
        """The registry's exposition in the format `accept` asks for. Collecting may wait on
        the database, so it runs on a thread; requests meanwhile share the scrape under way
        (its format too)."""
        if self._scrape is None:
            encoder, self._scrape_type = choose_encoder(accept)
            self._scrape = self._loop.create_future()
            threading.Thread(
                target=self._collect, args=(encoder, self._scrape), name="metrics-scrape",
                daemon=True,
            ).start()  # fmt: skip
        content_type = self._scrape_type
        try:
            # Shielded: a client that leaves (or times out) must not cancel the others' scrape.
            body = await asyncio.shield(self._scrape)
        except Exception as error:  # a collector failed: the scrape says so, the host goes on
            return _text(500, f"cannot collect the metrics: {type(error).__name__}")
        return _Answer(200, content_type, body)

    def _collect(self, encoder: Callable[[Any], bytes], done: asyncio.Future[bytes]) -> None:
        """On the scrape thread: encode the registry, and hand the bytes to the loop."""
        try:
            body = encoder(self.metrics.registry)
        except Exception as error:
            self._loop.call_soon_threadsafe(self._scraped, done, None, error)
        else:
            self._loop.call_soon_threadsafe(self._scraped, done, body, None)

    def _scraped(
        self, done: asyncio.Future[bytes], body: bytes | None, error: Exception | None
    ) -> None:
        self._scrape = None
        if error is not None:
            done.set_exception(error)
        else:
            assert body is not None
            done.set_result(body)

    async def _refuse(
        self, http: h11.Connection, writer: asyncio.StreamWriter, error: h11.RemoteProtocolError
    ) -> None:
        """A request h11 cannot read: its status (400, 431...) when an answer can still be
        sent, and the connection closed."""
        if http.our_state not in (h11.IDLE, h11.SEND_RESPONSE):
            return
        answer = _text(error.error_status_hint, "bad request")
        async with asyncio.timeout(self.idle_seconds):
            await _write(http, writer, None, answer)


async def _read_request(http: h11.Connection, reader: asyncio.StreamReader) -> h11.Request | None:
    """The next whole request (its body, if any, read and dropped); None when the client
    closed the connection between requests."""
    request: h11.Request | None = None
    while True:
        event = http.next_event()
        if event is h11.NEED_DATA:
            http.receive_data(await reader.read(READ_BYTES))
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.EndOfMessage):
            return request
        elif isinstance(event, h11.ConnectionClosed):
            return None
        # h11.Data: a body nobody asked for, dropped as it comes.


async def _write(
    http: h11.Connection,
    writer: asyncio.StreamWriter,
    request: h11.Request | None,
    answer: _Answer,
) -> None:
    headers = [
        ("Content-Type", answer.content_type),
        ("Content-Length", str(len(answer.body))),
    ]
    if answer.status == 405:
        headers.append(("Allow", "GET, HEAD"))
    events: list[h11.Event] = [
        h11.Response(status_code=answer.status, headers=headers, reason=_phrase(answer.status))
    ]
    if request is None or request.method != b"HEAD":
        events.append(h11.Data(data=answer.body))
    events.append(h11.EndOfMessage())
    writer.write(b"".join(http.send(event) or b"" for event in events))
    await writer.drain()


def _phrase(status: int) -> bytes:
    return HTTPStatus(status).phrase.encode()


def _text(status: int, line: str) -> _Answer:
    return _Answer(status, "text/plain; charset=utf-8", f"{line}\n".encode())


def _header(request: h11.Request, name: bytes) -> str:
    """The value of header `name` (lower case), "" when absent."""
    for key, value in request.headers:
        if key == name:
            return value.decode("latin-1")
    return ""


def _listening(address: tuple[str, int]) -> socket.socket:
    """A socket bound and listening on `address`, non-blocking for the loop."""
    host, port = address
    family = socket.AF_INET6 if _is_ipv6(host) else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        # Not reused by a child: the fork server closes every descriptor it inherits.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _dropped(_loop: asyncio.AbstractEventLoop, _context: dict[str, Any]) -> None:
    """asyncio's report of something unexpected, not logged (see the module's docstring)."""


def _is_ipv6(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).version == 6
    except ValueError:
        return False
