"""`python -m supervisor run`: the capture host's main loop.

The loop reads like an arbiter's (`run`): each turn handles queued signals, reaps the dead,
kills the hung and the bloated, gives back what waits behind long jobs, checks for cancels,
ends expired leases, renews what is held, keeps a child per slot, records finished jobs and
claims work, then waits for the next thing to happen (a child's message, a NOTIFY, a signal, a
child's death, a deadline). Everything runs on this one thread; signal handlers only queue.

Each duty is decided in the module named for it: which jobs are held and running
(`inflight`), how many to claim ahead (`claim_ahead`), leases (`lease`), how a job ends
(`settle`), which process runs it (`pool`), why a child died (`deaths`), back-offs (`health`),
the drain (`drain`), wake-ups (`signals`, `wakeup`). The clock and the randomness are passed
in, so those decisions are tested with a fake clock.
"""

from __future__ import annotations

import os
import random
import select
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import structlog
from sqlalchemy import Connection, Engine, event

from ipc.artifacts import location
from ipc.artifacts.location import open_store
from ipc.artifacts.store import StoreError, StoreUnavailable
from ipc.forkserver import ForkRefused, ForkServerError, ForkServerGone
from ipc.framing import MAX_FRAME_BYTES, FrameTooLarge, encode
from ipc.messages import (
    PROTOCOL_VERSION,
    Accepted,
    Cancel,
    Cancelled,
    Done,
    Failed,
    Hello,
    Progress,
    Run,
    Stop,
    ToParent,
    Unable,
)
from supervisor.builds.kinds import Kind
from supervisor.builds.registry import registered_kinds
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, is_postgres, transaction
from supervisor.host import chromium, scratch
from supervisor.host.claim_ahead import ClaimAhead
from supervisor.host.deaths import DELIBERATE_KILLS, OomCounter, death_cause
from supervisor.host.drain import Drain
from supervisor.host.health import DatabaseBackoff, SpawnBackoff
from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.memory import TreeMemory
from supervisor.host.pool import SEND_AHEAD_FRAME_BYTES, Child, Pool
from supervisor.host.running import Running, StopReason
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from supervisor.host.signals import Signals
from supervisor.host.sizing import size_host
from supervisor.host.wakeup import Listener
from supervisor.logs import complain
from supervisor.metrics.health import judge
from supervisor.metrics.queue_depth import QueueDepth
from supervisor.metrics.registry import HostMetrics
from supervisor.metrics.server import MetricsServer

log = structlog.get_logger(__name__)

#: Exit status when the image engine cannot load: the host must not claim.
EXIT_NO_ENGINE = 3
#: How long a cancelled or lost job's child may take to stop before it is killed.
CANCEL_GRACE_SECONDS = 2.0
#: How often children's memory is read.
MEMORY_CHECK_SECONDS = 1.0
#: How long to wait for the first child's hello before the host gives up on starting (later
#: children are hung when silent for `stall_seconds`, like a child on a job).
HELLO_TIMEOUT_SECONDS = 30.0
#: How long finished jobs may wait to be acknowledged together (sooner with the next claim).
ACK_DELAY_SECONDS = 0.05
#: How long a job its child could not run for want of resources waits, and the host claims
#: nothing.
RESOURCE_PAUSE_SECONDS = 2.0
#: Logged for each job given back from behind a job that turned out long.
GIVING_BACK = "giving back a job claimed ahead: its child is busy with a long one"
#: The longest the loop sleeps: stalls, grace periods and back-offs are checked on waking.
LONGEST_WAIT_SECONDS = 1.0


def new_host_id(rand: random.Random) -> str:
    """`host:pid:random`: unique per process, readable in `status` and the logs."""
    return f"{socket.gethostname()}:{os.getpid()}:{rand.randrange(16**4):04x}"


@dataclass
class Timers:
    """When each periodic duty is next due (monotonic seconds)."""

    poll_at: float = 0.0
    #: No claims before this (a child lacked resources: see `Host.unable`).
    claims_paused_until: float = 0.0
    cancel_check_at: float = 0.0
    memory_check_at: float = 0.0
    spawn_after: float = 0.0


class Host:
    """One capture host: a fork server, a child per slot, and the loop that feeds them."""

    def __init__(
        self,
        settings: HostSettings,
        kinds: dict[str, Kind] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        rand: random.Random | None = None,
        metrics: HostMetrics | None = None,
        server: MetricsServer | None = None,
    ) -> None:
        self.rand = rand or random.Random()
        #: What the host records as it works, and its health (`supervisor.metrics`); served
        #: by `server` when `run --metrics-address` gave one.
        self.metrics = metrics if metrics is not None else HostMetrics()
        self.server = server
        self.clock = clock
        self.settings = replace(settings, host_id=settings.host_id or new_host_id(self.rand))
        self.kinds = kinds if kinds is not None else registered_kinds()
        self.metrics.know_kinds(self.kinds)
        self.log = log.bind(host=self.settings.host_id)
        self.sizing = size_host(settings.child_memory_bytes, settings.concurrency)
        self.signals = Signals()
        self.inflight = InFlight()
        self.ahead = ClaimAhead()
        # Quick: the loop only checks the store, and must not wait long on a bucket that does
        # not answer; children do the writing (and the waiting).
        self.store = open_store(settings.artifacts, quick=True)
        #: Where this host's children write unfinished files (`supervisor.host.scratch`).
        self.scratch = scratch.roots(self.store, settings.cache_dir.absolute())
        self.lease = LeaseKeeper(self.settings, self.kinds, self.inflight, self.log, self.metrics)
        self.timers = Timers()
        self.spawning = SpawnBackoff(
            settings.restart_limit, settings.restart_window_seconds, self.rand
        )
        self.database = DatabaseBackoff(self.rand)
        self.drain = Drain(settings.drain_seconds)
        self.oom = OomCounter()
        self.memory = TreeMemory()
        self.stopped = False
        #: What `/healthz` is decided from, besides the back-offs: whether the first child's
        #: image engine passed, why the database last failed (None once a commit went
        #: through), why the last spawn failed, and what started the drain.
        self.engine_checked = False
        self.database_error: str | None = None
        self.fork_error: str | None = None
        self.drain_reason: str | None = None
        self.queue_depth: QueueDepth | None = None
        self.last_work_at: float | None = None
        #: The last claim found no work (with --drain, time to ask whether the queue is empty).
        self.found_nothing = False
        #: Statements sent to the database and transactions committed, logged when the host
        #: stops: the round trips its work cost.
        self.statements = 0
        self.transactions = 0
        # Set up in start(): the fork server first, before any connection or thread.
        self.pool: Pool
        self.engine: Engine
        self.settler: Settler
        self.listener: Listener | None = None

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> int:
        """Claim and run jobs until told to stop; the exit status."""
        code = self.start()
        if code or self.stopped:
            self.pool.stop_fork_server()
            self.stop_serving()
            return code
        while not self.stopped:
            self.publish_state()
            self.handle_signals()
            self.reap_children()
            self.kill_stalled()
            self.check_memory()
            self.give_back_overdue()
            self.with_database(self.check_cancels)
            self.with_database(self.expire_leases)
            self.with_database(self.renew_held)
            self.keep_children()
            self.with_database(self.claim_and_dispatch)
            self.with_database(self.settler.retry_pending)
            self.check_done()
            self.wait()
        self.shutdown()
        return 0

    def start(self) -> int:
        """Fork the fork server, check the image engine in a first child, then connect.

        0 when the host may claim (or was told to stop while it started: `stopped` is set).
        """
        # First: a SIGTERM while the fork server starts must drain the host, not kill it.
        self.signals.queue_stops()
        scratch.sweep(self.scratch, self.log)
        chromium.export(self.settings.chromium, self.log)
        location.export_cache(self.settings.cache_dir, self.settings.cache_mib)
        self.pool = Pool(
            None, self.sizing.threads_per_child, self.settings.max_jobs_per_child, self.rand
        )
        try:
            first = self.first_ready_child()
        except ForkServerError as error:
            return self.refuse(f"the image engine cannot load: {error}")
        if first is None:
            self.stopped = True
            return 0
        if self.server is not None:
            self.server.start()  # the fork server runs: a thread may exist now
        self.signals.wake_on_signals()
        self.log.info("host starting", reason=self.sizing.reason, slots=self.sizing.slots)
        problem = self.check_engine(first) or self.check_store()
        if problem is not None:
            self.pool.kill_all("cannot work")
            self.pool.wait_all(5.0)
            self.pool.stop_fork_server()
            return self.refuse(problem)
        self.engine_checked = True
        self.engine = connect(self.settings.database_url, pool_size=2)
        event.listen(self.engine, "commit", self.database_answered)
        event.listen(self.engine, "before_cursor_execute", self.count_statement)
        # A connection held past a few seconds is a database that does not answer: /healthz
        # says so while the statement still blocks the loop.
        event.listen(self.engine, "checkout", lambda *_: self.metrics.health.database_call_began())
        event.listen(self.engine, "checkin", lambda *_: self.metrics.health.database_call_ended())
        self.settler = Settler(
            self.engine, self.settings, self.store, self.kinds, self.log, self.clock, self.metrics
        )
        if is_postgres(self.engine):
            self.listener = Listener(self.settings.database_url, self.rand)
            self.listener.connect()
        if self.server is not None:
            self.queue_depth = QueueDepth(self.settings.database_url, self.kinds)
            self.metrics.registry.register(self.queue_depth)
        self.publish_state()
        return 0

    def spawn_first_child(self) -> Child | None:
        """The fork server and the first child; while forks fail, back off and try again.

        None when a stop signal arrived meanwhile. A fork server that cannot load the child
        code (`ForkServerError`) is not worth waiting for: it is raised.
        """
        while True:
            try:
                self.pool.ensure_fork_server()
                child = self.pool.spawn(self.clock())
            except (ForkServerGone, ForkRefused) as error:
                delay = self.spawn_failed(self.clock(), error)
                if self.signals.wait_for_stop(delay):
                    return None
            else:
                self.spawning.forked()
                return child

    def check_store(self) -> str | None:
        """Why the artifact store cannot be used, or None. Checked once the fork server runs,
        so the parent's connection to a bucket never crosses a fork; a store that does not
        answer now may later, and only costs the jobs that need it a retry."""
        try:
            self.store.check()
        except StoreUnavailable as error:
            self.log.warning("the artifact store does not answer", error=str(error))
        except (StoreError, OSError) as error:
            return f"the artifact store cannot be used: {error}"
        return None

    def refuse(self, why: str) -> int:
        """A host whose children cannot work must not claim: say why and leave."""
        self.log.error("children cannot work; not claiming", error=why)
        complain("run", f"{why}")
        return EXIT_NO_ENGINE

    def first_ready_child(self) -> Child | None:
        """The first child, once it said hello. One that stays silent (it may wait for a thread
        a pids limit refuses it) is killed and another tried after a back-off, as when forks
        fail; None when a stop signal arrived meanwhile."""
        while (child := self.spawn_first_child()) is not None:
            deadline = self.clock() + HELLO_TIMEOUT_SECONDS
            while child.hello is None and self.clock() < deadline and not child.closed:
                select.select([child.sock], [], [], 0.5)
                child.hello = next(
                    (m for m in self.pool.receive(child) if isinstance(m, Hello)), None
                )
            if child.hello is not None:
                return child
            self.pool.kill(child, "hung", f"no hello within {HELLO_TIMEOUT_SECONDS:g} s")
            self.pool.wait_all(5.0)
            delay = self.spawning.fork_failed()
            self.log.error(
                "host unhealthy: the first child did not say hello; trying another",
                backoff_seconds=round(delay, 2),
            )
            if self.signals.wait_for_stop(delay):
                return None
        return None

    def check_engine(self, child: Child) -> str | None:
        """Read the first child's hello: None when it speaks our protocol and computed with
        libvips, else why not."""
        hello = child.hello
        assert hello is not None, "first_ready_child() first"
        if hello.version != PROTOCOL_VERSION:
            return f"the children cannot work: {_version_mismatch(hello)}"
        if hello.engine_error is not None:
            return f"the image engine cannot load: {hello.engine_error}"
        self.log.info("image engine loaded", engine=hello.engine, child_pid=child.pid)
        self.log.debug("child ready", child_pid=child.pid)
        return None

    # -- what operators see -------------------------------------------------------------------

    def publish_state(self) -> None:
        """Set the gauges and decide the health from what the loop knows now (cheap: no
        statement, no system call), for the server's thread to read."""
        now = self.clock()
        backing_off = now < self.timers.spawn_after
        self.metrics.host_state(
            children=sum(1 for child in self.pool.children.values() if not child.closed),
            claimed_ahead=self.ahead.not_started(self.inflight),
            backoff_remaining=self.timers.spawn_after - now if backing_off else None,
        )
        self.metrics.health.publish(
            judge(
                engine_checked=self.engine_checked,
                draining=self.drain_reason if self.drain.active else None,
                database_error=self.database_error,
                fork_error=self.fork_error if backing_off else None,
                spawn_deaths=len(self.spawning.deaths) if backing_off else None,
            )
        )

    def stop_serving(self) -> None:
        """Close the metrics server and the queue's scrape engine (the host is leaving)."""
        if self.server is not None:
            self.server.close()
        if self.queue_depth is not None:
            self.queue_depth.close()

    # -- signals and the drain --------------------------------------------------------------

    def handle_signals(self) -> None:
        """The first stop signal drains the host; a second gives everything back now."""
        while (received := self.signals.pop()) is not None:
            if not self.drain.active:
                self.begin_drain(received.name)
            else:
                self.log.warning("second signal; releasing running jobs now")
                self.drain.hurry(self.clock())

    def begin_drain(self, why: str) -> None:
        """Stop claiming; running jobs may finish within `drain_seconds`."""
        self.drain.begin(self.clock())
        self.drain_reason = why
        self.publish_state()
        self.log.info(
            "draining",
            signal=why,
            running=len(self.inflight.running()),
            drain_seconds=self.settings.drain_seconds,
        )
        self.settler.give_back(self.inflight.take_all_held())
        for child in list(self.pool.children.values()):
            if child.idle:
                self.pool.stop(child, Stop())

    # -- children ---------------------------------------------------------------------------

    def reap_children(self) -> None:
        """Read each death once: its cause, then what it means for its job and for the host."""
        for child, pid, status in self.pool.reap():
            if self.pool.fork_server_died(pid):
                cause = death_cause(status, self.oom)
                self.log.error("fork server died; starting a new one", cause=cause)
                continue
            if child is None:
                continue  # an orphan we adopted as subreaper, or an old fork server
            # What it sent before dying counts: an `Accepted` still unread makes its death a
            # crash of the job, a `Done` still unread finishes the job.
            self.service(child)
            self.pool.close(child)
            scratch.remove_child_scratch(self.scratch, pid)
            sent, held = self.inflight.child_gone(child)
            # Only the first job sent can have started: those waiting behind it go back with
            # what was held, without spending an attempt (unless asked to stop meanwhile).
            running, waiting = (sent[0], sent[1:]) if sent else (None, [])
            asked = [job for job in waiting if job.stopping is not None]
            self.settler.give_back([job for job in waiting if job.stopping is None] + held)
            if running is None and child.killed is None and child.stopping and status == 0:
                continue  # asked to leave, and left
            cause = death_cause(status, self.oom, killed=child.killed)
            level = 20 if child.stopping else 30
            job_id = running.job.id if running else None
            self.log.log(level, "child exited", child_pid=pid, cause=cause, job_id=job_id)
            if running is not None:
                for job in (running, *asked):
                    self.settler.child_died(job, cause)
            on_purpose = child.killed is not None and child.killed.reason in DELIBERATE_KILLS
            if not on_purpose:
                self.metrics.child_crashed(cause)
            if child.jobs_done == 0 and not (child.stopping or on_purpose):
                self.note_fruitless_death()

    def note_fruitless_death(self) -> None:
        """A child died without finishing a job: too many of those make spawning back off."""
        now = self.clock()
        delay = self.spawning.child_failed(now)
        if delay:
            self.timers.spawn_after = now + delay
            self.log.error(
                "host unhealthy: children keep dying; spawning backs off",
                backoff_seconds=delay,
                deaths=len(self.spawning.deaths),
                window_seconds=self.spawning.window_seconds,
            )

    def keep_children(self) -> None:
        """Keep a fork server and one child per slot (no children while draining, none during a
        spawn back-off). A fork server that died is replaced without waiting for it: it imports
        the child code for seconds, while running children must still be heard (a child silent
        for `stall_seconds` is killed as hung, and the loop that times it must not sleep)."""
        now = self.clock()
        if self.drain.active or now < self.timers.spawn_after:
            return
        alive = [c for c in self.pool.children.values() if not (c.stopping or c.closed)]
        try:
            if self.pool.restart_fork_server():
                self.log.info("fork server started", pid=self.pool.fork_server_pid)
            if self.pool.fork_server is None:
                return  # still starting: its socket wakes the loop
            for _ in range(self.sizing.slots - len(alive)):
                self.pool.spawn(now)
        except ForkServerError as error:
            self.timers.spawn_after = now + self.spawn_failed(now, error)
            return
        if self.spawning.forked():
            self.fork_error = None
            self.log.info("host healthy again: children spawn")

    def spawn_failed(self, now: float, error: ForkServerError) -> float:
        """A fork was refused or the fork server is gone: end it, back off; the delay."""
        if not isinstance(error, ForkRefused):
            self.pool.kill_fork_server()  # gone or hung: a new one is started on the next try
        delay = self.spawning.fork_failed()
        self.fork_error = f"cannot spawn a child: {error}"
        self.log.error(
            "host unhealthy: cannot spawn a child; spawning backs off",
            error=str(error),
            backoff_seconds=round(delay, 2),
            failures=self.spawning.fork_failures,
        )
        return delay

    def kill_stalled(self) -> None:
        """Kill children that did not stop when asked, children hung on their job, and new
        children that never said hello.

        A child is judged on what it said by now, not on what the host has read: what waits in
        the sockets is read first, since the loop itself may have been held up (reconnecting
        to a database that restarted took it 3 s in the soak, and a child whose progress sat
        unread was killed as hung)."""
        self.read_waiting()
        now = self.clock()
        for child in self.pool.silent_since_spawn(now - self.settings.stall_seconds):
            self.pool.kill(child, "hung", f"no hello within {self.settings.stall_seconds:g} s")
        for running in self.inflight.running():
            if not self.inflight.is_first(running):
                continue  # waiting behind its child's job: its clock starts when that one ends
            if running.stopping is not None and running.stopping_since is not None:
                if now - running.stopping_since > CANCEL_GRACE_SECONDS:
                    self.pool.kill(running.child, running.stopping)
            elif self.lease.stalled(running, now):
                stall = f"no progress for {self.settings.stall_seconds:g} s"
                self.pool.kill(running.child, "hung", stall)

    def check_memory(self) -> None:
        """Kill children over the hard limit; recycle those over the soft one after their job."""
        now = self.clock()
        if now < self.timers.memory_check_at:
            return
        self.timers.memory_check_at = now + MEMORY_CHECK_SECONDS
        children = list(self.pool.children.values())
        held = self.memory.measure([child.pid for child in children], now)
        for child in children:
            memory = held[child.pid]
            if memory > self.settings.hard_rss_bytes:
                self.pool.kill(child, "memory limit")
            elif memory > self.settings.soft_rss_bytes and not child.stopping:
                self.log.info(
                    "child over the soft memory limit; recycling after its job",
                    child_pid=child.pid,
                    pss=memory,
                )
                child.stopping = True
                self.give_back(child)
                if not child.jobs:
                    self.pool.send(child, Stop())

    def give_back_overdue(self) -> None:
        """Jobs held or sent behind a job that turned out long go back to the queue for other
        hosts: those held at once, those sent once their child drops them (it answers
        `Cancelled` for a job it has not started; one it started ends as it would have)."""
        now = self.clock()
        if overdue := self.ahead.overdue(self.inflight, now):
            for held in overdue:
                held.log.info(GIVING_BACK)
            self.settler.give_back(overdue)
        for waiting in self.ahead.sent_behind_long_jobs(self.inflight, now):
            if self.inflight.stopping(waiting, "released", now):
                waiting.log.info(GIVING_BACK)
                self.pool.send(waiting.child, Cancel(waiting.job.id))

    def give_back(self, child: Child) -> None:
        """Release the jobs held for a child that will not run them."""
        self.settler.give_back(self.inflight.take_held(child))

    # -- the database -----------------------------------------------------------------------

    def with_database(self, step: Callable[[], None]) -> None:
        """Run a step that talks to the database; when it is away, back off and keep going."""
        now = self.clock()
        if not self.database.ready(now):
            return
        try:
            step()
        except DatabaseUnavailable as error:
            delay = self.database.failed(now)
            self.database_error = str(error)
            self.publish_state()
            self.log.warning(
                "host unhealthy: waiting for the database",
                error=str(error),
                retry_in=round(delay, 2),
                failures=self.database.failures,
            )

    def database_answered(self, _conn: Connection) -> None:
        """A transaction committed: the database is there (an engine `commit` event)."""
        self.transactions += 1
        self.database_error = None
        if self.database.succeeded():
            self.log.info("database reachable again")

    def count_statement(self, *_execution: object) -> None:
        """A statement goes to the database (an engine `before_cursor_execute` event)."""
        self.statements += 1

    def check_cancels(self) -> None:
        """Stop the jobs whose build was cancelled (read every few seconds, at once on NOTIFY)."""
        now = self.clock()
        if now < self.timers.cancel_check_at:
            return
        self.timers.cancel_check_at = now + self.settings.cancel_check_seconds
        held_or_running = self.inflight.job_ids()
        if not held_or_running:
            return
        with transaction(self.engine) as conn:
            wanted = queue.cancel_requested(conn, held_or_running)
        for job_id in wanted:
            if (running := self.inflight.running_job(job_id)) is not None:
                self.stop_job(running, "cancelled")
            elif (never_sent := self.inflight.take_held_job(job_id)) is not None:
                self.settler.cancel(never_sent)

    def stop_job(self, running: Running, why: StopReason) -> None:
        """Ask the child to stop the job (a cancel, or a lease lost); it is killed after a grace."""
        if self.inflight.stopping(running, why, self.clock()):
            running.log.info("stopping job", why=why)
            self.pool.send(running.child, Cancel(running.job.id))

    def expire_leases(self) -> None:
        """End jobs whose lease ran out where they may not be rescued (on any host)."""
        self.lease.expire(self.engine, self.clock())

    def renew_held(self) -> None:
        """Keep the leases of jobs not started yet alive; one another host took is dropped as
        lost (stopped in its child, when it was sent already)."""
        if lost := self.lease.renew_held(self.engine, self.clock()):
            self.settler.give_back(lost)
        for waiting in list(self.inflight.waiting()):
            if waiting.lost:
                self.stop_job(waiting, "lost")

    def claim_and_dispatch(self) -> None:
        """Record finished jobs and, when a claim is due, claim work for the children."""
        now = self.clock()
        timers = self.timers
        may_claim = not self.drain.active and now >= max(timers.poll_at, timers.claims_paused_until)
        children = self.pool.children.values()
        wanted = self.ahead.wanted(children, self.inflight, now) if may_claim else []
        if not wanted and not self.acks_due(now):
            return
        started = self.settler.complete_and_claim(wanted)
        for running in started:
            self.inflight.hold(running)
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
        quiet = not self.inflight.is_running or self.drain.active
        return quiet or now - since >= ACK_DELAY_SECONDS

    def next_poll_delay(self, now: float) -> float:
        """The cadence's delay, or sooner when a queued job (a retry's backoff) comes due first.

        A NOTIFY wakes the host for new work, but a retry becoming due sends none.
        """
        delay = self.settings.cadence.next_poll_delay(self.last_work_at, now, self.rand.random)
        with transaction(self.engine) as conn:
            due = queue.seconds_until_next_due(conn)
        return min(delay, due) if due is not None else delay

    def dispatch_all(self) -> None:
        """Send each free child the next job held for it."""
        for child in list(self.pool.children.values()):
            self.dispatch(child)

    def dispatch(self, child: Child) -> None:
        """Send a child the jobs held for it while it has room: those beyond the one it runs
        wait in its socket, so that it starts each the moment it ends the one before, whatever
        this loop is doing. Only small frames are sent to a busy child (`SEND_AHEAD_FRAME_BYTES`)."""
        frames = b""
        now = self.clock()
        while child.ready and (running := self.inflight.next_held(child)) is not None:
            job = running.job
            try:
                frame = encode(Run(job.id, job.kind, job.attempt, running.payload))
            except FrameTooLarge as error:  # it would never fit: no retry can help
                self.inflight.take_held_job(job.id)
                why = (
                    f"cannot hand the job to a child: its data of {error.size / 2**20:.1f} MiB "
                    f"exceeds the {MAX_FRAME_BYTES // 2**20} MiB frame limit"
                )
                self.settler.refuse(running, why)
                continue
            if child.jobs and len(frame) > SEND_AHEAD_FRAME_BYTES:
                break  # sent once the child is free
            self.inflight.start_next(child, now)
            frames += frame
            running.log.debug("job started")
        if frames:
            self.pool.send_frame(child, frames)

    # -- waiting and messages ---------------------------------------------------------------

    def wait(self) -> None:
        """Sleep until a child speaks, a NOTIFY or signal arrives, or the next duty is due."""
        now = self.clock()
        timers = self.timers
        deadlines = [timers.cancel_check_at, timers.memory_check_at, now + LONGEST_WAIT_SECONDS]
        if any(child.idle for child in self.pool.children.values()):
            # A poll only matters with a child to give work, and not before claims may resume:
            # a poll due while they are paused would wake the loop at once, again and again.
            deadlines.append(max(timers.poll_at, timers.claims_paused_until))
        if self.drain.until is not None:
            deadlines.append(self.drain.until)
        if self.settler.completions_since is not None:
            deadlines.append(self.settler.completions_since + ACK_DELAY_SECONDS)
        timeout = max(0.0, min(deadlines) - now)
        sources: list[Any] = [self.signals, *self.pool.children.values()]
        starting = self.pool.starting
        if starting is not None and not self.drain.active and now >= timers.spawn_after:
            sources.append(starting)  # readable once it is ready or died: `keep_children` looks
        listen_fd = self.listener.fileno() if self.listener else None
        if listen_fd is not None:
            sources.append(listen_fd)
        readable, _, _ = select.select(sources, [], [], timeout)
        for source in readable:
            if source is self.signals:
                self.signals.clear_wakeups()
            elif isinstance(source, Child):
                self.service(source)
            elif source is starting:
                continue
            elif self.listener is not None:
                self.heard(self.listener.drain())
        if self.listener is not None and self.listener.keep(self.clock()):
            timers.poll_at = 0.0  # we may have missed a NOTIFY meanwhile

    def read_waiting(self) -> None:
        """Serve every child with something in its socket, without waiting."""
        children = list(self.pool.children.values())
        if children:
            readable, _, _ = select.select(children, [], [], 0)
            for child in readable:
                self.service(child)

    def heard(self, payloads: list[str]) -> None:
        """A NOTIFY: new work claims at once, a cancel is checked at once."""
        if "job" in payloads:
            self.timers.poll_at = 0.0
        if "cancel" in payloads:
            self.timers.cancel_check_at = 0.0

    def service(self, child: Child) -> None:
        """Read what a child sent; a message about a job it does not run is a protocol error."""
        for message in self.pool.receive(child):
            if isinstance(message, Hello):
                self.hello(child, message)
                continue
            running = self.inflight.running_job(getattr(message, "job_id", -1))
            if running is None or running.child is not child:
                detail = f"{message.type} for a job it does not run"
                self.pool.kill(child, "protocol error", detail)
                return
            self.on_job_message(running, message)

    def hello(self, child: Child, hello: Hello) -> None:
        """A new child is ready, if it speaks our protocol; a free slot, so a claim is due."""
        if hello.version != PROTOCOL_VERSION:
            self.pool.kill(child, "protocol error", _version_mismatch(hello))
            return
        child.hello = hello
        self.log.debug("child ready", child_pid=child.pid)
        self.timers.poll_at = min(self.timers.poll_at, self.clock())

    def on_job_message(self, running: Running, message: ToParent) -> None:
        """What the child said about its job: accepted, progress, or how it ended."""
        now = self.clock()
        if isinstance(message, Accepted):
            self.inflight.accepted(running, now)  # the claim set a full lease: nothing to renew
            running.log.debug("job accepted")
        elif isinstance(message, Progress):
            self.inflight.progressed(running, now)
            if self.lease.renewal_due(running, now):
                self.with_database(lambda: self.lease.renew(self.engine, running, now))
            if running.lost:
                self.stop_job(running, "lost")
        elif isinstance(message, Done | Failed | Cancelled):
            self.finish(running, message, now)
        elif isinstance(message, Unable):
            self.unable(running, message, now)

    def finish(self, running: Running, message: Done | Failed | Cancelled, now: float) -> None:
        """The child ended its job: settle it, then recycle the child or give it the next job."""
        child = running.child
        self.inflight.finished(running, now)
        self.spawning.child_succeeded()
        self.ahead.job_took(now - running.started_at)
        self.settler.ended(running, message)
        if child.jobs_done >= child.max_jobs and not child.stopping:
            self.log.info("recycling child", child_pid=child.pid, jobs_done=child.jobs_done)
            child.stopping = True
        if child.stopping or self.drain.active:
            self.give_back(child)
            if not child.jobs:  # one sent ahead is still in flight: it ends first
                self.pool.stop(child, Stop())
        else:
            self.dispatch(child)
        self.timers.poll_at = min(self.timers.poll_at, now)

    def unable(self, running: Running, message: Unable, now: float) -> None:
        """The child ran out of threads, memory or disk: the host's trouble, not the job's.

        The job goes back without spending an attempt, due after a pause, and this host claims
        nothing for that pause, so that it does not churn through the queue meanwhile; the
        child stays, for the trouble is usually its surroundings' (a pids limit, a full disk).
        """
        self.inflight.finished(running, now)
        self.log.error(
            "host unhealthy: a child lacks resources; giving its job back",
            job_id=running.job.id,
            child_pid=running.child.pid,
            reason=message.reason,
            pause_seconds=RESOURCE_PAUSE_SECONDS,
        )
        self.settler.release(running, RESOURCE_PAUSE_SECONDS)
        self.give_back(running.child)
        self.timers.claims_paused_until = now + RESOURCE_PAUSE_SECONDS

    # -- the end ----------------------------------------------------------------------------

    def check_done(self) -> None:
        """Leave when draining is over, or (with --drain) when the queue has nothing left."""
        if self.drain.active:
            if not self.inflight.is_running and not self.settler.busy:
                self.stopped = True
            elif self.drain.over(self.clock()):
                self.release_all()
                self.stopped = True
                if self.settler.busy:
                    self.log.warning(
                        "leaving with settlements unrecorded; the database is away and their "
                        "leases will expire",
                        unrecorded=self.settler.unrecorded,
                    )
            return
        idle = not (self.inflight.is_running or self.inflight.is_holding or self.settler.busy)
        if self.settings.exit_when_idle and self.found_nothing and idle:
            self.found_nothing = False
            try:
                with transaction(self.engine) as conn:
                    empty = queue.open_job_count(conn) == 0
            except DatabaseUnavailable:
                return
            if empty:
                self.log.info("queue is empty; leaving")
                self.begin_drain("--drain")

    def release_all(self) -> None:
        """Give back every running job without spending an attempt, and kill its child."""
        for running in self.inflight.release_running():
            self.pool.kill(running.child, "released")
            self.settler.release(running)

    def shutdown(self) -> None:
        """Let idle children leave, kill any left, and remove their scratch."""
        self.pool.stop_fork_server()
        for child in list(self.pool.children.values()):
            self.pool.stop(child, Stop())
        reaped = self.pool.wait_all(3.0)
        self.pool.kill_all("host stopping")
        reaped += self.pool.wait_all(3.0)
        for _child, pid, _status in reaped:
            scratch.remove_child_scratch(self.scratch, pid)
        if self.listener is not None:
            self.listener.close()
        self.engine.dispose()
        self.stop_serving()
        self.log.info("host stopped", statements=self.statements, transactions=self.transactions)


def _version_mismatch(hello: Hello) -> str:
    return f"the child speaks protocol version {hello.version}, this host {PROTOCOL_VERSION}"


def run_host(
    settings: HostSettings,
    metrics: HostMetrics | None = None,
    server: MetricsServer | None = None,
) -> int:
    """`python -m supervisor run` with these settings; the exit status."""
    return Host(settings, metrics=metrics, server=server).run()
