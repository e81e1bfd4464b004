"""Jobs claimed ahead for each child, so that a child running short jobs never waits on the database.

A host that claims one job per idle child pays a database round trip between every two jobs a
child runs, and its children sit idle meanwhile. When jobs are short, the host claims a few more
for each child than it can run at once and hands the next one over the moment the child is free;
one transaction then acknowledges several finished jobs and claims the next few.

Claiming ahead keeps other hosts from jobs this one is not running yet, so it is bounded in time:
each child holds at most `AHEAD_SECONDS` of work, judged from how long recent jobs took. Long jobs
(captures take seconds) get no claim-ahead at all, and a job that turns out long gives its
child's claimed-ahead jobs back (`overdue`). A claimed-ahead job is `running` in the database
with the pid of the child that will run it. Small ones are sent to the child at once, to wait in
its socket behind the job it runs (`supervisor.host.pool.JOBS_SENT_AT_ONCE`); those can no
longer be given back, so a job that turns out long delays at most the depth's worth of short
jobs sent behind it: the host takes them back (a `Cancel` of a job that has not started: the
child drops it and answers at once, or when its long job lets it read). Until the child starts a
job (`Accepted`) it is not the job's crash: if the child dies or the host drains, it is released
without spending an attempt. This module decides how many; the jobs themselves are held in
`supervisor.host.inflight`.
"""

from __future__ import annotations

from collections.abc import Iterable

from supervisor.host.inflight import InFlight
from supervisor.host.pool import Child
from supervisor.host.running import Running

#: The most work, in seconds of recent job durations, claimed ahead for one child.
AHEAD_SECONDS = 0.1
#: The most jobs claimed ahead for one child, however short.
MAX_AHEAD = 64
#: A running job older than this gives its child's claimed-ahead jobs back to the queue.
PATIENCE_SECONDS = 1.0
#: Weight of the newest duration in the running average.
SMOOTHING = 0.2


class ClaimAhead:
    """How deep to claim ahead, learned from how long jobs take here."""

    def __init__(self) -> None:
        #: Running average of how long a job takes in a child; None until one finished.
        self._seconds_per_job: float | None = None

    @property
    def depth(self) -> int:
        """Jobs to hold ahead per child: none until jobs are known to be short."""
        if self._seconds_per_job is None:
            return 0
        return min(MAX_AHEAD, int(AHEAD_SECONDS / max(self._seconds_per_job, 1e-6)))

    def job_took(self, seconds: float) -> None:
        """Learn from one finished job's duration (a running average)."""
        average = self._seconds_per_job
        self._seconds_per_job = (
            seconds if average is None else average + SMOOTHING * (seconds - average)
        )

    def wanted(self, children: Iterable[Child], inflight: InFlight, now: float) -> list[Child]:
        """The children to claim for, one entry per job wanted; empty when no claim is due.

        A claim is due when a child is idle with nothing ahead, or when some child's jobs ahead
        ran down to half the depth: then every child is topped up in the same transaction. A
        child busy with a long job gets nothing ahead.
        """
        depth = self.depth
        slow = {running.child for running in inflight.running() if outlasted(running, now)}
        needs: list[tuple[Child, int]] = []
        due = False
        for child in children:
            if child.hello is None or child.stopping or child.closed:
                continue
            sent = len(child.jobs)
            # Jobs waiting for the child: held here, or sent behind the one it runs.
            ahead = inflight.held_for(child) + max(sent - 1, 0)
            # Never more than the child runs before it is recycled.
            capacity = 1 if child in slow else 1 + depth
            room = min(capacity, child.max_jobs - child.jobs_done) - min(sent, 1) - ahead
            if room <= 0:
                continue
            needs.append((child, room))
            due |= (not sent and ahead == 0) or ahead <= depth // 2
        return [child for child, room in needs for _ in range(room)] if due else []

    @staticmethod
    def not_started(inflight: InFlight) -> int:
        """Jobs claimed ahead that no child has started: held here, or sent to wait behind
        their child's job (the `storyshelf_claimed_ahead` gauge)."""
        return sum(1 for _ in inflight.held()) + sum(1 for _ in inflight.waiting())

    @staticmethod
    def overdue(inflight: InFlight, now: float) -> list[Running]:
        """Jobs held behind a job running for longer than `PATIENCE_SECONDS`, taken back."""
        return [
            held
            for running in inflight.running()
            if outlasted(running, now)
            for held in inflight.take_held(running.child)
        ]

    @staticmethod
    def sent_behind_long_jobs(inflight: InFlight, now: float) -> list[Running]:
        """Jobs sent to wait in a child behind a job running for longer than
        `PATIENCE_SECONDS`, not asked to stop yet: the host takes them back."""
        slow = {running.child for running in inflight.running() if outlasted(running, now)}
        return [
            waiting
            for waiting in inflight.waiting()
            if waiting.child in slow and waiting.stopping is None
        ]


def outlasted(running: Running, now: float) -> bool:
    """A running job that has outlasted the patience for what waits behind it."""
    return now - running.started_at > PATIENCE_SECONDS
