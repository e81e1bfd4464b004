"""The metrics server over real HTTP on loopback: `/metrics`, `/healthz`, and nothing else."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest

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
