"""Lease keeping's decisions (`supervisor.host.lease`), on a fake clock: no database here."""

from __future__ import annotations

import structlog

from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.settings import HostSettings
from tests.unit.jobs import MakeChild, claimed_for


def keeper(lease_seconds: float = 60.0, stall_seconds: float = 45.0) -> LeaseKeeper:
    settings = HostSettings(lease_seconds=lease_seconds, stall_seconds=stall_seconds, host_id="h")
    return LeaseKeeper(settings, {}, InFlight(), structlog.get_logger().bind())


def test_progress_renews_at_most_once_per_quarter_lease(make_child: MakeChild) -> None:
    lease = keeper(lease_seconds=60.0)
    running = claimed_for(make_child(), started_at=0.0)
    assert lease.renew_every == 15.0
    assert not lease.renewal_due(running, now=14.9)
    assert lease.renewal_due(running, now=15.0)
    lease.inflight.renewed(running, now=15.0, ours=True)
    assert not lease.renewal_due(running, now=29.9)
    assert lease.renewal_due(running, now=30.0)


def test_a_child_silent_for_stall_seconds_is_hung(make_child: MakeChild) -> None:
    lease = keeper(stall_seconds=45.0)
    running = claimed_for(make_child(), started_at=0.0)
    assert not lease.stalled(running, now=45.0)
    assert lease.stalled(running, now=45.1)
    lease.inflight.progressed(running, now=40.0)
    assert not lease.stalled(running, now=85.0), "progress restarts the stall clock"


def test_expiry_is_looked_for_once_per_quarter_lease() -> None:
    lease = keeper(lease_seconds=8.0)
    assert [lease.expiry_turn(t) for t in (0.0, 1.0, 1.9, 2.0, 3.0, 4.0)] == [
        True,
        False,
        False,
        True,
        False,
        True,
    ]


def test_a_refused_renewal_marks_the_job_lost(make_child: MakeChild) -> None:
    lease = keeper()
    running = claimed_for(make_child(), started_at=0.0)
    lease.inflight.renewed(running, now=15.0, ours=False)
    assert running.lost
    lease.inflight.renewed(running, now=30.0, ours=True)
    assert running.lost, "a lost job stays lost"
