"""Fixtures of the database tests."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from supervisor.host.pool import Child


@pytest.fixture
def child() -> Iterator[Child]:
    """A child record with a real socket pair and no process: settling needs no process."""
    ours, theirs = socket.socketpair()
    yield Child(pid=1, sock=ours, spawned_at=0.0, max_jobs=10)
    ours.close()
    theirs.close()
