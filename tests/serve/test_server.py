"""`serve` as an operator meets it: settings it cannot use refused in one line with exit 2, a
clean exit on SIGTERM, and connections that cannot be held open for nothing.

The bounds are tested on the app served by uvicorn in a thread of the test (the same `server`
that `serve` runs), with a short head deadline so that the test takes a second, not ten.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from starlette.types import ASGIApp

from ipc import logs
from ipc.artifacts.folder import FolderStore
from ipc.artifacts.s3 import S3Store
from supervisor.commands.main import main
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from supervisor.serve.app import make_app
from supervisor.serve.auth import ReviewToken
from supervisor.serve.context import Serving
from supervisor.serve.server import MAX_HEAD_BYTES, address_of, listening, server
from tests.serve.conftest import serve, stop

#: The head deadline of the in-process server, in seconds.
HEAD_SECONDS = 0.5


def run_serve(tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    """`python -m supervisor serve` with `options`, in this process: its exit status and stderr."""
    arguments = [
        "serve", "--database-url", f"sqlite:///{tmp_path / 'db.sqlite'}",
        "--artifacts", str(tmp_path / "artifacts"), *options,
    ]  # fmt: skip
    try:
        status = main(arguments)
    except SystemExit as exit_:
        status = int(exit_.code or 0)
    return status, capsys.readouterr().err


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("localhost", "'localhost' is not HOST:PORT (such as 127.0.0.1:8080; port 0 picks one)"),
        ("127.0.0.1:99999", "is not HOST:PORT"),
        ("127.0.0.1:http", "is not HOST:PORT"),
        ("no-such-host.invalid:8080", "cannot listen there"),
    ],
)
def test_an_address_it_cannot_use_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], address: str, said: str
) -> None:
    status, stderr = run_serve(tmp_path, capsys, "--address", address)
    assert status == 2
    assert said in stderr and stderr.startswith("storyshelf serve: ")
    assert stderr.count("\n") == 1 and "Traceback" not in stderr
    assert not (tmp_path / "db.sqlite").exists()  # refused before anything was opened


def test_a_port_in_use_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    taken = listening("127.0.0.1", 0)
    address = address_of(taken)
    try:
        status, stderr = run_serve(tmp_path, capsys, "--address", address)
    finally:
        taken.close()
    assert not (tmp_path / "db.sqlite").exists()
    assert status == 2
    assert stderr == (
        f"storyshelf serve: --address {address}: cannot listen there: Address already in use\n"
    )


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_sigterm_or_ctrl_c_stops_it_with_exit_0(tmp_path: Path, number: signal.Signals) -> None:
    url = f"sqlite:///{tmp_path / 'db.sqlite'}"
    engine = connect(url)
    upgrade(engine)
    engine.dispose()
    served = serve(url, str(tmp_path / "artifacts"), tmp_path)
    try:
        assert served.url.startswith("http://127.0.0.1:")
        served.process.send_signal(number)
        assert served.process.wait(15) == 0
    finally:
        stop(served)
    assert '"event": "stopped serving"' in served.log()
    assert "Traceback" not in served.log()


@contextmanager
def thread_server(app: ASGIApp, head_seconds: float = HEAD_SECONDS) -> Iterator[tuple[str, int]]:
    """`app` on uvicorn in a thread, as `serve` runs it; its address."""
    sock = listening("127.0.0.1", 0)
    running = server(app, head_seconds=head_seconds)
    thread = threading.Thread(target=running.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not running.started:
        time.sleep(0.01)
    try:
        host, port = sock.getsockname()[:2]
        yield host, port
    finally:
        running.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def in_thread(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """The app on uvicorn in a thread, its head deadline `HEAD_SECONDS`; its address."""
    engine = connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    upgrade(engine)
    store = FolderStore(tmp_path / "artifacts")
    try:
        with thread_server(make_app(Serving(engine, store, ReviewToken(None)))) as address:
            yield address
    finally:
        engine.dispose()


def closed_within(sock: socket.socket, seconds: float) -> tuple[bool, bytes]:
    """Whether the server closed `sock` within `seconds`, and what it said before."""
    sock.settimeout(seconds)
    said = b""
    try:
        while chunk := sock.recv(65536):
            said += chunk
    except TimeoutError:
        return False, said
    return True, said


def test_a_connection_that_sends_nothing_is_closed(in_thread: tuple[str, int]) -> None:
    with socket.create_connection(in_thread) as silent:
        started = time.monotonic()
        closed, said = closed_within(silent, 5)
        assert closed and said == b""
        assert HEAD_SECONDS * 0.8 <= time.monotonic() - started < 3


def test_a_head_sent_a_byte_at_a_time_is_cut_off(in_thread: tuple[str, int]) -> None:
    with socket.create_connection(in_thread) as slow:
        slow.sendall(b"GET / HTTP/1.1\r\n")
        time.sleep(HEAD_SECONDS / 2)
        slow.sendall(b"Host: x\r\n")
        closed, _ = closed_within(slow, 5)
        assert closed


def test_a_connection_idle_after_an_answer_is_closed(in_thread: tuple[str, int]) -> None:
    with socket.create_connection(in_thread) as kept:
        kept.sendall(b"GET /favicon.ico HTTP/1.1\r\nHost: x\r\n\r\n")
        kept.settimeout(5)
        assert kept.recv(65536).startswith(b"HTTP/1.1 204")
        closed, _ = closed_within(kept, 5)
        assert closed


def test_a_head_too_large_is_refused_before_it_ends(in_thread: tuple[str, int]) -> None:
    with socket.create_connection(in_thread) as large:
        large.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"x" * MAX_HEAD_BYTES)
        closed, said = closed_within(large, 5)
        assert closed and said.startswith(b"HTTP/1.1 400")


class BrokenStore(S3Store):
    """A bucket whose reads fail in a way nobody planned for (not a `StoreError`)."""

    def read_bytes(self, key: str) -> bytes:
        raise RuntimeError("a bug")


def test_a_fault_of_ours_is_a_500_in_one_line_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("debug", json=True)
    engine = connect(f"sqlite:///{tmp_path / 'db.sqlite'}")
    upgrade(engine)
    app = make_app(Serving(engine, BrokenStore("bucket"), ReviewToken(None)))
    try:
        with thread_server(app) as (host, port):
            answer = httpx.get(f"http://{host}:{port}/reports/web/1/index.html", timeout=10)
    finally:
        engine.dispose()
    assert answer.status_code == 500
    assert answer.text == "the server failed to answer: its log says why\n"
    logged = capsys.readouterr().err
    assert '"event": "request failed"' in logged and "RuntimeError: a bug" in logged
    assert logged.count("Traceback") == 1  # ours, in the event; uvicorn's own is kept out
