"""A real HTTP server for the webhook tests: on 127.0.0.1, answering each POST as scripted.

Each request takes the next `Answer` of the script (a 200 once the script is spent): its
status, its body, and how long to wait before answering (past a notification's timeout, for
the tests of timeouts). Every request is kept (`received`) as it arrived, body bytes and all.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.hosts import PATIENCE


@dataclass(frozen=True)
class Answer:
    status: int = 200
    body: bytes = b"ok"
    delay_seconds: float = 0.0


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


class WebhookServer(ThreadingHTTPServer):
    daemon_threads = True
    #: A handler still sleeping past a client's timeout must not hold up the test's end.
    block_on_close = False

    def __init__(self, script: Sequence[Answer]) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.script = list(script)
        self.received: list[Received] = []
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/hooks/storyshelf"

    def next_answer(self, received: Received) -> Answer:
        with self.lock:
            self.received.append(received)
            return self.script.pop(0) if self.script else Answer()

    def wait_for(self, count: int, timeout: float = PATIENCE) -> list[Received]:
        """The requests once `count` have arrived."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"{len(self.received)} of {count} requests arrived")
            time.sleep(0.02)
        return list(self.received)


class _Handler(BaseHTTPRequestHandler):
    server: WebhookServer
    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        answer = self.server.next_answer(Received(self.path, dict(self.headers.items()), body))
        time.sleep(answer.delay_seconds)
        try:
            self.send_response(answer.status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(answer.body)))
            self.end_headers()
            self.wfile.write(answer.body)
        except OSError:
            pass  # the client gave up waiting

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def webhook_server(*script: Answer) -> Iterator[WebhookServer]:
    server = WebhookServer(script)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
