"""Every job this host holds, in one registry that alone changes what is known of them.

A job is *held* once claimed for a child (claimed ahead, not sent yet), then *running* once sent
to it, until it is settled or given back. A child may have been sent its next job before it
ended the one it runs (`JOBS_SENT_AT_ONCE`): that job *waits* in the child, and its clock (how
long it took, whether its child is hung on it) starts when the one before it ends. The host, the
settler and lease keeping all call the verbs here instead of changing a `Running` or a child's
`job_id` themselves, so each transition is made in one place and a job can never be in two
places at once.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterator

from supervisor.host.pool import Child
from supervisor.host.running import Running, StopReason


class InFlight:
    """Jobs held for each child and jobs running, by id."""

    def __init__(self) -> None:
        self._running: dict[int, Running] = {}
        self._held: dict[Child, deque[Running]] = {}

    # -- reading ----------------------------------------------------------------------------

    def running(self) -> Collection[Running]:
        """The jobs children are running now (a live view: do not change the registry while
        iterating it)."""
        return self._running.values()

    def running_job(self, job_id: int) -> Running | None:
        """The running job with this id, if a child of ours runs it."""
        return self._running.get(job_id)

    def held(self) -> Iterator[Running]:
        """The jobs claimed ahead, not sent to their child yet."""
        return (running for queue in self._held.values() for running in queue)

    def waiting(self) -> Iterator[Running]:
        """The jobs sent to a child behind the one it runs, not started yet."""
        return (running for running in self._running.values() if not self.is_first(running))

    @staticmethod
    def is_first(running: Running) -> bool:
        """`running` is the job its child runs now (not one waiting behind it)."""
        return running.child.job_id == running.job.id

    def held_for(self, child: Child) -> int:
        """How many jobs wait for `child`."""
        return len(self._held.get(child, ()))

    def job_ids(self) -> list[int]:
        """Every job held or running."""
        return [*self._running, *(running.job.id for running in self.held())]

    @property
    def is_running(self) -> bool:
        """Some child is running a job of ours."""
        return bool(self._running)

    @property
    def is_holding(self) -> bool:
        """Some job waits for its child."""
        return any(self._held.values())

    # -- claimed, then sent -----------------------------------------------------------------

    def hold(self, running: Running) -> None:
        """A job was claimed for `running.child`; it waits until the child is free."""
        self._held.setdefault(running.child, deque()).append(running)

    def next_held(self, child: Child) -> Running | None:
        """The job `start_next` would start for `child`, left where it is."""
        queue = self._held.get(child)
        return queue[0] if queue else None

    def start_next(self, child: Child, now: float) -> Running | None:
        """The next job held for `child`, when it has room for one, becomes running (to be sent
        now): its child's job, or the one waiting behind it."""
        queue = self._held.get(child)
        if not queue or not child.ready:
            return None
        running = queue.popleft()
        running.started_at = running.last_progress_at = now
        self._running[running.job.id] = running
        child.jobs.append(running.job.id)
        return running

    # -- what the child says ----------------------------------------------------------------

    def accepted(self, running: Running, now: float) -> None:
        """The child starts the job: a death from now on is the job's crash."""
        running.accepted = True
        running.last_progress_at = now

    def progressed(self, running: Running, now: float) -> None:
        """The child reported progress on the job: it is not hung."""
        running.last_progress_at = now

    def renewed(self, running: Running, now: float, *, ours: bool) -> None:
        """A renewal was written (or refused: another host owns the job now)."""
        running.renewed_at = now
        running.lost |= not ours

    def stopping(self, running: Running, why: StopReason, now: float) -> bool:
        """The host asks the job to stop; False if it was already asked."""
        if running.stopping is not None:
            return False
        running.stopping, running.stopping_since = why, now
        return True

    # -- ended ------------------------------------------------------------------------------

    def finished(self, running: Running, now: float) -> None:
        """The child ended the job (done, failed, cancelled): it has room again, and the job
        waiting behind it, if any, starts now."""
        del self._running[running.job.id]
        child = running.child
        first = child.job_id == running.job.id
        child.jobs.remove(running.job.id)
        child.jobs_done += 1
        if first and child.jobs:
            following = self._running[child.jobs[0]]
            following.started_at = following.last_progress_at = now
            if following.stopping is not None:
                following.stopping_since = now  # its child reads the stop only now

    def child_gone(self, child: Child) -> tuple[list[Running], list[Running]]:
        """A child died or is leaving: the jobs sent to it (the one it ran first, then any that
        waited behind it) and those held for it."""
        sent = [self._running.pop(job_id) for job_id in child.jobs]
        child.jobs.clear()
        return sent, self.take_held(child)

    def release_running(self) -> list[Running]:
        """Every running job, taken back from its child (the drain ran out)."""
        taken = list(self._running.values())
        self._running.clear()
        for running in taken:
            running.stopping = "released"
            running.child.jobs.clear()
        return taken

    def take_held(self, child: Child) -> list[Running]:
        """Everything held for `child` (it died, is leaving, or its job turned out long)."""
        return list(self._held.pop(child, ()))

    def take_all_held(self) -> list[Running]:
        """Everything held, for every child (the host drains)."""
        return [running for child in list(self._held) for running in self.take_held(child)]

    def take_held_job(self, job_id: int) -> Running | None:
        """The held job with this id, taken out (its cancel was asked)."""
        for queue in self._held.values():
            for running in queue:
                if running.job.id == job_id:
                    queue.remove(running)
                    return running
        return None
