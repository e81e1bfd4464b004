"""How many jobs a host claims ahead for each child, and when it gives them back."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Iterator

import pytest
import structlog

from ipc.messages import PROTOCOL_VERSION, Hello
from supervisor.builds.kinds import Kind
from supervisor.db.queue import Job
from supervisor.host.claim_ahead import AHEAD_SECONDS, MAX_AHEAD, PATIENCE_SECONDS, ClaimAhead
from supervisor.host.pool import Child
from supervisor.host.settle import Running

MakeChild = Callable[..., Child]
_ids = itertools.count(1)


@pytest.fixture
def make_child() -> Iterator[MakeChild]:
    sockets: list[socket.socket] = []

    def make(max_jobs: int = 500, jobs_done: int = 0) -> Child:
        ours, theirs = socket.socketpair()
        sockets.extend((ours, theirs))
        child = Child(pid=next(_ids), sock=ours, spawned_at=0.0, max_jobs=max_jobs)
        child.jobs_done = jobs_done
        child.hello = Hello(PROTOCOL_VERSION, child.pid, "libvips")  # ready for work
        return child

    yield make
    for sock in sockets:
        sock.close()


def claimed_for(child: Child, started_at: float = 0.0) -> Running:
    job_id = next(_ids)
    job = Job(
        id=job_id, kind="noop", status="running", data={}, attempt=1, max_attempts=5,
        crashes=0, crash_causes=(), build_id=None, shard_id=None, locked_by="host",
        lease_expires_at=None, cancel_requested=False, error=None,
    )  # fmt: skip
    kind = Kind("noop", accepts=lambda _data: True)
    log = structlog.get_logger().bind(job_id=job_id)
    return Running(job, kind, child, {}, log, started_at, started_at, started_at)


def learned(seconds_per_job: float) -> ClaimAhead:
    ahead = ClaimAhead()
    ahead.job_took(seconds_per_job)
    return ahead


def test_nothing_is_claimed_ahead_until_jobs_are_known_to_be_short(make_child: MakeChild) -> None:
    idle, busy = make_child(), make_child()
    busy.job_id = 99
    ahead = ClaimAhead()
    assert ahead.depth == 0
    assert ahead.wanted([idle, busy], [], now=0.0) == [idle]


def test_depth_holds_a_bounded_amount_of_work() -> None:
    assert learned(0.001).depth == MAX_AHEAD
    assert learned(AHEAD_SECONDS / 4).depth == 4
    assert learned(2.5).depth == 0, "capture-length jobs are never claimed ahead"
    slowing = learned(0.001)
    for _ in range(30):
        slowing.job_took(1.0)
    assert slowing.depth == 0


def test_idle_child_and_half_empty_child_are_topped_up_together(make_child: MakeChild) -> None:
    ahead = learned(AHEAD_SECONDS / 4)  # depth 4
    a, b = make_child(), make_child()
    for child in (a, b):
        child.job_id = 99
        for _ in range(4):
            ahead.add(claimed_for(child))
    assert ahead.wanted([a, b], [], now=0.0) == [], "both children hold a full depth"
    ahead.next_for(a)
    ahead.next_for(a)  # a ran down to half
    assert ahead.wanted([a, b], [], now=0.0) == [a, a]
    ahead.next_for(b)
    ahead.next_for(b)
    ahead.next_for(b)
    assert sorted(ahead.wanted([a, b], [], now=0.0), key=id) == sorted([a, a, b, b, b], key=id)


def test_a_child_gets_no_more_than_it_runs_before_it_is_recycled(make_child: MakeChild) -> None:
    nearly_done = make_child(max_jobs=10, jobs_done=8)
    assert learned(0.001).wanted([nearly_done], [], now=0.0) == [nearly_done] * 2


def test_leaving_and_unready_children_get_nothing(make_child: MakeChild) -> None:
    leaving, dead, newborn = make_child(), make_child(), make_child()
    leaving.stopping = True
    dead.closed = True
    newborn.hello = None
    assert learned(0.001).wanted([leaving, dead, newborn], [], now=0.0) == []


def test_a_long_job_gives_back_what_waits_behind_it(make_child: MakeChild) -> None:
    ahead = learned(0.001)
    slow, quick = make_child(), make_child()
    slow_job, quick_job = claimed_for(slow, started_at=0.0), claimed_for(quick, started_at=0.5)
    slow.job_id, quick.job_id = slow_job.job.id, quick_job.job.id
    waiting = [claimed_for(slow) for _ in range(3)]
    for held in [*waiting, claimed_for(quick)]:
        ahead.add(held)
    now = PATIENCE_SECONDS + 0.1
    assert ahead.overdue([slow_job, quick_job], now) == waiting
    assert len(ahead) == 1
    assert slow not in ahead.wanted([slow, quick], [slow_job, quick_job], now), (
        "nothing is claimed again behind the long job"
    )


def test_a_job_is_found_and_taken_by_id(make_child: MakeChild) -> None:
    ahead = learned(0.001)
    child = make_child()
    first, second = claimed_for(child), claimed_for(child)
    ahead.add(first)
    ahead.add(second)
    assert ahead.take_job(second.job.id) is second
    assert ahead.take_job(second.job.id) is None
    assert list(ahead) == [first]
    assert ahead.take_all() == [first]
    assert not ahead
