"""A stored build served to the child's page, and every other request blocked.

The child serves the build's files itself, on a loopback HTTP server of its own (127.0.0.1, a
port the kernel picks, one thread per connection; when no thread can be had, under a pids limit,
the connection is served on the server's own thread, one request then closed, rather than
dropped: a dropped request would fail a story for the host's trouble), from the manifest and
nothing else: a path the
manifest does not list is a 404. Measured against Playwright's request interception answering
every request from Python: a page load of the fixture took 0.45 s from the server and 0.6-0.9 s
through the interception, which also disables the browser's cache. So only the requests that
leave the server's origin are intercepted (a pattern that matches every other URL), and those
are aborted at once, never waited for, and logged once per URL per story (`request blocked`).

Responses carry the file's digest as ETag and must be revalidated: a later job's server may get
the same port, and the browser's cache must then never hand a page the other build's file.
"""

from __future__ import annotations

import contextlib
import mimetypes
import re
import sys
import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any
from urllib.parse import unquote, urlsplit

import structlog
from playwright.sync_api import Page, ProxySettings, Request, Response, Route, WebSocketRoute

from child.browser import network
from child.storybook.stored import StoredBuild, StorybookProblem
from child.worker.resources import OutOfResources
from ipc.artifacts.store import StoreError

log = structlog.get_logger(__name__)

#: Content types the browser is strict about (module scripts need a JavaScript type), then
#: what `mimetypes` knows.
CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".cjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".map": "application/json",
    ".svg": "image/svg+xml",
    ".woff": "font/woff",
    ".woff2": "font/woff2",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".wasm": "application/wasm",
    ".txt": "text/plain; charset=utf-8",
}
CHUNK_BYTES = 1 << 16


def content_type(path: str) -> str:
    """The Content-Type of a build's file, by its name."""
    suffix = path[path.rfind(".") :].lower() if "." in path.rsplit("/", 1)[-1] else ""
    known = CONTENT_TYPES.get(suffix)
    if known:
        return known
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "application/octet-stream"


class Site:
    """The loopback server of one stored build; a context manager that stops it."""

    def __init__(self, build: StoredBuild) -> None:
        self.build = build
        self._handler: type[_Handler] = type("BuildHandler", (_Handler,), {"build": build})
        with network.entered():  # listening where the browser is, and nowhere else
            self._server = _SiteServer(("127.0.0.1", 0), self._handler)
        self.origin = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="storybook-site", daemon=True
        )
        try:
            self._thread.start()
        except RuntimeError as error:  # no thread to be had: the host's trouble, not the job's
            self._server.server_close()
            raise OutOfResources(f"out of resources: {error}") from error

    def serve(self, build: StoredBuild) -> None:
        """Serve `build`'s files through its own artifacts from now on: the same files (the
        same manifest), read for another job of the build (`child.storybook.kept`)."""
        self.build = build
        self._handler.build = build

    def serving(self) -> int:
        """How many requests the server is answering now."""
        return self._server.serving

    def take_failed(self) -> str | None:
        """The first file the server could not give since the last call (the store lost it,
        or did not answer), else None."""
        return self._server.take_failed()

    def url(self, path: str) -> str:
        """The URL of `path` (with its query) on this server."""
        return f"{self.origin}/{path.lstrip('/')}"

    def still_reading(self, what: str) -> ServeFailed | None:
        """The failure to raise when `what` went wrong while requests still waited on the
        store for a file of the build (a page that failed meanwhile, its render cap passed,
        failed for the store, not the story); None when none did."""
        reading = list(self._server.reading.values())
        if not reading:
            return None
        return ServeFailed(
            f"{what} while the child's server still waited on the store for {reading[0]}"
        )

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Site:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


class _SiteServer(ThreadingHTTPServer):
    """A thread per connection while threads can be had; else the server's own thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[_Handler]) -> None:
        super().__init__(address, handler)
        self.handler = handler
        #: The file each request thread is reading from the store, by thread id.
        self.reading: dict[int, str] = {}
        #: The files it could not give, since `Site.take_failed` last asked.
        self.failed: list[str] = []
        #: Requests being answered now, by every request thread.
        self.serving = 0
        self._lock = threading.Lock()

    def note_failed(self, relative: str) -> None:
        """`relative` could not be given (from a request thread)."""
        with self._lock:
            self.failed.append(relative)

    def take_failed(self) -> str | None:
        with self._lock:
            failed, self.failed = self.failed, []
        return failed[0] if failed else None

    @contextlib.contextmanager
    def answering(self) -> Iterator[None]:
        """Count this request as being answered while the block runs."""
        with self._lock:
            self.serving += 1
        try:
            yield
        finally:
            with self._lock:
                self.serving -= 1

    @contextlib.contextmanager
    def reading_file(self, relative: str) -> Iterator[None]:
        """Note that this thread reads `relative` from the store while the block runs."""
        thread = threading.get_ident()
        self.reading[thread] = relative
        try:
            yield
        finally:
            del self.reading[thread]

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except RuntimeError as error:  # "can't start new thread"
            log.warning("serving a request without a thread of its own", error=str(error))
            try:
                self.handler(request, client_address, self, alone=True)
            except Exception:
                self.handle_error(request, client_address)
            finally:
                self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """One line, not the traceback socketserver prints to stderr; none worth a warning
        when the page went away mid-answer (a page closed after its story, or that failed)."""
        error = sys.exc_info()[1]
        gone = isinstance(error, ConnectionResetError | BrokenPipeError)
        (log.debug if gone else log.warning)(
            "the child's server failed a request", error=str(error) or repr(error)
        )


class _Handler(BaseHTTPRequestHandler):
    build: StoredBuild
    server: _SiteServer
    protocol_version = "HTTP/1.1"

    def __init__(self, request: Any, client_address: Any, server: Any, *, alone: bool = False):
        #: Served on the server's own thread: one request, then the connection is closed, so
        #: that no idle keep-alive connection holds the server from the next.
        self.alone = alone
        super().__init__(request, client_address, server)

    def end_headers(self) -> None:
        if self.alone:
            self.send_header("Connection", "close")
        super().end_headers()

    def do_GET(self) -> None:
        with self.server.answering():
            self._answer(body=True)

    def do_CONNECT(self) -> None:
        """A tunnel asked of the server as a page's proxy (`RequestGuard.proxy`): refused."""
        self._refuse_proxying()

    def do_HEAD(self) -> None:
        with self.server.answering():
            self._answer(body=False)

    def _refuse_proxying(self) -> None:
        log.warning("request blocked", url=self.path, through="the page's proxy")
        self._empty(HTTPStatus.FORBIDDEN)

    def _answer(self, *, body: bool) -> None:
        if not self.path.startswith("/"):  # a request for elsewhere, sent to it as a proxy
            self._refuse_proxying()
            return
        relative = unquote(urlsplit(self.path).path).lstrip("/")
        if relative == "" or relative.endswith("/"):
            relative += "index.html"
        digest = self.build.files.get(relative)
        if digest is None:
            log.debug("not in the build", path=relative)
            self._empty(HTTPStatus.NOT_FOUND)
            return
        etag = f'"{digest}"'
        if self.headers.get("If-None-Match") == etag:
            self._empty(HTTPStatus.NOT_MODIFIED, etag)
            return
        try:
            with self.server.reading_file(relative):
                file = self.build.open(relative)
        except (OSError, StorybookProblem, StoreError) as error:
            # The build lists it: the store lost it or does not answer, which is no fault of
            # the story's. A 5xx tells the page's renderer (`child.browser.render`) not to
            # record the capture.
            log.warning("a file of the build cannot be read", path=relative, error=str(error))
            self.server.note_failed(relative)
            self._empty(HTTPStatus.INTERNAL_SERVER_ERROR)
            return
        with file:
            size = file.seek(0, 2)
            file.seek(0)
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", content_type(relative))
            self.send_header("Content-Length", str(size))
            self.send_header("Cache-Control", "no-cache")
            self.send_header("ETag", etag)
            self.end_headers()
            if body:
                while chunk := file.read(CHUNK_BYTES):
                    self.wfile.write(chunk)

    def _empty(self, status: HTTPStatus, etag: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", "0")
        if etag:
            self.send_header("ETag", etag)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: every request is a file of the build; failures are logged above."""


class ServeFailed(RuntimeError):
    """The child's own server failed a request of the page (a file the store did not give, a
    thread it could not start, a connection reset): what the page shows or tells is not the
    build's, so the job fails, to be tried again, instead of recording it."""


class ServeFailures:
    """The first request of a page that the site failed, as the page saw it: listen with
    `watch(page)`, and `take()` it after a load.

    A service worker of the build (MSW's) answers requests of its own: an error status or a
    network error it gives is the story's data, not the server's failure. Its answers say
    they are the worker's; a request it failed does not, so once the page's context runs a
    worker (`workers`), a failed request is the server's only when the server says it
    failed it (`Site`'s `failed`)."""

    def __init__(self, site: Site) -> None:
        self.origin = site.origin
        self._site = site
        self.workers = False
        self._first: str | None = None

    def watch(self, page: Page) -> None:
        self.workers = False
        page.on("response", self.response)
        page.on("requestfailed", self.request_failed)

    def response(self, response: Response) -> None:
        if response.from_service_worker:
            return
        if response.status >= 500 and response.url.startswith(self.origin):
            self._note(f"{response.url.removeprefix(self.origin)}: HTTP {response.status}")

    def request_failed(self, request: Request) -> None:
        failure = request.failure or "failed"
        # Requests to elsewhere are the guard's to abort; one the page itself dropped (a
        # navigation, a removed image) is ERR_ABORTED and no fault of the server's.
        if self.workers or not request.url.startswith(self.origin) or "ERR_ABORTED" in failure:
            return
        self._note(f"{request.url.removeprefix(self.origin)}: {failure}")

    def take(self) -> ServeFailed | None:
        """The failure seen since the last `take`, as the error to raise; None if none."""
        first, self._first = self._first, None
        failed = self._site.take_failed()
        first = first or (f"/{failed}: the store did not give it" if failed else None)
        if first is None:
            return None
        return ServeFailed(f"the child's server failed the page's request for {first}")

    def _note(self, failure: str) -> None:
        if self._first is None:
            self._first = failure


class RequestGuard:
    """Aborts every request of a page that leaves `origin` (and closes every WebSocket, where
    the browser shares the host's network), logging each URL once per story."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.story_id: str | None = None
        self.blocked: list[tuple[str | None, str]] = []
        self._logged: set[tuple[str | None, str]] = set()
        self._pattern = re.compile(f"^(?!{re.escape(origin)}/)")

    @property
    def proxy(self) -> ProxySettings:
        """A page's proxy: the build's own server, passed by for the build's own files. What
        the interception does not see and would go out directly (WebRTC's TURN over TCP) goes
        to it instead, and is refused there. `<-loopback>` takes away the browser's own rule
        that loopback never goes through a proxy."""
        return {"server": self.origin, "bypass": f"<-loopback>,{urlsplit(self.origin).netloc}"}

    def install(self, page: Page) -> None:
        page.route(self._pattern, self._abort)
        if not network.contained():
            # WebSockets pass by the request interception and, without a network of the
            # browser's own (`child.browser.network`), reach any loopback port: every one is
            # closed before it connects (a build's static files serve none). Only then: the
            # routing slows every page (measured: 1.07x storycap's stories/s without it, 0.88x
            # with it, on tremor-sb8), and in its own network a WebSocket has no route anyway.
            page.route_web_socket(self._pattern, self._refuse)

    def _abort(self, route: Route) -> None:
        with contextlib.suppress(Exception):  # the page may be gone meanwhile
            route.abort("blockedbyclient")
        self._note(route.request.url)

    def _refuse(self, socket: WebSocketRoute) -> None:
        with contextlib.suppress(Exception):
            socket.close(code=1008, reason="blocked: the capture serves the build's files only")
        self._note(socket.url)

    def _note(self, url: str) -> None:
        key = (self.story_id, url)
        if key not in self._logged:
            self._logged.add(key)
            self.blocked.append(key)
            log.warning("request blocked", url=url, story_id=self.story_id)
