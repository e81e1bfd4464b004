"""The soak's latency forwarder (`scripts.partitions.latency`) passes a reset on as a reset.

A database that exits with a statement unread (restarted while a COMMIT was on its way) resets
its connection. The forwarder used to drop that reset: the host, whose connection the
forwarder kept alive and acknowledged, waited for the COMMIT's answer forever (its stack,
dumped by the soak: psycopg's `wait` under `commit`), and the soak failed it for not exiting.
"""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.hosts import ROOT
from tests.postgres_server import free_port


@pytest.fixture
def target() -> Iterator[socket.socket]:
    """A listener standing for the database."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    yield listener
    listener.close()


@pytest.fixture
def forwarder(target: socket.socket) -> Iterator[int]:
    """The forwarder to `target`; the port it listens on."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "scripts.partitions.latency", "--delay-ms", "2",
         f"{port}=127.0.0.1:{target.getsockname()[1]}"],
        stdout=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    assert process.stdout.readline().strip() == b"forwarding"
    yield port
    process.kill()
    process.wait()


@pytest.fixture
def connected(
    target: socket.socket, forwarder: int
) -> Iterator[tuple[socket.socket, socket.socket]]:
    """A client connected through the forwarder, and the database's side of it."""
    client = socket.create_connection(("127.0.0.1", forwarder), timeout=10)
    database, _ = target.accept()
    yield client, database
    client.close()
    database.close()


def test_a_database_that_resets_resets_the_client_it_forwarded_for(
    connected: tuple[socket.socket, socket.socket],
) -> None:
    client, database = connected
    client.sendall(b"COMMIT")
    assert select.select([database], [], [], 10)[0], "the statement never reached the database"
    database.close()  # unread data: the kernel answers with a reset
    with pytest.raises(ConnectionResetError):
        client.recv(1)  # a dropped reset would wait here for the timeout, as the host did


def test_a_database_that_closes_ends_the_clients_stream(
    connected: tuple[socket.socket, socket.socket],
) -> None:
    client, database = connected
    database.sendall(b"bye")
    database.close()
    received = b""
    while chunk := client.recv(16):
        received += chunk
    assert received == b"bye"
