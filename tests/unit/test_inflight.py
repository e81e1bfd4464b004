"""The registry of held and running jobs (`supervisor.host.inflight`): each transition once."""

from __future__ import annotations

from supervisor.host.inflight import InFlight
from supervisor.host.pool import JOBS_SENT_AT_ONCE
from tests.unit.jobs import MakeChild, claimed_for


def test_a_child_is_sent_jobs_ahead_and_each_clock_starts_when_the_one_before_ends(
    make_child: MakeChild,
) -> None:
    inflight, child = InFlight(), make_child()
    jobs = [claimed_for(child) for _ in range(JOBS_SENT_AT_ONCE + 1)]
    for job in jobs:
        inflight.hold(job)
    first, second, *_, last = jobs
    assert inflight.start_next(child, now=5.0) is first
    assert (child.job_id, first.started_at, first.last_progress_at) == (first.job.id, 5.0, 5.0)
    for job in jobs[1:-1]:
        assert inflight.start_next(child, now=6.0) is job, "it waits in the child"
    assert inflight.start_next(child, now=6.0) is None, "no room for more"
    assert inflight.is_first(first) and not inflight.is_first(second)
    assert list(inflight.waiting()) == jobs[1:-1]
    inflight.finished(first, now=8.0)
    assert (child.job_id, child.jobs_done) == (second.job.id, 1)
    assert (second.started_at, second.last_progress_at) == (8.0, 8.0)
    assert inflight.start_next(child, now=9.0) is last
    assert inflight.job_ids() == [job.job.id for job in jobs[1:]]


def test_a_job_waiting_in_its_child_may_end_first(make_child: MakeChild) -> None:
    inflight, child = InFlight(), make_child()
    first, second = claimed_for(child), claimed_for(child)
    for job in (first, second):
        inflight.hold(job)
        inflight.start_next(child, now=1.0)
    inflight.stopping(second, "cancelled", now=2.0)
    inflight.finished(second, now=3.0)  # cancelled before it started
    assert (child.job_id, first.started_at) == (first.job.id, 1.0)
    assert list(inflight.waiting()) == []


def test_a_stop_asked_of_a_waiting_job_is_timed_from_when_it_comes_up(
    make_child: MakeChild,
) -> None:
    inflight, child = InFlight(), make_child()
    first, second = claimed_for(child), claimed_for(child)
    for job in (first, second):
        inflight.hold(job)
        inflight.start_next(child, now=0.0)
    inflight.stopping(second, "cancelled", now=1.0)
    inflight.finished(first, now=4.0)
    assert second.stopping_since == 4.0


def test_a_dead_child_hands_back_what_it_was_sent_and_what_was_held(
    make_child: MakeChild,
) -> None:
    inflight, child, other = InFlight(), make_child(), make_child()
    running, waiting, held = claimed_for(child), claimed_for(child), claimed_for(child)
    elsewhere = claimed_for(other)
    for job in (running, waiting, held, elsewhere):
        inflight.hold(job)
    inflight.start_next(child, now=0.0)
    inflight.start_next(child, now=0.0)
    assert inflight.child_gone(child) == ([running, waiting], [held])
    assert child.job_id is None
    assert inflight.job_ids() == [elsewhere.job.id]
    assert inflight.child_gone(child) == ([], [])


def test_a_job_is_asked_to_stop_once(make_child: MakeChild) -> None:
    inflight, child = InFlight(), make_child()
    running = claimed_for(child)
    inflight.hold(running)
    inflight.start_next(child, now=0.0)
    assert inflight.stopping(running, "cancelled", now=1.0)
    assert not inflight.stopping(running, "lost", now=2.0)
    assert (running.stopping, running.stopping_since) == ("cancelled", 1.0)


def test_releasing_takes_every_running_job_from_its_child(make_child: MakeChild) -> None:
    inflight = InFlight()
    children = [make_child(), make_child()]
    jobs = [claimed_for(child) for child in children]
    for job in jobs:
        inflight.hold(job)
    for child in children:
        inflight.start_next(child, now=0.0)
    assert inflight.release_running() == jobs
    assert {job.stopping for job in jobs} == {"released"}
    assert not inflight.is_running and all(child.job_id is None for child in children)


def test_acceptance_and_progress_move_the_stall_clock(make_child: MakeChild) -> None:
    inflight, child = InFlight(), make_child()
    running = claimed_for(child)
    inflight.hold(running)
    inflight.start_next(child, now=0.0)
    inflight.accepted(running, now=1.0)
    assert running.accepted and running.last_progress_at == 1.0
    inflight.progressed(running, now=2.5)
    assert running.last_progress_at == 2.5
