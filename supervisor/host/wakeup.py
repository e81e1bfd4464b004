"""LISTEN/NOTIFY wake-up on PostgreSQL: an idle host hears of new work within milliseconds.

The listening connection is the host's only long-lived one. When it drops (a database restart),
`Listener` says so and the host falls back to the poll cadence until `keep()` reconnects.
SQLite has no notifications; there the listener is absent and the host polls.
"""

from __future__ import annotations

import psycopg
import structlog
from psycopg import sql
from sqlalchemy.engine import make_url

from supervisor.db.connection import CONNECT_TIMEOUT_SECONDS
from supervisor.db.queue import CHANNEL

log = structlog.get_logger(__name__)

#: How long a host waits between tries to reopen a dropped listening connection.
RECONNECT_SECONDS = 2.0


def libpq_conninfo(url: str) -> str:
    """The libpq form of a SQLAlchemy PostgreSQL URL."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class Listener:
    """A connection that LISTENs on the queue channel; `fileno()` goes into the host's select."""

    def __init__(self, url: str) -> None:
        self._conninfo = libpq_conninfo(url)
        self._conn: psycopg.Connection[tuple[object, ...]] | None = None
        self._reconnect_at = 0.0

    @property
    def connected(self) -> bool:
        """The LISTEN connection is open."""
        return self._conn is not None and not self._conn.closed

    def connect(self) -> bool:
        """(Re)open the connection and LISTEN; False (logged) when the database cannot be reached."""
        self.close()
        try:
            conn = psycopg.connect(
                self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS
            )
            conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(CHANNEL)))
        except psycopg.Error as error:
            log.warning("listen connection failed", error=str(error).strip())
            return False
        self._conn = conn
        return True

    def keep(self, now: float) -> bool:
        """Reopen a dropped connection, at most every `RECONNECT_SECONDS`; True when it did
        (the host then polls at once: it may have missed a NOTIFY meanwhile)."""
        if self.connected or now < self._reconnect_at:
            return False
        self._reconnect_at = now + RECONNECT_SECONDS
        if not self.connect():
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
