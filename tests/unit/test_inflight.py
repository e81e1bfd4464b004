"""The registry of held and running jobs (`supervisor.host.inflight`): each transition once."""

from __future__ import annotations

from supervisor.host.inflight import InFlight
from tests.unit.jobs import MakeChild, claimed_for


def test_a_held_job_runs_only_when_its_child_is_free(make_child: MakeChild) -> None:
    inflight, child = InFlight(), make_child()
    first, second = claimed_for(child), claimed_for(child)
    inflight.hold(first)
    inflight.hold(second)
    assert inflight.start_next(child, now=5.0) is first
    assert (child.job_id, first.started_at, first.last_progress_at) == (first.job.id, 5.0, 5.0)
    assert inflight.start_next(child, now=6.0) is None, "the child is busy"
    inflight.finished(first)
    assert (child.job_id, child.jobs_done) == (None, 1)
    assert inflight.start_next(child, now=7.0) is second
    assert inflight.job_ids() == [second.job.id]


def test_a_dead_child_hands_back_its_running_job_and_what_was_held(make_child: MakeChild) -> None:
    inflight, child, other = InFlight(), make_child(), make_child()
    running, held, elsewhere = claimed_for(child), claimed_for(child), claimed_for(other)
    for job in (running, held, elsewhere):
        inflight.hold(job)
    inflight.start_next(child, now=0.0)
    assert inflight.child_gone(child) == (running, [held])
    assert child.job_id is None
    assert inflight.job_ids() == [elsewhere.job.id]
    assert inflight.child_gone(child) == (None, [])


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
