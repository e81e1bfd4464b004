"""Fixtures of the real-process tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hosts import StartHost, hosts


@pytest.fixture
def start_host(database_url: str, tmp_path: Path) -> Iterator[StartHost]:
    """Starts real hosts on the test's database with `tmp_path/artifacts`; kills them after."""
    yield from hosts(database_url, tmp_path / "artifacts")
