"""`python -m supervisor run`: the capture host's main loop.

The loop reads like an arbiter's (`run`): each turn handles queued signals, reaps the dead,
kills the hung and the bloated, gives back what waits behind long jobs, checks for cancels,
ends expired leases, renews what is held, keeps a child per slot, records finished jobs and
claims work, then waits for the next thing to happen (a child's message, a NOTIFY, a signal, a
child's death, a deadline). Everything runs on this one thread; signal handlers only queue.

Each duty is decided in the module named for it: the start (`startup`), the children's lives
(`children`), what is sent to them and heard back (`exchange`), the wait (`waiting`), which
jobs are held and running (`inflight`), how many to claim ahead (`claim_ahead`), leases
(`lease`), how a job ends (`settle`), which process runs it (`pool`), why a child died
(`deaths`), back-offs (`health`), the drain (`drain`), wake-ups (`signals`, `wakeup`). Here are
the turn and the few verbs that are the loop's own: signals and the drain, cancels, leases and
claims as the database allows, and the end. The clock and the randomness are passed in, so
those decisions are tested with a fake clock.
"""

from __future__ import annotations

import os
import random
import socket
import time
from collections.abc import Callable
from dataclasses import replace

import structlog
from sqlalchemy import Connection, Engine, event

from ipc.artifacts import location
from ipc.artifacts.location import open_store
from ipc.forkserver import ForkServerError
from ipc.messages import Cancel, Stop
from supervisor.builds.kinds import Kind
from supervisor.builds.registry import registered_kinds
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, is_postgres, transaction
from supervisor.host import chromium, scratch
from supervisor.host.children import Children
from supervisor.host.claim_ahead import ClaimAhead
from supervisor.host.drain import Drain
from supervisor.host.exchange import Exchange
from supervisor.host.health import DatabaseBackoff, SpawnBackoff
from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.pool import Pool
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from supervisor.host.signals import Signals
from supervisor.host.sizing import size_host
from supervisor.host.startup import FirstChild, engine_problem, refuse, store_problem
from supervisor.host.timers import ACK_DELAY_SECONDS, Timers
from supervisor.host.waiting import Waiting
from supervisor.host.wakeup import Listener
from supervisor.metrics.health import judge
from supervisor.metrics.queue_depth import QueueDepth
from supervisor.metrics.registry import HostMetrics
from supervisor.metrics.server import MetricsServer

log = structlog.get_logger(__name__)

#: Logged for each job given back from behind a job that turned out long.
GIVING_BACK = "giving back a job claimed ahead: its child is busy with a long one"


def new_host_id(rand: random.Random) -> str:
    """`host:pid:random`: unique per process, readable in `status` and the logs."""
    return f"{socket.gethostname()}:{os.getpid()}:{rand.randrange(16**4):04x}"


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
        self.stopped = False
        #: What `/healthz` is decided from, besides the back-offs (and why the last spawn
        #: failed, `spawning.fork_error`): whether the first child's image engine passed, why
        #: the database last failed (None once a commit went through), and what started the
        #: drain.
        self.engine_checked = False
        self.database_error: str | None = None
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
        self.exchange: Exchange
        self.children: Children
        self.waiting: Waiting
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
            self.children.reap()
            self.waiting.read_ready()  # a child is judged on what it said by now
            self.children.kill_stalled()
            self.children.check_memory()
            self.give_back_overdue()
            self.with_database(self.check_cancels)
            self.with_database(self.expire_leases)
            self.with_database(self.renew_held)
            self.children.keep()
            self.with_database(self.claim_and_dispatch)
            self.with_database(self.settler.retry_pending)
            self.check_done()
            self.waiting.wait()
        self.shutdown()
        return 0

    def start(self) -> int:
        """Fork the fork server, check the image engine in a first child, then connect.

        0 when the host may claim (or was told to stop while it started: `stopped` is set).
        """
        # First: a SIGTERM while the fork server starts must drain the host, not kill it.
        self.signals.queue_stops()
        self.signals.dump_stacks_on_request()
        scratch.sweep(self.scratch, self.log)
        chromium.export(self.settings.chromium, self.log)
        location.export_cache(self.settings.cache_dir, self.settings.cache_mib)
        self.pool = Pool(
            None, self.sizing.threads_per_child, self.settings.max_jobs_per_child, self.rand
        )
        try:
            first = FirstChild(self.pool, self.spawning, self.signals, self.clock, self.log).ready()
        except ForkServerError as error:
            return refuse(f"the image engine cannot load: {error}", self.log)
        if first is None:
            self.stopped = True
            return 0
        if self.server is not None:
            self.server.start()  # the fork server runs: a thread may exist now
        self.signals.wake_on_signals()
        self.log.info("host starting", reason=self.sizing.reason, slots=self.sizing.slots)
        problem = engine_problem(first, self.log) or store_problem(self.store, self.log)
        if problem is not None:
            self.pool.kill_all("cannot work")
            self.pool.wait_all(5.0)
            self.pool.stop_fork_server()
            return refuse(problem, self.log)
        self.engine_checked = True
        self.open_database()
        self.publish_state()
        return 0

    def open_database(self) -> None:
        """The database, once the children are known to work, and the parts that need it."""
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
        self.exchange = Exchange(
            self.pool, self.inflight, self.settler, self.lease, self.ahead, self.spawning,
            self.drain, self.timers, self.engine, self.with_database, self.log, self.clock,
        )  # fmt: skip
        self.children = Children(
            self.settings, self.sizing, self.pool, self.exchange, self.inflight, self.lease,
            self.settler, self.spawning, self.drain, self.timers, self.scratch, self.metrics,
            self.log, self.clock,
        )  # fmt: skip
        self.waiting = Waiting(
            self.pool, self.exchange, self.settler, self.signals, self.listener, self.drain,
            self.timers, self.clock,
        )  # fmt: skip

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
                fork_error=self.spawning.fork_error if backing_off else None,
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
                self.exchange.stop_job(running, "cancelled")
            elif (never_sent := self.inflight.take_held_job(job_id)) is not None:
                self.settler.cancel(never_sent)

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
                self.exchange.stop_job(waiting, "lost")

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
        self.exchange.dispatch_all()
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


def run_host(
    settings: HostSettings,
    metrics: HostMetrics | None = None,
    server: MetricsServer | None = None,
) -> int:
    """`python -m supervisor run` with these settings; the exit status."""
    return Host(settings, metrics=metrics, server=server).run()
