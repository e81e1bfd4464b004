"""LISTEN/NOTIFY wake-up on PostgreSQL: an idle host hears of new work within milliseconds.

The listening connection is the host's only long-lived one. When it drops (a database restart),
`Listener` says so and the host falls back to the poll cadence until `keep()` reconnects, each
failed try waiting longer (with jitter, to a cap) so that a database that is away for long is
not asked twice a second. It has the main engine's TCP keepalives, so a half-open connection is
noticed within a minute. SQLite has no notifications; there the listener is absent and the
host polls.
"""

from __future__ import annotations

import random

import psycopg
import structlog
from psycopg import sql
from sqlalchemy.engine import make_url

from supervisor.db.connection import CONNECT_TIMEOUT_SECONDS, TCP_KEEPALIVES
from supervisor.db.queue import CHANNEL
from supervisor.host.health import exponential

log = structlog.get_logger(__name__)

#: The first wait before reopening a dropped listening connection, doubled per failed try ...
RECONNECT_FIRST_SECONDS = 2.0
#: ... up to this (the poll cadence covers for it meanwhile).
RECONNECT_MAX_SECONDS = 60.0


def libpq_conninfo(url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    """A connection that LISTENs on the queue channel; `fileno()` goes into the host's select."""

    def __init__(self, url: str, rand: random.Random) -> None:
        self._conninfo = libpq_conninfo(url)
        self._rand = rand
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._reconnect_at = 0.0
        self._failures = 0

    @property
    def connected(self) -> bool:
        """The LISTEN connection is open."""
        return self._conn is not None and not self._conn.closed

    def connect(self) -> bool:
        """(Re)open the connection and LISTEN; False (logged) when the database cannot be reached."""
        self.close()
        try:
            conn = psycopg.connect(
                self._conninfo,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_SECONDS,
                **TCP_KEEPALIVES,  # type: ignore[arg-type]
            )
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        except psycopg.Error as error:
            self._failures += 1
            log.warning("listen connection failed", error=str(error).strip())
            return False
        self._conn = conn
        self._failures = 0
        return True

    def keep(self, now: float) -> bool:
        """Reopen a dropped connection once its back-off passed; True when it did (the host
        then polls at once: it may have missed a NOTIFY meanwhile)."""
        if self.connected or now < self._reconnect_at:
            return False
        if not self.connect():
            self._reconnect_at = now + exponential(
                self._failures, RECONNECT_FIRST_SECONDS, RECONNECT_MAX_SECONDS, self._rand
            )
            return False
        log.info("listening again")
        return True

    def fileno(self) -> int | None:
        """The connection's socket for `select`, while connected."""
        return self._conn.fileno() if self.connected and self._conn else None

    def drain(self) -> list[str]:
        """Payloads that arrived (call when `fileno()` is readable); a dropped connection is closed."""
        if self._conn is None:
            return []
        try:
            payloads = [notify.payload for notify in self._conn.notifies(timeout=0)]
            if not payloads:
                # Readable with nothing to hear: the server may have said goodbye. Ask it.
                self._conn.execute("SELECT 1")
            return payloads
        except psycopg.Error as error:
            log.warning(
                "listen connection lost; polling until it is back", error=str(error).strip()
            )
            self.close()
            return []

    def close(self) -> None:
        """Close the LISTEN connection (the host is leaving, or it dropped)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None
