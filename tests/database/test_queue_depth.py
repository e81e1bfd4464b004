"""The queue's depth as a scrape reads it, and how long a claimed job waited: PostgreSQL and
SQLite."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import Engine, update

from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import jobs
from supervisor.metrics.queue_depth import QueueDepth
from tests.hosts import enqueue


def test_depth_counts_open_jobs_by_kind_and_status(engine: Engine, database_url: str) -> None:
    for _ in range(3):
        enqueue(engine, "sleep")
    enqueue(engine, "fail")
    done = enqueue(engine, "noop")
    with transaction(engine) as conn:
        claimed = queue.claim(conn, "host-a", 2, 60.0)
        assert [job.id for job in claimed] == [1, 2]
        queue.ack(conn, claimed[1].lease)
        [noop] = [job for job in queue.claim(conn, "host-a", 3, 60.0) if job.id == done]
        queue.ack(conn, noop.lease)
    depth = QueueDepth(database_url, ["sleep", "fail", "noop", "capture"])
    try:
        counts = depth.read()
    finally:
        depth.close()
    assert counts == {
        ("capture", "queued"): 0,
        ("capture", "running"): 0,
        ("fail", "queued"): 0,
        ("fail", "running"): 1,
        ("noop", "queued"): 0,
        ("noop", "running"): 0,
        ("sleep", "queued"): 0,
        ("sleep", "running"): 2,
    }


def test_the_collector_exposes_the_depth_as_a_gauge(engine: Engine, database_url: str) -> None:
    enqueue(engine, "sleep")
    registry = CollectorRegistry()
    depth = QueueDepth(database_url, ["sleep"])
    registry.register(depth)
    try:
        assert (
            registry.get_sample_value(
                "storyshelf_queue_jobs", {"kind": "sleep", "status": "queued"}
            )
            == 1
        )
        assert (
            registry.get_sample_value(
                "storyshelf_queue_jobs", {"kind": "sleep", "status": "running"}
            )
            == 0
        )
        assert "# TYPE storyshelf_queue_jobs gauge" in generate_latest(registry).decode()
    finally:
        depth.close()


def test_a_claim_says_how_long_each_job_waited_after_it_was_due(engine: Engine) -> None:
    late, fresh = enqueue(engine, "sleep"), enqueue(engine, "sleep")
    with transaction(engine) as conn:
        conn.execute(
            update(jobs)
            .where(jobs.c.id == late)
            .values(run_at=datetime.now(UTC) - timedelta(seconds=30))
        )
    with transaction(engine) as conn:
        claimed = {job.id: job for job in queue.claim(conn, "host-a", 2, 60.0)}
    assert 29 <= (claimed[late].pickup_seconds or 0) < 45
    assert 0 <= (claimed[fresh].pickup_seconds or -1) < 15
    # Reads other than the claim carry no claim time.
    with transaction(engine) as conn:
        assert queue.expire_leases(conn) == []


@pytest.mark.parametrize(
    "url",
    [
        "postgresql+psycopg://storyshelf@127.0.0.1:1/storyshelf",  # refused at once
        "postgresql+psycopg://storyshelf@10.255.255.1:5432/storyshelf",  # never answers
    ],
)
def test_a_database_that_is_away_yields_no_depth_and_never_hangs_the_scrape(url: str) -> None:
    registry = CollectorRegistry()
    depth = QueueDepth(url, ["sleep"])
    registry.register(depth)
    started = time.monotonic()
    try:
        text = generate_latest(registry).decode()
    finally:
        depth.close()
    assert "storyshelf_queue_jobs{" not in text
    assert time.monotonic() - started < 5


def test_a_sqlite_file_without_the_queue_yields_no_depth(tmp_path: Path) -> None:
    depth = QueueDepth(f"sqlite:///{tmp_path / 'empty.db'}", ["sleep"])
    try:
        assert list(depth.collect()) == []
    finally:
        depth.close()
