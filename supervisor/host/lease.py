"""Lease keeping: the decisions that keep a job this host's while it works on it, and no longer.

A claim gives a job a lease of `lease_seconds`. Here, in one place:

* **renewal**: progress from the child renews its job's lease, at most once per `renew_every`
  (a quarter lease), so a chatty child costs a write per quarter lease, not per message; jobs
  held ahead for a busy child, or sent to wait behind its job, are renewed the same way, so a
  claimed-ahead job keeps a live lease until it runs or is given back;
* **loss**: a renewal the fence refuses means another host owns the job now; it is marked lost
  and the host stops it without recording anything;
* **stall**: a running job whose child said nothing for `stall_seconds` is hung;
* **expiry**: leases that ran out on another host (or on this one, before a restart) are ended
  when they may not be rescued: on their final attempt, or after a cancel. The claim rescues
  the others.

Decisions take the time from the caller (monotonic seconds), so they are tested with a fake clock.
"""

from __future__ import annotations

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from structlog.stdlib import BoundLogger

from supervisor.builds.kinds import Kind
from supervisor.builds.reduce import ReduceOutcome
from supervisor.db import queue
from supervisor.db.connection import connection_lost, transaction
from supervisor.db.queue import Job
from supervisor.host.inflight import InFlight
from supervisor.host.running import Running
from supervisor.host.settings import HostSettings
from supervisor.metrics.registry import HostMetrics

#: How often the leases of held-ahead jobs are looked at (they are renewed when due).
HELD_CHECK_SECONDS = 1.0


class LeaseKeeper:
    """The lease decisions of one host, and the statements that carry them out."""

    def __init__(
        self,
        settings: HostSettings,
        kinds: dict[str, Kind],
        inflight: InFlight,
        log: BoundLogger,
        metrics: HostMetrics | None = None,
    ) -> None:
        self.metrics = metrics if metrics is not None else HostMetrics()
        self.lease_seconds = settings.lease_seconds
        self.stall_seconds = settings.stall_seconds
        #: The shortest time between two writes of one job's lease, and between expiry checks.
        self.renew_every = settings.lease_seconds / 4
        self.kinds = kinds
        self.inflight = inflight
        self.log = log
        self._expire_at = 0.0
        self._held_check_at = 0.0

    # -- decisions --------------------------------------------------------------------------

    def renewal_due(self, running: Running, now: float) -> bool:
        """A quarter lease passed since the job's lease was last written."""
        return now - running.renewed_at >= self.renew_every

    def stalled(self, running: Running, now: float) -> bool:
        """The child has said nothing of its job for `stall_seconds`: it is hung."""
        return now - running.last_progress_at > self.stall_seconds

    def expiry_turn(self, now: float) -> bool:
        """Whether leases should be checked for expiry now (once per `renew_every`)."""
        if now < self._expire_at:
            return False
        self._expire_at = now + self.renew_every
        return True

    # -- writes -----------------------------------------------------------------------------

    def renew(self, engine: Engine, running: Running, now: float) -> None:
        """Extend the lease of a job a child reported progress on, if a renewal is due."""
        if not self.renewal_due(running, now):
            return
        with transaction(engine) as conn:
            ours = queue.renew(conn, running.job.lease, self.lease_seconds)
        self.inflight.renewed(running, now, ours=ours)
        self.metrics.leases_renewed(int(ours), int(not ours))
        if not ours:
            running.log.warning("lease lost")

    def renew_held(self, engine: Engine, now: float) -> list[Running]:
        """Renew, in one statement, the leases due of jobs not started yet: held ahead, or
        waiting in their child behind its job. Held ones another host owns now are taken out of
        the registry and returned (they must never reach a child); waiting ones are marked
        lost, for the host to stop."""
        if now < self._held_check_at:
            return []
        self._held_check_at = now + min(HELD_CHECK_SECONDS, self.renew_every)
        waiting = [*self.inflight.held(), *self.inflight.waiting()]
        due = [held for held in waiting if self.renewal_due(held, now)]
        if not due:
            return []
        with transaction(engine) as conn:
            ours = queue.renew_all(conn, [held.job.lease for held in due], self.lease_seconds)
        self.metrics.leases_renewed(len(ours), len(due) - len(ours))
        lost = []
        for held in due:
            self.inflight.renewed(held, now, ours=held.job.id in ours)
            if held.lost and self.inflight.take_held_job(held.job.id) is not None:
                lost.append(held)
        return lost

    def expire(self, engine: Engine, now: float) -> None:
        """End jobs whose lease ran out on their last attempt (or after a cancel), on any host,
        and close what they belonged to."""
        if not self.expiry_turn(now):
            return
        with transaction(engine) as conn:
            for job in queue.expire_leases(conn):
                self.log.warning(
                    "expired lease ended a job", job_id=job.id, status=job.status, error=job.error
                )
                self._close(conn, job)

    def _close(self, conn: Connection, job: Job) -> ReduceOutcome:
        """The kind's bookkeeping for a job its expired lease ended, in a savepoint: a hook that
        raises is logged and costs that build its reduction, not every host its life."""
        kind = self.kinds.get(job.kind)
        if kind is None:
            return "skipped"
        try:
            with conn.begin_nested():
                if job.status == "cancelled":
                    return kind.on_cancelled(conn, job)
                return kind.on_failed(conn, job, job.error or queue.LEASE_EXHAUSTED_ERROR)
        except Exception as error:
            if isinstance(error, DBAPIError) and connection_lost(error):
                raise
            self.log.exception(
                "cannot close the expired job's build", job_id=job.id, error=str(error)
            )
            return "skipped"
