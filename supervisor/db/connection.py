"""Engines and transactions for the two databases the host runs on.

PostgreSQL (psycopg 3) is for hosts that share work; SQLite is the embedded default. SQLite
writers must take the write lock when their transaction starts (`BEGIN IMMEDIATE`): a deferred
transaction that reads and then writes can fail with "database is locked" no matter how long
`busy_timeout` is, because two readers cannot both upgrade. So every transaction here is
immediate, which also makes the claim on SQLite exclusive, as the queue needs.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Connection, Engine, Table, create_engine, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, OperationalError

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


#: The drivers the host runs on: psycopg 3 for PostgreSQL, the standard library's for SQLite.
DRIVERS = {"postgresql": "psycopg", "sqlite": "pysqlite"}


class DatabaseProblem(Exception):
    """A database the host cannot use as it is; the message is the one line a user reads."""


class DatabaseUnavailable(DatabaseProblem):
    """The database could not be reached or dropped the connection; the call may be retried."""


class DatabaseUnusable(DatabaseProblem):
    """The database will not work until someone changes something (a folder, the schema)."""


class UnsupportedDatabase(ValueError):
    """A database URL that does not parse or names a database or driver the host cannot use."""


def is_postgres(bind: Engine | Connection) -> bool:
    return bind.dialect.name == "postgresql"


def upsert(conn: Connection, table: Table) -> postgresql.Insert | sqlite.Insert:
    """An INSERT into `table` that takes an ON CONFLICT clause, in `conn`'s dialect (both
    spell `on_conflict_do_nothing` and `on_conflict_do_update` alike)."""
    return postgresql.insert(table) if is_postgres(conn) else sqlite.insert(table)


def parse_url(url: str) -> URL:
    """`url` as a SQLAlchemy URL on a database and driver we run on; `postgresql://` means
    psycopg 3, the only PostgreSQL driver installed (SQLAlchemy's own default is psycopg2)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UnsupportedDatabase(
            "not a database URL: use postgresql+psycopg://HOST/DB or sqlite:///FILE"
        ) from None
    backend = parsed.get_backend_name()
    if backend not in DRIVERS or parsed.drivername not in (
        backend,
        f"{backend}+{DRIVERS[backend]}",
    ):
        raise UnsupportedDatabase(
            f"{parsed.render_as_string(hide_password=True)}: the host runs on PostgreSQL "
            "(postgresql+psycopg://HOST/DB) and SQLite (sqlite:///FILE) only"
        )
    return parsed.set(drivername=f"{backend}+{DRIVERS[backend]}")


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite URL names; None for PostgreSQL and for an in-memory database."""
    parsed = parse_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


def connect(url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `url`, with the settings each database needs to be a safe queue.

    A SQLite file is opened at once: a folder that cannot hold it is a fault of the set-up, said
    in one line now, not a retry later. A PostgreSQL server is reached on first use.
    """
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, sqlite_file(url))
    return create_engine(
        parsed,
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


def _sqlite_engine(url: URL, file: Path | None) -> Engine:
    if file is not None:
        _make_room(file)
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

    try:
        engine.connect().close()
    except DBAPIError as error:
        engine.dispose()
        raise DatabaseUnusable(
            f"cannot open the SQLite database {url.database}: {_first_line(error)}"
        ) from error
    return engine


def _make_room(path: Path) -> None:
    """The folder of a SQLite file, created if missing; SQLite writes its journal beside the file
    (`-wal`, `-shm`), so the folder must be writable even when the file exists."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DatabaseUnusable(
            f"cannot create the folder {path.parent} of the SQLite database: {error.strerror}"
        ) from error
    if not os.access(path.parent, os.W_OK):
        raise DatabaseUnusable(
            f"cannot write the SQLite database {path}: its folder {path.parent} is not writable"
        )


@contextmanager
def transaction(engine: Engine) -> Iterator[Connection]:
    """One transaction, committed on success; a lost or unreachable database is `DatabaseUnavailable`."""
    with _unavailable_named(), engine.begin() as conn:
        yield conn


@contextmanager
def schema_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction for changing the schema, as `transaction` otherwise.

    SQLite changes most of a table only by building a new one and dropping the old, and with
    foreign keys on, dropping a table others point at counts violations that the new table,
    renamed into place, does not take back. So, as SQLite's documentation prescribes, its
    foreign keys are off for the transaction (the pragma only takes effect outside one) and
    checked whole before the commit.
    """
    with _unavailable_named(), engine.connect() as conn:
        sqlite = conn.dialect.name == "sqlite"
        raw = conn.connection.dbapi_connection
        assert raw is not None, "a checked-out connection has its DB-API connection"
        if sqlite:
            raw.execute("PRAGMA foreign_keys=OFF")
        try:
            with conn.begin():
                yield conn
                if sqlite and (broken := conn.exec_driver_sql("PRAGMA foreign_key_check").first()):
                    raise DatabaseUnusable(
                        f"the schema change breaks a foreign key: {tuple(broken)}"
                    )
        finally:
            if sqlite:
                raw.execute("PRAGMA foreign_keys=ON")


@contextmanager
def _unavailable_named() -> Iterator[None]:
    """A lost or unreachable database raised inside as `DatabaseUnavailable`."""
    try:
        yield
    except DBAPIError as error:
        if connection_lost(error):
            raise DatabaseUnavailable(_describe(error)) from error
        raise


def connection_lost(error: DBAPIError) -> bool:
    """Whether `error` means the database went away (worth retrying), not a wrong statement."""
    return isinstance(error, OperationalError) or error.connection_invalidated


def _describe(error: DBAPIError) -> str:
    return f"database unavailable: {_first_line(error)}"


def _first_line(error: DBAPIError) -> str:
    """The driver's own message, without SQLAlchemy's statement and background link."""
    return (str(error.orig) if error.orig else str(error)).strip().splitlines()[0]
