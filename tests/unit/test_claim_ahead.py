"""How many jobs a host claims ahead for each child, and when it gives them back."""

from __future__ import annotations

from supervisor.host.claim_ahead import AHEAD_SECONDS, MAX_AHEAD, PATIENCE_SECONDS, ClaimAhead
from supervisor.host.inflight import InFlight
from supervisor.host.pool import Child
from tests.unit.jobs import MakeChild, claimed_for


def run_next(inflight: InFlight, child: Child, jobs: int) -> None:
    """`child` finishes its job and starts the next held one, `jobs` times."""
    for _ in range(jobs):
        running = inflight.running_job(child.job_id or -1)
        assert running is not None
        inflight.finished(running, now=0.0)
        while inflight.start_next(child, now=0.0) is not None:
            pass


def learned(seconds_per_job: float) -> ClaimAhead:
    ahead = ClaimAhead()
    ahead.job_took(seconds_per_job)
    return ahead


def test_nothing_is_claimed_ahead_until_jobs_are_known_to_be_short(make_child: MakeChild) -> None:
    idle, busy = make_child(), make_child()
    busy.jobs.append(99)
    ahead = ClaimAhead()
    assert ahead.depth == 0
    assert ahead.wanted([idle, busy], InFlight(), now=0.0) == [idle]


def test_depth_holds_a_bounded_amount_of_work() -> None:
    assert learned(0.001).depth == MAX_AHEAD
    assert learned(AHEAD_SECONDS / 4).depth == 4
    assert learned(2.5).depth == 0, "capture-length jobs are never claimed ahead"
    slowing = learned(0.001)
    for _ in range(30):
        slowing.job_took(1.0)
    assert slowing.depth == 0


def test_idle_child_and_half_empty_child_are_topped_up_together(make_child: MakeChild) -> None:
    ahead, inflight = learned(AHEAD_SECONDS / 4), InFlight()  # depth 4
    a, b = make_child(), make_child()
    for child in (a, b):
        for _ in range(5):
            inflight.hold(claimed_for(child))
        inflight.start_next(child, now=0.0)  # busy, with 4 held behind
    assert ahead.wanted([a, b], inflight, now=0.0) == [], "both children hold a full depth"
    run_next(inflight, a, 2)  # a ran down to half
    assert ahead.wanted([a, b], inflight, now=0.0) == [a, a]
    run_next(inflight, b, 3)
    assert sorted(ahead.wanted([a, b], inflight, now=0.0), key=id) == sorted(
        [a, a, b, b, b], key=id
    )


def test_a_child_gets_no_more_than_it_runs_before_it_is_recycled(make_child: MakeChild) -> None:
    nearly_done = make_child(max_jobs=10, jobs_done=8)
    assert learned(0.001).wanted([nearly_done], InFlight(), now=0.0) == [nearly_done] * 2


def test_leaving_and_unready_children_get_nothing(make_child: MakeChild) -> None:
    leaving, dead, newborn = make_child(), make_child(), make_child()
    leaving.stopping = True
    dead.closed = True
    newborn.hello = None
    assert learned(0.001).wanted([leaving, dead, newborn], InFlight(), now=0.0) == []


def test_a_long_job_gives_back_what_waits_behind_it(make_child: MakeChild) -> None:
    ahead, inflight = learned(0.001), InFlight()
    slow, quick = make_child(), make_child()
    inflight.hold(claimed_for(slow))
    inflight.hold(claimed_for(quick))
    inflight.start_next(slow, now=0.0)
    inflight.start_next(quick, now=0.5)
    waiting = [claimed_for(slow) for _ in range(3)]
    for held in [*waiting, claimed_for(quick)]:
        inflight.hold(held)
    now = PATIENCE_SECONDS + 0.1
    assert ahead.overdue(inflight, now) == waiting
    assert len(list(inflight.held())) == 1
    assert slow not in ahead.wanted([slow, quick], inflight, now), (
        "nothing is claimed again behind the long job"
    )


def test_a_job_is_found_and_taken_by_id(make_child: MakeChild) -> None:
    inflight = InFlight()
    child = make_child()
    first, second = claimed_for(child), claimed_for(child)
    inflight.hold(first)
    inflight.hold(second)
    assert inflight.take_held_job(second.job.id) is second
    assert inflight.take_held_job(second.job.id) is None
    assert list(inflight.held()) == [first]
    assert inflight.take_all_held() == [first]
    assert not inflight.is_holding


def test_jobs_not_started_are_those_held_and_those_waiting_behind_a_running_one(
    make_child: MakeChild,
) -> None:
    inflight = InFlight()
    child = make_child()
    for _ in range(4):
        inflight.hold(claimed_for(child))
    assert ClaimAhead.not_started(inflight) == 4
    inflight.start_next(child, now=0.0)  # runs
    inflight.start_next(child, now=0.0)  # sent to wait behind it
    assert ClaimAhead.not_started(inflight) == 3
