"""Fixtures of the database tests."""

from __future__ import annotations

import socket
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from supervisor.db.connection import parse_url
from supervisor.host.pool import Child


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    """The test's artifacts folder (made by whatever first stores into it)."""
    return tmp_path / "artifacts"


@pytest.fixture
def child() -> Iterator[Child]:
    """A child record with a real socket pair and no process: settling needs no process."""
    ours, theirs = socket.socketpair()
    yield Child(pid=1, sock=ours, spawned_at=0.0, max_jobs=10)
    ours.close()
    theirs.close()


@pytest.fixture
def empty_database_url(database_url: str, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all, on the same database as `database_url`: a fresh
    PostgreSQL database on the same server, or an empty SQLite file."""
    if database_url.startswith("sqlite"):
        path = tmp_path / "empty.db"
        sqlite3.connect(path).close()
        yield f"sqlite:///{path}"
        return
    server = parse_url(database_url)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    name = f"storyshelf_empty_{uuid.uuid4().hex[:12]}"
    with admin.connect() as conn:
        conn.exec_driver_sql(f"CREATE DATABASE {name}")
    try:
        yield server.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"DROP DATABASE {name} WITH (FORCE)")
        admin.dispose()
