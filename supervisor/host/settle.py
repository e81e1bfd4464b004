"""What happens to a job: started in a child, then completed, retried, failed, cancelled or lost.

Each way a job can end is one method and one transaction, fenced by the job's lease: results and
the job's completion commit together or not at all, and a host that lost the lease records
nothing. When the database is away at the moment a job ends, the settlement waits in `pending`
and is tried again (the lease usually outlives a database restart; if not, the fence refuses it
and the job's new owner runs it). A settlement that raises anything else (a bug, a kind's hook
that cannot do its part) retries or fails that one job with the error; the host goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError
from structlog.stdlib import BoundLogger

from ipc.artifacts.store import ArtifactStore
from ipc.failures import PermanentFailure
from ipc.messages import Cancelled, Done, Failed
from supervisor.builds.crash_failure import fail_crashed_capture
from supervisor.builds.kinds import Kind
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connection_lost, transaction
from supervisor.db.queue import Job
from supervisor.host.outcome import JobOutcome
from supervisor.host.pool import Child
from supervisor.host.running import Running
from supervisor.host.settings import HostSettings
from supervisor.metrics.registry import HostMetrics

#: How often settlements that met a database outage are tried again.
PENDING_RETRY_SECONDS = 1.0


class Settler:
    """Starts claimed jobs and settles ended ones, each under its fence."""

    def __init__(
        self,
        engine: Engine,
        settings: HostSettings,
        store: ArtifactStore,
        kinds: dict[str, Kind],
        log: BoundLogger,
        clock: Callable[[], float],
        metrics: HostMetrics | None = None,
    ):
        self.engine = engine
        #: Where each job's end, each claim and each capture's stories are counted.
        self.metrics = metrics if metrics is not None else HostMetrics()
        self.settings = settings
        self.store = store
        self.kinds = kinds
        self.log = log
        self.clock = clock
        self.pending: list[tuple[Running, Callable[[], JobOutcome]]] = []
        #: Jobs a child finished, with their results: recorded with the next claim.
        self.completions: list[tuple[Running, Any]] = []
        #: When the oldest of `completions` finished (monotonic), while there are any.
        self.completions_since: float | None = None
        self._pending_at = 0.0

    # -- starting ---------------------------------------------------------------------------

    def complete_and_claim(self, children: list[Child]) -> list[Running]:
        """Record the jobs children finished, then claim a job for each entry of `children`: one
        transaction.

        One transaction for both halves a host's round trips per job: a child that finishes a
        job usually wants the next one. On a database outage nothing is lost: the finished jobs
        wait in `completions` and the claim is simply tried again.
        """
        completions, self.completions = self.completions, []
        since, self.completions_since = self.completions_since, None
        outcomes: list[tuple[Running, JobOutcome]] = []
        try:
            with transaction(self.engine) as conn:
                outcomes = self._complete_all(conn, completions)
                claimed = queue.claim(
                    conn,
                    self.settings.host_id,
                    len(children),
                    self.settings.lease_seconds,
                    child_pids=[child.pid for child in children],
                )
                started = [
                    self._start(conn, job, child)
                    for job, child in zip(claimed, children, strict=False)
                ]
        except DatabaseUnavailable as error:
            if completions:
                self.log.warning(
                    "cannot record finished jobs yet; database unavailable", error=str(error)
                )
            self.completions, self.completions_since = completions, since
            raise
        if children:  # counted once committed: a claim rolled back took nothing
            self.metrics.claimed(
                len(claimed), [s for job in claimed if (s := job.pickup_seconds) is not None]
            )
        results = {running.job.id: result for running, result in completions}
        for running, outcome in outcomes:
            self._report(running, outcome)
            if outcome == "completed" and running.job.kind == "capture":
                self.metrics.captured(results[running.job.id])
        return [running for running in started if running is not None]

    def _start(self, conn: Connection, job: Job, child: Child) -> Running | None:
        """The claimed job, ready for its child; None when it cannot run at all."""
        now = self.clock()
        job_log = self.log.bind(
            job_id=job.id,
            build_id=job.build_id,
            kind=job.kind,
            attempt=job.attempt,
            child_pid=child.pid,
        )
        kind = self.kinds.get(job.kind)
        if kind is None:
            queue.fail(conn, job.lease, f'no handler registered for job kind "{job.kind}"')
            job_log.error("job finished", outcome="unhandled")
            self.metrics.job_finished(job.kind, "unhandled", None)
            return None
        if not _accepts(kind, job.data):
            queue.fail(conn, job.lease, "malformed job")
            self._on_failed(conn, job, kind, "malformed job", job_log)
            job_log.warning("job finished", outcome="dropped", error="malformed job")
            self.metrics.job_finished(job.kind, "dropped", None)
            return None
        try:
            payload = self._prepare(conn, job, kind)
        except Exception as error:
            if isinstance(error, DBAPIError) and connection_lost(error):
                raise  # the claim's transaction died with its connection: nothing was claimed
            job_log.error("cannot prepare job", error=str(error))
            final = isinstance(error, PermanentFailure)
            why = f"cannot prepare the job: {error}"
            self._retry_or_fail(conn, job, kind, why, job_log, final=final)
            return None
        return Running(job, kind, child, payload, job_log, now, now, now)

    def _prepare(self, conn: Connection, job: Job, kind: Kind) -> Any:
        """The child's payload; a kind's own `prepare` runs in a savepoint, so its failure is its own."""
        if kind.prepare is None:
            return job.data
        with conn.begin_nested():
            return kind.prepare(conn, job, self.store)

    # -- ending -----------------------------------------------------------------------------

    def ended(self, running: Running, message: Done | Failed | Cancelled) -> None:
        """The child finished the job one way or another."""
        if running.lost or running.stopping == "lost":
            self._report(running, "lost")
        elif isinstance(message, Done):
            if not self.completions:
                self.completions_since = self.clock()
            self.completions.append((running, message.result))
        elif isinstance(message, Cancelled) and running.stopping == "released":
            self.release(running)  # taken back from behind a long job
        elif isinstance(message, Cancelled):
            self.cancel(running)
        else:
            error, final = message.error, message.final
            self._settle(running, lambda: self._fail_or_retry(running, error, final))

    def child_died(self, running: Running, cause: str) -> None:
        """The child running `running` died; `cause` is the signal or our reason for killing it."""
        if running.lost or running.stopping == "lost":
            self._report(running, "lost", cause=cause)
        elif running.stopping == "cancelled":
            self.cancel(running)
        elif running.stopping == "released":
            self.release(running)  # taken back, then killed when it did not stop: not its crash
        elif not running.accepted:
            running.log.warning("child died before accepting the job; giving it back", cause=cause)
            self.release(running)
        else:
            self._settle(running, lambda: self._crashed(running, cause))

    def release(self, running: Running, delay_seconds: float = 0.0) -> None:
        """Give a job back without spending an attempt (its child died before starting it, the
        drain ran out, or the child had no resources to run it), due after `delay_seconds`.
        """
        self._settle(running, lambda: self._release(running, delay_seconds))

    def give_back(self, never_sent: list[Running]) -> None:
        """Release jobs claimed ahead that never reached their child, in one transaction."""
        if not never_sent:
            return
        try:
            with transaction(self.engine) as conn:
                released = queue.release_all(conn, [running.job.lease for running in never_sent])
        except DatabaseUnavailable:
            for running in never_sent:
                self.release(running)  # waits in `pending` like any settlement
            return
        for running in never_sent:
            self._report(running, "released" if running.job.id in released else "lost")

    def cancel(self, running: Running) -> None:
        """A job whose cancel was asked stopped (or never started): record it cancelled."""
        self._settle(running, lambda: self._cancel(running))

    def refuse(self, running: Running, error: str) -> None:
        """Fail a job that can never run (its payload cannot be handed to a child), for good."""
        running.log.error("cannot run job", error=error)
        self._settle(running, lambda: self._fail(running, error))

    @property
    def busy(self) -> bool:
        """Jobs that ended but are not recorded yet."""
        return bool(self.pending or self.completions)

    @property
    def unrecorded(self) -> int:
        """How many ended jobs are not recorded yet."""
        return len(self.pending) + len(self.completions)

    def retry_pending(self) -> None:
        """Try again the settlements that met a database outage (at most once a second).

        `DatabaseUnavailable` when the database is still away: the rest wait for the next try.
        """
        now = self.clock()
        if not self.pending or now < self._pending_at:
            return
        self._pending_at = now + PENDING_RETRY_SECONDS
        waiting, self.pending = self.pending, []
        for index, (running, settle) in enumerate(waiting):
            try:
                outcome = self._attempt(running, settle)
            except DatabaseUnavailable:
                self.pending = waiting[index:] + self.pending
                raise
            self._report(running, outcome)

    def _settle(self, running: Running, settle: Callable[[], JobOutcome]) -> None:
        try:
            outcome = self._attempt(running, settle)
        except DatabaseUnavailable as error:
            running.log.warning("cannot settle job yet; database unavailable", error=str(error))
            self.pending.append((running, settle))
            return
        self._report(running, outcome)

    def _attempt(self, running: Running, settle: Callable[[], JobOutcome]) -> JobOutcome:
        """Run a settlement; one that raises (not an outage) retries or fails the job instead."""
        try:
            return settle()
        except DatabaseUnavailable:
            raise
        except Exception as error:
            running.log.exception("cannot settle job", error=str(error))
            return self._settle_after_error(running, f"cannot settle the job: {error}")

    def _settle_after_error(self, running: Running, error: str) -> JobOutcome:
        """Retry or fail the job with `error`; if even that raises, end it without its kind's
        bookkeeping (logged), so that no host meets the same error on every lease expiry."""
        try:
            with transaction(self.engine) as conn:
                return self._retry_or_fail(conn, running.job, running.kind, error, running.log)
        except DatabaseUnavailable:
            raise
        except Exception as second:
            running.log.exception("cannot record the job's failure", error=str(second))
        with transaction(self.engine) as conn:
            job = running.job
            if job.final_attempt:
                return "failed" if queue.fail(conn, job.lease, error) else "lost"
            delay = self._backoff(job)
            return "retried" if queue.retry(conn, job.lease, error, delay) else "lost"

    def _report(self, running: Running, outcome: JobOutcome, **facts: Any) -> None:
        seconds = self.clock() - running.started_at
        level = "info" if outcome in ("completed", "cancelled", "released") else "warning"
        getattr(running.log, level)(
            "job finished", outcome=outcome, seconds=round(seconds, 3), **facts
        )
        self.metrics.job_finished(running.job.kind, outcome, seconds)

    def _complete_all(
        self, conn: Connection, completions: list[tuple[Running, Any]]
    ) -> list[tuple[Running, JobOutcome]]:
        """Acknowledge finished jobs and write their results, under their fences.

        Jobs whose kind records nothing are acknowledged in one statement; a kind's results are
        written with its job's acknowledgement in a savepoint of their own, so that one job's
        bad results fail that job only.
        """
        plain = [running for running, _ in completions if running.kind.record is None]
        acked = queue.ack_all(conn, [running.job.lease for running in plain]) if plain else set()
        outcomes: list[tuple[Running, JobOutcome]] = [
            (running, "completed" if running.job.id in acked else "lost") for running in plain
        ]
        outcomes += [
            (running, self._record(conn, running, result))
            for running, result in completions
            if running.kind.record is not None
        ]
        return outcomes

    def _record(self, conn: Connection, running: Running, result: Any) -> JobOutcome:
        """Acknowledge one job and write its results; nothing if it is not ours."""
        job, kind = running.job, running.kind
        assert kind.record is not None
        try:
            with conn.begin_nested():
                if not queue.ack(conn, job.lease):
                    return "lost"
                kind.record(conn, job, result)
        except Exception as error:
            if isinstance(error, DBAPIError) and connection_lost(error):
                raise
            running.log.error("cannot record the job's results", error=str(error))
            return self._retry_or_fail(
                conn, job, kind, f"cannot record the results: {error}", running.log
            )
        return "completed"

    def _fail_or_retry(self, running: Running, error: str, final: bool = False) -> JobOutcome:
        with transaction(self.engine) as conn:
            return self._retry_or_fail(
                conn, running.job, running.kind, error, running.log, final=final
            )

    def _retry_or_fail(
        self,
        conn: Connection,
        job: Job,
        kind: Kind,
        error: str,
        job_log: BoundLogger,
        *,
        final: bool = False,
    ) -> JobOutcome:
        """A handler error: queued again with backoff, or failed on the last attempt, or at
        once when `final` (no retry can mend it: `ipc.failures.PermanentFailure`)."""
        if job.final_attempt or final:
            if not queue.fail(conn, job.lease, error):
                return "lost"
            self._on_failed(conn, job, kind, error, job_log)
            if final:
                job_log.error("job failed; no retry can mend it", error=error)
            else:
                job_log.error("job failed on its last attempt", error=error)
            return "failed"
        delay = self._backoff(job)
        if not queue.retry(conn, job.lease, error, delay):
            return "lost"
        job_log.warning("job failed; retrying", error=error, retry_in=delay)
        return "retried"

    def _crashed(self, running: Running, cause: str) -> JobOutcome:
        """A crash counts against the job; at `max_crashes` (or its last attempt) it fails."""
        job = running.job
        causes = (*job.crash_causes, cause)
        with transaction(self.engine) as conn:
            if len(causes) >= self.settings.max_crashes or job.final_attempt:
                closed = fail_crashed_capture(conn, job, running.kind, causes)
                if closed == "lost":
                    return "lost"
                running.log.error("job kept crashing its worker; failed it", build=closed)
                return "failed"
            if not queue.retry(
                conn, job.lease, f"worker crashed: {cause}", self._backoff(job), crash_causes=causes
            ):
                return "lost"
        running.log.warning("child crashed on the job; retrying", cause=cause, crashes=len(causes))
        return "retried"

    def _fail(self, running: Running, error: str) -> JobOutcome:
        job = running.job
        with transaction(self.engine) as conn:
            if not queue.fail(conn, job.lease, error):
                return "lost"
            self._on_failed(conn, job, running.kind, error, running.log)
        return "failed"

    def _on_failed(
        self, conn: Connection, job: Job, kind: Kind, error: str, job_log: BoundLogger
    ) -> None:
        """The kind's bookkeeping for a failed job, in a savepoint: when it raises, the job's
        failure is still recorded (and the error logged) instead of rolled back with it."""
        try:
            with conn.begin_nested():
                kind.on_failed(conn, job, error)
        except Exception as hook_error:
            if isinstance(hook_error, DBAPIError) and connection_lost(hook_error):
                raise
            job_log.exception("cannot close the failed job's build", error=str(hook_error))

    def _cancel(self, running: Running) -> JobOutcome:
        with transaction(self.engine) as conn:
            if not queue.cancel(conn, running.job.lease):
                return "lost"
            running.kind.on_cancelled(conn, running.job)
        return "cancelled"

    def _release(self, running: Running, delay_seconds: float) -> JobOutcome:
        with transaction(self.engine) as conn:
            released = queue.release(conn, running.job.lease, delay_seconds)
        return "released" if released else "lost"

    def _backoff(self, job: Job) -> float:
        return queue.backoff_seconds(
            job.attempt, self.settings.backoff_base_seconds, self.settings.backoff_max_seconds
        )


def _accepts(kind: Kind, data: Any) -> bool:
    """Malformed data is refused, whatever it makes `accepts` do."""
    try:
        return bool(kind.accepts(data))
    except Exception:
        return False
