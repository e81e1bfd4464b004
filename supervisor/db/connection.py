"""Engines and transactions for the two databases the host runs on.

PostgreSQL (psycopg 3) is for hosts that share work; SQLite is the embedded default. SQLite
writers must take the write lock when their transaction starts (`BEGIN IMMEDIATE`): a deferred
transaction that reads and then writes can fail with "database is locked" no matter how long
`busy_timeout` is, because two readers cannot both upgrade. So every transaction here is
immediate, which also makes the claim on SQLite exclusive, as the queue needs.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError

#: How long a SQLite writer waits for the lock before it gives up.
SQLITE_BUSY_TIMEOUT_MS = 30_000
#: How long connecting to PostgreSQL may take before the call fails (retryable).
CONNECT_TIMEOUT_SECONDS = 5
#: A statement that runs longer than this is cancelled by the server; none of ours should.
STATEMENT_TIMEOUT_MS = 30_000
#: libpq options that make a connection whose server went silent (a half-open TCP connection)
#: fail within about a minute instead of waiting for TCP to give up: every PostgreSQL
#: connection of the host has them, the LISTEN one too.
TCP_KEEPALIVES: dict[str, int] = {
    "tcp_user_timeout": 15_000,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
}


class DatabaseUnavailable(Exception):
    """The database could not be reached or dropped the connection; the call may be retried."""


def is_postgres(bind: Engine | Connection) -> bool:
    return bind.dialect.name == "postgresql"


def connect(url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `url`, with the settings each database needs to be a safe queue."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(url)
    return create_engine(
        url,
        pool_size=pool_size,
        # No pre-ping: it costs a round trip per transaction, and a connection that died with a
        # restarted server fails its next call as `DatabaseUnavailable`, which callers retry
        # (the pool then drops every connection of the old server).
        pool_recycle=1800,
        connect_args={
            "connect_timeout": CONNECT_TIMEOUT_SECONDS,
            "options": f"-c statement_timeout={STATEMENT_TIMEOUT_MS}",
            **TCP_KEEPALIVES,
        },
    )


def _sqlite_engine(url: str) -> Engine:
    database = make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @event.listens_for(engine, "connect")
    def _configure(dbapi_connection: sqlite3.Connection, _record: Any) -> None:
        # Let us issue BEGIN ourselves (pysqlite's own BEGIN is deferred).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _begin_immediate(connection: Connection) -> None:
        connection.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction, committed on success; a lost or unreachable database is `DatabaseUnavailable`."""
    try:
        with engine.begin() as conn:
            yield conn
    except DBAPIError as error:
        if connection_lost(error):
            raise DatabaseUnavailable(_describe(error)) from error
        raise


def connection_lost(error: DBAPIError) -> bool:
    """Whether `error` means the database went away (worth retrying), not a wrong statement."""
    return isinstance(error, OperationalError) or error.connection_invalidated


def _describe(error: DBAPIError) -> str:
    first_line = str(error.orig).strip().splitlines()[0] if error.orig else str(error)
    return f"database unavailable: {first_line}"
