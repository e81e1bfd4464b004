"""The metrics server over real HTTP on loopback: `/metrics`, `/healthz`, and nothing else."""

from __future__ import annotations

import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from supervisor.metrics.address import AddressError, parse_address
from supervisor.metrics.health import judge
from supervisor.metrics.registry import HostMetrics
from supervisor.metrics.server import MetricsServer


def get(server: MetricsServer, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://{server.address}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


@pytest.fixture
def served() -> Iterator[MetricsServer]:
    server = MetricsServer(("127.0.0.1", 0), HostMetrics())
    server.start()
    yield server
    server.close()


@pytest.mark.parametrize(
    ("text", "address"),
    [
        ("127.0.0.1:9464", ("127.0.0.1", 9464)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
        ("[::1]:9464", ("::1", 9464)),
        ("localhost:80", ("localhost", 80)),
    ],
)
def test_addresses_parse(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["9464", ":9464", "127.0.0.1:", "host:port", "h:70000", ""])
def test_bad_addresses_say_what_is_expected(text: str) -> None:
    with pytest.raises(AddressError, match="is not HOST:PORT"):
        parse_address(text)


def test_port_zero_binds_a_free_port_and_says_which(served: MetricsServer) -> None:
    host, port = parse_address(served.address)
    assert host == "127.0.0.1" and port > 0


def test_metrics_are_prometheus_exposition(served: MetricsServer) -> None:
    served.metrics.child_crashed("SIGSEGV")
    status, body = get(served, "/metrics")
    assert status == 200
    assert 'storyshelf_child_crashes_total{cause="SIGSEGV"} 1.0' in body


def test_healthz_answers_the_latest_decision(served: MetricsServer) -> None:
    assert get(served, "/healthz") == (503, "starting: engine not checked yet\n")
    served.metrics.health.publish(
        judge(engine_checked=True, draining=None, database_error=None, spawn_deaths=None)
    )
    assert get(served, "/healthz") == (200, "ok\n")
    served.metrics.health.publish(
        judge(engine_checked=True, draining="SIGTERM", database_error=None, spawn_deaths=None)
    )
    assert get(served, "/healthz") == (503, "draining: SIGTERM\n")


def test_other_paths_are_not_found(served: MetricsServer) -> None:
    assert get(served, "/")[0] == 404
    assert get(served, "/metrics/extra")[0] == 404


def test_an_address_in_use_cannot_be_bound() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(OSError):
            MetricsServer(taken.getsockname(), HostMetrics())


def healthz_seconds(server: MetricsServer) -> float:
    """How long `/healthz` took to answer, on a connection of its own."""
    started = time.monotonic()
    assert get(server, "/healthz")[0] in (200, 503)
    return time.monotonic() - started


def idle_sockets(server: MetricsServer, count: int) -> list[socket.socket]:
    host, port = parse_address(server.address)
    return [socket.create_connection((host, port), timeout=5) for _ in range(count)]


def slow_loris(server: MetricsServer, count: int) -> list[socket.socket]:
    """Connections that began a request and never end it."""
    sockets = idle_sockets(server, count)
    for sock in sockets:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    return sockets


def closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """Whether the server closed `sock` (EOF or reset) within `timeout`."""
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return False
    except ConnectionResetError:
        pass
    return True


def test_idle_and_slow_clients_hold_no_thread_and_healthz_still_answers(
    served: MetricsServer,
) -> None:
    before = threading.active_count()
    sockets = idle_sockets(served, 200) + slow_loris(served, 50)
    try:
        time.sleep(0.5)  # every connection accepted, and slow ones sending their part
        assert threading.active_count() <= before + 1
        assert healthz_seconds(served) < 1.0
        assert get(served, "/healthz") == (503, "starting: engine not checked yet\n")
    finally:
        for sock in sockets:
            sock.close()


def test_a_connection_that_sends_no_whole_request_is_closed_after_the_timeout() -> None:
    server = MetricsServer(("127.0.0.1", 0), HostMetrics(), idle_seconds=0.5)
    server.start()
    try:
        (idle,) = idle_sockets(server, 1)
        (slow,) = slow_loris(server, 1)
        started = time.monotonic()
        for _ in range(3):  # dribbling bytes does not put the deadline off
            time.sleep(0.1)
            slow.sendall(b"x")
        assert closed_by_server(idle, 2.0) and closed_by_server(slow, 2.0)
        assert time.monotonic() - started < 1.5
        # Between two requests on one connection too.
        with socket.create_connection(parse_address(server.address), timeout=5) as kept:
            kept.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert kept.recv(4096).startswith(b"HTTP/1.1 503 ")
            assert closed_by_server(kept, 2.0)
    finally:
        server.close()


def test_past_the_cap_the_oldest_idle_connection_is_dropped_for_a_new_one() -> None:
    server = MetricsServer(("127.0.0.1", 0), HostMetrics(), max_connections=4)
    server.start()
    try:
        oldest, *others = idle_sockets(server, 4)
        time.sleep(0.2)  # all four accepted
        assert get(server, "/healthz")[0] == 503
        assert closed_by_server(oldest, 2.0)
        assert not any(closed_by_server(sock, 0.1) for sock in others)
    finally:
        server.close()


def exchange(sock: socket.socket, request: bytes, *, head: bool = False) -> tuple[bytes, bytes]:
    """Send `request` on a kept connection; the answer's status line and body."""
    sock.sendall(request)
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += sock.recv(4096)
    top, _, body = answer.partition(b"\r\n\r\n")
    length = 0 if head else int(top.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(4096)
    return top.split(b"\r\n")[0], body


def test_a_connection_serves_several_requests_and_head_has_no_body(served: MetricsServer) -> None:
    with socket.create_connection(parse_address(served.address), timeout=5) as kept:
        for _ in range(2):
            assert exchange(kept, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n") == (
                b"HTTP/1.1 503 Service Unavailable",
                b"starting: engine not checked yet\n",
            )
        assert exchange(kept, b"HEAD /metrics HTTP/1.1\r\nHost: x\r\n\r\n", head=True) == (
            b"HTTP/1.1 200 OK",
            b"",
        )
        posted = b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"
        assert exchange(kept, posted)[0] == b"HTTP/1.1 405 Method Not Allowed"
        assert exchange(kept, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")[0].endswith(b"200 OK")


def test_a_request_that_is_not_http_is_answered_400_and_closed(served: MetricsServer) -> None:
    with socket.create_connection(parse_address(served.address), timeout=5) as bad:
        bad.sendall(b"HELLO\r\n\r\n")
        assert bad.recv(4096).startswith(b"HTTP/1.1 400 ")
        assert closed_by_server(bad, 2.0)


class _SlowCollector(Collector):
    """A collector that takes as long as a scrape waiting on a slow database."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def collect(self) -> Iterator[GaugeMetricFamily]:
        time.sleep(self.seconds)
        yield GaugeMetricFamily("slow", "slow", value=1)


def test_a_scrape_that_waits_holds_up_neither_healthz_nor_more_than_one_thread(
    served: MetricsServer,
) -> None:
    served.metrics.registry.register(_SlowCollector(1.5))
    before = threading.active_count()
    answers: list[tuple[int, str]] = []
    scrapers = [
        threading.Thread(target=lambda: answers.append(get(served, "/metrics"))) for _ in range(5)
    ]
    for scraper in scrapers:
        scraper.start()
    time.sleep(0.2)
    assert healthz_seconds(served) < 0.5
    assert threading.active_count() <= before + len(scrapers) + 1  # one scrape thread
    for scraper in scrapers:
        scraper.join(10)
    assert [status for status, _ in answers] == [200] * 5
    assert all("slow 1.0" in body for _, body in answers)
