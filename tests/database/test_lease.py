"""Lease keeping against the database: jobs held ahead keep a live lease until they run."""

from __future__ import annotations

import time

import structlog
from sqlalchemy import Engine, update

from supervisor.builds.kinds import Kind
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import jobs
from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.pool import Child
from supervisor.host.running import Running
from supervisor.host.settings import HostSettings
from supervisor.metrics.registry import HostMetrics
from tests.hosts import enqueue, job


def hold_claimed(engine: Engine, inflight: InFlight, child: Child, count: int) -> list[Running]:
    """Claim `count` jobs as host "h" and hold them for `child`, claimed at (fake) time 0."""
    with transaction(engine) as conn:
        claimed = queue.claim(conn, "h", count, lease_seconds=10.0)
    kind = Kind("noop", accepts=lambda _data: True)
    held = [Running(j, kind, child, {}, structlog.get_logger(), 0.0, 0.0, 0.0) for j in claimed]
    for running in held:
        inflight.hold(running)
    return held


def test_held_jobs_are_renewed_together_once_due(engine: Engine, child: Child) -> None:
    for _ in range(3):
        enqueue(engine, "noop")
    inflight = InFlight()
    settings = HostSettings(lease_seconds=10.0, host_id="h")
    lease = LeaseKeeper(settings, {}, inflight, structlog.get_logger())
    held = hold_claimed(engine, inflight, child, 3)
    before = {r.job.id: job(engine, r.job.id)["lease_expires_at"] for r in held}
    lease.renew_held(engine, now=1.0)  # not due: a quarter lease is 2.5 s
    assert {r.renewed_at for r in held} == {0.0}
    time.sleep(0.01)  # the database's clock must move for the new lease to be later
    lease.renew_held(engine, now=3.0)
    assert {r.renewed_at for r in held} == {3.0}
    for running in held:
        assert job(engine, running.job.id)["lease_expires_at"] > before[running.job.id]
    assert not any(r.lost for r in held)


def test_a_held_job_another_host_took_is_marked_lost(engine: Engine, child: Child) -> None:
    enqueue(engine, "noop")
    inflight = InFlight()
    settings = HostSettings(lease_seconds=10.0, host_id="h")
    lease = LeaseKeeper(settings, {}, inflight, structlog.get_logger())
    (running,) = hold_claimed(engine, inflight, child, 1)
    with transaction(engine) as conn:
        conn.execute(update(jobs).where(jobs.c.id == running.job.id).values(locked_by="other"))
    assert lease.renew_held(engine, now=3.0) == [running]
    assert running.lost
    assert not inflight.is_holding, "a lost job never reaches its child"


def test_renewals_and_lost_leases_are_counted_per_job(engine: Engine, child: Child) -> None:
    for _ in range(3):
        enqueue(engine, "noop")
    inflight = InFlight()
    settings = HostSettings(lease_seconds=10.0, host_id="h")
    metrics = HostMetrics()
    lease = LeaseKeeper(settings, {}, inflight, structlog.get_logger(), metrics)
    held = hold_claimed(engine, inflight, child, 3)
    with transaction(engine) as conn:
        conn.execute(update(jobs).where(jobs.c.id == held[0].job.id).values(locked_by="other"))
    lease.renew_held(engine, now=3.0)
    assert metrics.registry.get_sample_value("storyshelf_lease_renewals_total") == 2
    assert metrics.registry.get_sample_value("storyshelf_leases_lost_total") == 1
