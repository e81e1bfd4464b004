"""`python -m supervisor run`: the capture host's main loop.

The loop reads like an arbiter's: handle queued signals, reap the dead, stop the hung and the
bloated, check for cancels, keep the children, claim work for them (a few jobs ahead when jobs
are short: `supervisor.host.claim_ahead`), then wait for the next thing to happen (a child's message,
a NOTIFY, a signal, a child's death, a deadline).
Everything runs on this one thread; signal handlers only queue the signal. What happens to a job
is decided in `supervisor.host.settle`; which process runs it, in `supervisor.host.pool`.
"""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import sys
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any

import structlog
from sqlalchemy import Engine, func
from sqlalchemy import select as sql_select

from ipc.messages import Accepted, Cancel, Cancelled, Done, Failed, Hello, Progress, Run, Stop
from supervisor.builds.kinds import Kind
from supervisor.builds.registry import registered_kinds
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, is_postgres, transaction
from supervisor.db.tables import jobs
from supervisor.host import scratch
from supervisor.host.claim_ahead import ClaimAhead
from supervisor.host.deaths import OomCounter, death_cause
from supervisor.host.forkserver import ForkServer, ForkServerError
from supervisor.host.pool import Child, Pool
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Running, Settler
from supervisor.host.sizing import size_host
from supervisor.host.wakeup import Listener

log = structlog.get_logger(__name__)

#: Exit status when the image engine cannot load: the host must not claim.
EXIT_NO_ENGINE = 3
#: How long a cancelled or lost job's child may take to stop before it is killed.
CANCEL_GRACE_SECONDS = 2.0
#: How often children's memory is read.
MEMORY_CHECK_SECONDS = 1.0
#: Kills that end a child on purpose: its death says nothing about the host's health.
DELIBERATE_KILLS = frozenset({"cancelled", "lost", "released", "host stopping", "stopped"})
#: How long to wait for a new child's hello before the host gives up on it.
HELLO_TIMEOUT_SECONDS = 30.0
#: The longest the host waits after a database error before trying again.
DB_RETRY_MAX_SECONDS = 10.0
#: How long finished jobs may wait to be acknowledged together (sooner with the next claim).
ACK_DELAY_SECONDS = 0.05


def new_host_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{random.randrange(16**4):04x}"


@dataclass
class Timers:
    """When each periodic duty is next due (monotonic seconds)."""

    poll_at: float = 0.0
    cancel_check_at: float = 0.0
    expire_check_at: float = 0.0
    memory_check_at: float = 0.0
    spawn_after: float = 0.0
    db_retry_at: float = 0.0
    listen_retry_at: float = 0.0


@dataclass
class Health:
    """Children that died without completing a job, to stop spawning them in a tight loop."""

    limit: int
    window_seconds: float
    deaths: deque[float] = field(default_factory=deque)
    backoff_seconds: float = 0.0

    def child_failed(self, now: float) -> float:
        """Record a fruitless death; the delay before the next spawn (0 while under the limit)."""
        self.deaths.append(now)
        while self.deaths and now - self.deaths[0] > self.window_seconds:
            self.deaths.popleft()
        if len(self.deaths) < self.limit:
            return 0.0
        self.backoff_seconds = min(60.0, max(1.0, self.backoff_seconds * 2))
        return self.backoff_seconds

    def child_succeeded(self) -> None:
        self.deaths.clear()
        self.backoff_seconds = 0.0

    @property
    def healthy(self) -> bool:
        return self.backoff_seconds == 0.0


class Host:
    def __init__(self, settings: HostSettings, kinds: dict[str, Kind] | None = None) -> None:
        self.settings = replace(settings, host_id=settings.host_id or new_host_id())
        self.kinds = kinds if kinds is not None else registered_kinds()
        self.log = log.bind(host=self.settings.host_id)
        self.sizing = size_host(settings.child_memory_bytes, settings.concurrency)
        self.signals: deque[int] = deque()
        #: Jobs a child is running, by id.
        self.running: dict[int, Running] = {}
        #: Jobs claimed for a child that has not been sent them yet.
        self.ahead = ClaimAhead()
        self.timers = Timers()
        self.health = Health(settings.restart_limit, settings.restart_window_seconds)
        self.oom = OomCounter()
        self.draining_until: float | None = None
        self.stopped = False
        self.last_work_at: float | None = None
        #: The last claim found no work (with --drain, time to ask whether the queue is empty).
        self.found_nothing = False
        self.db_failures = 0
        # Set up in start(): the fork server first, before any connection or thread.
        self.pool: Pool
        self.engine: Engine
        self.settler: Settler
        self.listener: Listener | None = None
        self._wakeup_read: socket.socket

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Claim and run jobs until told to stop; the exit status."""
        code = self.start()
        if code:
            return code
        while not self.stopped:
            self.handle_signals()
            self.reap_children()
            self.stop_hung_and_bloated()
            self.with_database(self.check_cancels)
            self.manage_children()
            self.with_database(self.claim_and_dispatch)
            self.settler.retry_pending()
            self.check_done()
            self.wait()
        self.shutdown()
        return 0

    def start(self) -> int:
        # First: a SIGTERM while the fork server starts must drain the host, not kill it.
        self.queue_signals()
        scratch.sweep(self.settings.artifacts, self.log)
        try:
            fork_server = ForkServer.start()
        except ForkServerError as error:
            return self.refuse(str(error))
        self.pool = Pool(
            fork_server, self.sizing.threads_per_child, self.settings.max_jobs_per_child
        )
        self.install_wakeup()
        self.log.info("host starting", reason=self.sizing.reason, slots=self.sizing.slots)
        engine_error = self.check_engine()
        if engine_error is not None:
            self.pool.kill_all("engine check failed")
            self.pool.wait_all(5.0)
            self.pool.fork_server.stop()
            return self.refuse(engine_error)
        self.engine = connect(self.settings.database_url, pool_size=2)
        self.settler = Settler(self.engine, self.settings, self.kinds, self.log)
        if is_postgres(self.engine):
            self.listener = Listener(self.settings.database_url)
            self.listener.connect()
        return 0

    def refuse(self, why: str) -> int:
        """A host that cannot diff must not claim: say why and leave."""
        self.log.error("image engine cannot load; not claiming", error=why)
        print(f"supervisor run: the image engine cannot load: {why}", file=sys.stderr, flush=True)
        return EXIT_NO_ENGINE

    def check_engine(self) -> str | None:
        """Start the first child and read its hello: None when it computed with libvips."""
        child = self.pool.spawn(time.monotonic())
        deadline = time.monotonic() + HELLO_TIMEOUT_SECONDS
        while child.hello is None and time.monotonic() < deadline and not child.closed:
            select.select([child.sock], [], [], 0.5)
            for message in self.pool.receive(child):
                if isinstance(message, Hello):
                    child.hello = message
        if child.hello is None:
            return "the first child did not say hello"
        self.log.info("image engine loaded", engine=child.hello.engine, child_pid=child.pid)
        return child.hello.engine_error

    # -- signals ----------------------------------------------------------------------------

    def queue_signals(self) -> None:
        """Handlers only queue the signal; the loop's first turn reads what came while starting."""
        for number in (signal.SIGTERM, signal.SIGINT):
            signal.signal(number, lambda received, _frame: self.signals.append(received))

    def install_wakeup(self) -> None:
        """A wake-up socket interrupts the loop's wait on a signal. Made after the fork server
        is forked, so that neither it nor the children hold the parent's socket."""
        self._wakeup_read, wakeup_write = socket.socketpair()
        wakeup_write.setblocking(False)
        self._wakeup_read.setblocking(False)
        self._wakeup_write = wakeup_write
        signal.set_wakeup_fd(wakeup_write.fileno(), warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, lambda _received, _frame: None)

    def handle_signals(self) -> None:
        while self.signals:
            received = self.signals.popleft()
            if self.draining_until is None:
                self.begin_drain(signal.Signals(received).name)
            else:
                self.log.warning("second signal; releasing running jobs now")
                self.draining_until = time.monotonic()

    def begin_drain(self, why: str) -> None:
        """Stop claiming; running jobs may finish within `drain_seconds`."""
        self.draining_until = time.monotonic() + self.settings.drain_seconds
        self.log.info(
            "draining",
            signal=why,
            running=len(self.running),
            drain_seconds=self.settings.drain_seconds,
        )
        self.settler.give_back(self.ahead.take_all())
        for child in list(self.pool.children.values()):
            if child.ready:
                self.pool.stop(child, Stop())

    # -- children ---------------------------------------------------------------------------

    def reap_children(self) -> None:
        for child, pid, status in self.pool.reap():
            if pid == self.pool.fork_server.pid:
                self.log.error(
                    "fork server died; starting a new one", cause=death_cause(status, self.oom)
                )
                self.pool.fork_server = ForkServer.start()
                continue
            if child is None:
                continue  # an orphan we adopted as subreaper: nothing of ours
            scratch.remove_child_scratch(self.settings.artifacts, pid)
            self.give_back(child)
            cause = death_cause(status, self.oom, killed_for=child.kill_reason)
            running = self.running.pop(child.job_id, None) if child.job_id is not None else None
            if running is None and child.kill_reason is None and child.stopping and status == 0:
                continue  # asked to leave, and left
            self.log.log(
                20 if child.stopping else 30,
                "child exited",
                child_pid=pid,
                cause=cause,
                job_id=child.job_id,
            )
            if running is not None:
                self.settler.child_died(running, cause, time.monotonic())
            deliberate = child.stopping or child.kill_reason in DELIBERATE_KILLS
            if child.jobs_done == 0 and not deliberate:
                self.note_fruitless_death()

    def note_fruitless_death(self) -> None:
        delay = self.health.child_failed(time.monotonic())
        if delay:
            self.timers.spawn_after = time.monotonic() + delay
            self.log.error(
                "host unhealthy: children keep dying; spawning backs off",
                backoff_seconds=delay,
                deaths=len(self.health.deaths),
                window_seconds=self.health.window_seconds,
            )

    def manage_children(self) -> None:
        """Keep one child per slot (none while draining, none during a spawn back-off)."""
        now = time.monotonic()
        if self.draining_until is not None or now < self.timers.spawn_after:
            return
        alive = [
            child
            for child in self.pool.children.values()
            if not child.stopping and not child.closed
        ]
        for _ in range(self.sizing.slots - len(alive)):
            try:
                self.pool.spawn(now)
            except OSError as error:
                self.log.error("cannot spawn a child", error=str(error))
                self.timers.spawn_after = now + 1.0
                return

    def stop_hung_and_bloated(self) -> None:
        now = time.monotonic()
        for running in list(self.running.values()):
            child = running.child
            if (
                running.stopping_since is not None
                and now - running.stopping_since > CANCEL_GRACE_SECONDS
            ):
                self.pool.kill(child, running.stopping or "stopped")
            elif now - running.last_progress_at > self.settings.stall_seconds:
                self.pool.kill(child, f"hung (no progress for {self.settings.stall_seconds:g} s)")
        if overdue := self.ahead.overdue(self.running.values(), now):
            for held in overdue:
                held.log.info("giving back a job claimed ahead: its child is busy with a long one")
            self.settler.give_back(overdue)
        if now < self.timers.memory_check_at:
            return
        self.timers.memory_check_at = now + MEMORY_CHECK_SECONDS
        for child in list(self.pool.children.values()):
            rss = self.pool.rss_bytes(child)
            if rss > self.settings.hard_rss_bytes:
                self.pool.kill(child, "memory limit")
            elif rss > self.settings.soft_rss_bytes and not child.stopping:
                self.log.info(
                    "child over the soft memory limit; recycling after its job",
                    child_pid=child.pid,
                    rss=rss,
                )
                child.stopping = True
                self.give_back(child)
                if child.job_id is None:
                    self.pool.send(child, Stop())

    # -- the database -----------------------------------------------------------------------

    def with_database(self, step: Any) -> None:
        """Run a step that talks to the database; when it is away, back off and keep going."""
        if time.monotonic() < self.timers.db_retry_at:
            return
        try:
            step()
        except DatabaseUnavailable as error:
            self.db_failures += 1
            delay = min(DB_RETRY_MAX_SECONDS, 0.25 * 2 ** min(self.db_failures, 6))
            self.timers.db_retry_at = time.monotonic() + delay
            self.log.warning("database unavailable; retrying", error=str(error), retry_in=delay)
        else:
            self.db_failures = 0

    def check_cancels(self) -> None:
        now = time.monotonic()
        if now < self.timers.cancel_check_at:
            return
        self.timers.cancel_check_at = now + self.settings.cancel_check_seconds
        held = [running.job.id for running in self.ahead]
        if not self.running and not held:
            return
        with transaction(self.engine) as conn:
            wanted = queue.cancel_requested(conn, [*self.running, *held])
        for job_id in wanted:
            if job_id in self.running:
                self.stop_job(self.running[job_id], "cancelled")
            elif (never_sent := self.ahead.take_job(job_id)) is not None:
                self.settler.cancel(never_sent)

    def stop_job(self, running: Running, why: str) -> None:
        """Ask the child to stop the job (a cancel, or a lease lost); it is killed after a grace."""
        if running.stopping is not None:
            return
        running.stopping = why
        running.stopping_since = time.monotonic()
        running.log.info("stopping job", why=why)
        self.pool.send(running.child, Cancel(running.job.id))

    def claim_and_dispatch(self) -> None:
        """Record finished jobs and, when a claim is due, claim work for the children."""
        now = time.monotonic()
        if now >= self.timers.expire_check_at:
            self.timers.expire_check_at = now + self.settings.lease_seconds / 4
            self.settler.expire_leases()
        may_claim = self.draining_until is None and now >= self.timers.poll_at
        wanted = (
            self.ahead.wanted(self.pool.children.values(), self.running.values(), now)
            if may_claim
            else []
        )
        if not wanted and not self.acks_due(now):
            return
        started = self.settler.complete_and_claim(wanted)
        for running in started:
            self.ahead.add(running)
        self.dispatch_all()
        if not wanted:
            return
        if started:
            self.last_work_at = now
        self.found_nothing = not started
        if len(started) == len(wanted):
            self.timers.poll_at = now  # there may be more: claim again when a child wants it
        else:
            self.timers.poll_at = now + self.next_poll_delay(now)

    def acks_due(self, now: float) -> bool:
        """Finished jobs are recorded with the next claim, or once they waited long enough."""
        since = self.settler.completions_since
        if since is None:
            return False
        quiet = not self.running or self.draining_until is not None
        return quiet or now - since >= ACK_DELAY_SECONDS

    def dispatch_all(self) -> None:
        for child in list(self.pool.children.values()):
            self.dispatch(child)

    def dispatch(self, child: Child) -> None:
        """Send a free child the next job claimed for it."""
        if not child.ready:
            return
        running = self.ahead.next_for(child)
        if running is None:
            return
        running.started_at = running.last_progress_at = time.monotonic()
        self.running[running.job.id] = running
        child.job_id = running.job.id
        running.log.info("job started")
        self.pool.send(
            child, Run(running.job.id, running.job.kind, running.job.attempt, running.payload)
        )

    def give_back(self, child: Child) -> None:
        """Release the jobs claimed ahead for a child that will not run them."""
        self.settler.give_back(self.ahead.take(child))

    def next_poll_delay(self, now: float) -> float:
        """The cadence's delay, or sooner when a queued job (a retry's backoff) comes due first.

        A NOTIFY wakes the host for new work, but a retry becoming due sends none.
        """
        delay = self.settings.cadence.next_poll_delay(self.last_work_at, now)
        due = self.settler.seconds_until_next_due()
        return min(delay, due) if due is not None else delay

    # -- messages ---------------------------------------------------------------------------

    def wait(self) -> None:
        """Sleep until a child speaks, a NOTIFY or signal arrives, or the next duty is due."""
        now = time.monotonic()
        # At least once a second: stalls, grace periods and back-offs are checked on waking.
        deadlines = [self.timers.cancel_check_at, self.timers.memory_check_at, now + 1.0]
        if any(child.ready for child in self.pool.children.values()):
            deadlines.append(self.timers.poll_at)  # a poll only matters with a child to give work
        if self.draining_until is not None:
            deadlines.append(self.draining_until)
        if self.settler.completions_since is not None:
            deadlines.append(self.settler.completions_since + ACK_DELAY_SECONDS)
        timeout = max(0.0, min(deadlines) - now)
        sources: list[Any] = [self._wakeup_read, *self.pool.children.values()]
        listen_fd = self.listener.fileno() if self.listener else None
        if listen_fd is not None:
            sources.append(listen_fd)
        readable, _, _ = select.select(sources, [], [], timeout)
        for source in readable:
            if source is self._wakeup_read:
                self._drain_wakeup()
            elif isinstance(source, Child):
                self.service(source)
            elif self.listener is not None:
                self.heard(self.listener.drain())
        self.keep_listening()

    def _drain_wakeup(self) -> None:
        try:
            while self._wakeup_read.recv(4096):
                pass
        except BlockingIOError:
            return

    def heard(self, payloads: list[str]) -> None:
        if "job" in payloads:
            self.timers.poll_at = 0.0
        if "cancel" in payloads:
            self.timers.cancel_check_at = 0.0

    def keep_listening(self) -> None:
        """Reconnect a dropped LISTEN connection, with back-off; poll meanwhile."""
        if self.listener is None or self.listener.connected:
            return
        now = time.monotonic()
        if now < self.timers.listen_retry_at:
            return
        self.timers.listen_retry_at = now + 2.0
        if self.listener.connect():
            self.log.info("listening again")
            self.timers.poll_at = 0.0  # we may have missed a NOTIFY meanwhile

    def service(self, child: Child) -> None:
        for message in self.pool.receive(child):
            if isinstance(message, Hello):
                child.hello = message
                self.timers.poll_at = min(self.timers.poll_at, time.monotonic())  # a free slot
                continue
            running = self.running.get(getattr(message, "job_id", -1))
            if running is None or running.child is not child:
                self.pool.kill(child, f"protocol error: {message.type} for a job it does not run")
                return
            self.on_job_message(running, message)

    def on_job_message(self, running: Running, message: Any) -> None:
        now = time.monotonic()
        running.last_progress_at = now
        if isinstance(message, Accepted):
            running.accepted = True  # the claim set a full lease: nothing to renew yet
            running.log.debug("job accepted")
        elif isinstance(message, Progress):
            if now - running.renewed_at >= self.settings.lease_seconds / 4:
                self.with_database(lambda: self.settler.renew(running, now))
            if running.lost and running.stopping is None:
                self.stop_job(running, "lost")
        elif isinstance(message, Done | Failed | Cancelled):
            self.finish(running, message)

    def finish(self, running: Running, message: Done | Failed | Cancelled) -> None:
        child = running.child
        del self.running[running.job.id]
        child.job_id = None
        child.jobs_done += 1
        self.health.child_succeeded()
        self.ahead.job_took(time.monotonic() - running.started_at)
        self.settler.ended(running, message)
        if child.jobs_done >= child.max_jobs and not child.stopping:
            self.log.info("recycling child", child_pid=child.pid, jobs_done=child.jobs_done)
            child.stopping = True
        if child.stopping or self.draining_until is not None:
            self.give_back(child)
            self.pool.stop(child, Stop())
        else:
            self.dispatch(child)
        self.timers.poll_at = min(self.timers.poll_at, time.monotonic())

    # -- the end ----------------------------------------------------------------------------

    def check_done(self) -> None:
        """Leave when draining is over, or (with --drain) when the queue has nothing left."""
        now = time.monotonic()
        if self.draining_until is not None:
            if not self.running and not self.settler.busy:
                self.stopped = True
            elif now >= self.draining_until:
                self.release_all()
                self.stopped = not self.settler.busy
            return
        if (
            self.settings.exit_when_idle
            and self.found_nothing
            and not self.running
            and not self.ahead
            and not self.settler.busy
        ):
            self.found_nothing = False
            try:
                if self.queue_is_empty():
                    self.log.info("queue is empty; leaving")
                    self.begin_drain("--drain")
            except DatabaseUnavailable:
                return

    def queue_is_empty(self) -> bool:
        with transaction(self.engine) as conn:
            open_jobs = conn.execute(
                sql_select(func.count())
                .select_from(jobs)
                .where(jobs.c.status.in_(("queued", "running")))
            ).scalar_one()
        return int(open_jobs) == 0

    def release_all(self) -> None:
        """Give back every running job without spending an attempt, and stop its child."""
        for running in list(self.running.values()):
            running.stopping = "released"
            self.pool.kill(running.child, "released")
            self.settler.release(running)
            del self.running[running.job.id]
            running.child.job_id = None

    def shutdown(self) -> None:
        """Let idle children leave, kill any left, and remove their scratch."""
        self.pool.fork_server.stop()
        for child in list(self.pool.children.values()):
            self.pool.stop(child, Stop())
        reaped = self.pool.wait_all(3.0)
        self.pool.kill_all("host stopping")
        reaped += self.pool.wait_all(3.0)
        for _child, pid, _status in reaped:
            scratch.remove_child_scratch(self.settings.artifacts, pid)
        if self.listener is not None:
            self.listener.close()
        self.engine.dispose()
        self.log.info("host stopped")


def run_host(settings: HostSettings) -> int:
    return Host(settings).run()
