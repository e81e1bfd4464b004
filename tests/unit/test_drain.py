"""The drain's deadline (`supervisor.host.drain`), on a fake clock."""

from __future__ import annotations

from supervisor.host.drain import Drain


def test_running_jobs_have_drain_seconds_from_the_first_signal() -> None:
    drain = Drain(seconds=25.0)
    assert not drain.active and not drain.over(1e9)
    drain.begin(now=100.0)
    assert drain.active
    assert not drain.over(124.9)
    assert drain.over(125.0)


def test_a_second_signal_ends_the_drain_at_once() -> None:
    drain = Drain(seconds=25.0)
    drain.begin(now=100.0)
    drain.hurry(now=101.0)
    assert drain.over(101.0)
