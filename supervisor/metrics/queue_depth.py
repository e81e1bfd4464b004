"""`storyshelf_queue_jobs{kind,status}`: the shared queue's depth, read when Prometheus scrapes.

A gauge set by the loop would say what the queue held when this host last looked; read at
scrape time it says what every host's queue holds now. One statement per scrape
(`supervisor.db.queue.open_jobs_by_kind`), a GROUP BY over the open states only (each walks
its partial index; the finished jobs, most of the table, are never read), on an engine of its
own with short timeouts: a scrape must not wait behind the loop's connections, and a database
that is away must not hang it. Then the collector yields nothing for the queue and `/healthz`
says why.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import Engine, create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from supervisor.db.connection import TCP_KEEPALIVES, parse_url
from supervisor.db.queue import OPEN_STATES, open_jobs_by_kind
from supervisor.metrics.registry import PREFIX

#: The longest a scrape may wait to connect, and for the statement, in seconds.
TIMEOUT_SECONDS = 2.0
NAME = f"{PREFIX}_queue_jobs"
HELP = "Jobs queued or running on every host, by kind and status, read at scrape time."


def depth_engine(url: str) -> Engine:
    """An engine for scrapes only: no pool to keep (a connection per scrape, every 15 s or so),
    and every wait bounded by `TIMEOUT_SECONDS`."""
    parsed = parse_url(url)
    if parsed.get_backend_name() == "sqlite":
        # A read in WAL mode waits on no writer; the timeout bounds a checkpoint's lock.
        return create_engine(parsed, poolclass=NullPool, connect_args={"timeout": TIMEOUT_SECONDS})
    return create_engine(
        parsed,
        poolclass=NullPool,
        connect_args={
            "connect_timeout": max(1, int(TIMEOUT_SECONDS)),
            "options": f"-c statement_timeout={int(TIMEOUT_SECONDS * 1000)}",
            **TCP_KEEPALIVES,
            "tcp_user_timeout": int(TIMEOUT_SECONDS * 1000),
        },
    )


class QueueDepth(Collector):
    """Reads the queue's depth at each scrape; `kinds` get a 0 where they have no job."""

    def __init__(self, database_url: str, kinds: Iterable[str]) -> None:
        self.engine = depth_engine(database_url)
        self.kinds = sorted(kinds)

    def describe(self) -> Iterable[GaugeMetricFamily]:
        """The family's name, without a database round trip at registration."""
        return [GaugeMetricFamily(NAME, HELP, labels=["kind", "status"])]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            counts = self.read()
        except SQLAlchemyError:
            # Not logged: this runs on the server's thread, which must never hold the log's
            # lock when the loop forks a fork server; the loop logs the outage itself.
            return
        family = GaugeMetricFamily(NAME, HELP, labels=["kind", "status"])
        for (kind, status), count in sorted(counts.items()):
            family.add_metric([kind, status], count)
        yield family

    def read(self) -> dict[tuple[str, str], int]:
        """Jobs per (kind, open state), zeros included for the known kinds."""
        counts: dict[tuple[str, str], int] = {
            (kind, state): 0 for kind in self.kinds for state in OPEN_STATES
        }
        with self.engine.connect() as conn:
            for (kind, state), count in open_jobs_by_kind(conn).items():
                counts[(kind, state)] = count
        return counts

    def close(self) -> None:
        self.engine.dispose()
