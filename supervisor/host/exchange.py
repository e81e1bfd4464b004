"""What passes between the host and its children about jobs: each job sent, each message heard.

A child is sent the jobs held for it while it has room (`dispatch`), so one of short jobs goes
on while the loop is busy elsewhere; what it says back (hello, accepted, progress, the end of a
job, or that it lacks resources) is read in one place (`service`), and a message about a job it
does not run is a protocol error that kills it. A job stops by a `Cancel` the child answers;
the kill after a grace is the children's keeper's (`supervisor.host.children`). A job whose kind
announces browser work (a Storybook plan) has the idle children start their browsers meanwhile
(`Warm`, once per child and build).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine
from structlog.stdlib import BoundLogger

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
    Warm,
)
from supervisor.host.claim_ahead import ClaimAhead
from supervisor.host.drain import Drain
from supervisor.host.health import SpawnBackoff
from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.pool import SEND_AHEAD_FRAME_BYTES, Child, Pool
from supervisor.host.running import Running, StopReason
from supervisor.host.settle import Settler
from supervisor.host.timers import Timers

#: How long a job its child could not run for want of resources waits, and the host claims
#: nothing.
RESOURCE_PAUSE_SECONDS = 2.0

#: Runs a step that talks to the database, backing off while it is away (`Host.with_database`).
DatabaseStep = Callable[[Callable[[], None]], None]


class Exchange:
    """The jobs sent to this host's children, and what the host does with each message heard."""

    def __init__(
        self,
        pool: Pool,
        inflight: InFlight,
        settler: Settler,
        lease: LeaseKeeper,
        ahead: ClaimAhead,
        spawning: SpawnBackoff,
        drain: Drain,
        timers: Timers,
        engine: Engine,
        with_database: DatabaseStep,
        log: BoundLogger,
        clock: Callable[[], float],
    ) -> None:
        self.pool = pool
        self.inflight = inflight
        self.settler = settler
        self.lease = lease
        self.ahead = ahead
        self.spawning = spawning
        self.drain = drain
        self.timers = timers
        self.engine = engine
        self.with_database = with_database
        self.log = log
        self.clock = clock

    # -- sending ----------------------------------------------------------------------------

    def dispatch_all(self) -> None:
        """Send each free child the next job held for it."""
        for child in list(self.pool.children.values()):
            self.dispatch(child)

    def dispatch(self, child: Child) -> None:
        """Send a child the jobs held for it while it has room: those beyond the one it runs
        wait in its socket, so that it starts each the moment it ends the one before, whatever
        this loop is doing. Only small frames are sent to a busy child (`SEND_AHEAD_FRAME_BYTES`)."""
        frames = b""
        warming: Running | None = None
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
            warming = running if self.warms(running) else warming
        if frames:
            self.pool.send_frame(child, frames)
        if warming is not None:
            self.warm_idle(warming)

    def warms(self, running: Running) -> bool:
        """Whether the job's kind has idle children start their browsers while it runs."""
        kind = self.settler.kinds.get(running.job.kind)
        return kind is not None and kind.warms_idle_children

    def warm_idle(self, running: Running) -> None:
        """Tell each idle child to start its browser and open the page of `running`'s build now
        (its payload names the build, as a plan's does), once per build."""
        build = running.payload
        for child in list(self.pool.children.values()):
            if child.idle and child.warmed_for != build and self.pool.send(child, Warm(build)):
                child.warmed_for = build
                self.log.debug("warming child", child_pid=child.pid)

    def stop_job(self, running: Running, why: StopReason) -> None:
        """Ask the child to stop the job (a cancel, or a lease lost); it is killed after a grace."""
        if self.inflight.stopping(running, why, self.clock()):
            running.log.info("stopping job", why=why)
            self.pool.send(running.child, Cancel(running.job.id))

    def give_back(self, child: Child) -> None:
        """Release the jobs held for a child that will not run them."""
        self.settler.give_back(self.inflight.take_held(child))

    # -- hearing ----------------------------------------------------------------------------

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
            self.pool.kill(child, "protocol error", version_mismatch(hello))
            return
        child.hello = hello
        self.log.debug("child ready", child_pid=child.pid)
        warming = next((r for r in self.inflight.running() if self.warms(r)), None)
        if warming is not None:
            self.warm_idle(warming)  # a child ready just after the plan went out
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


def version_mismatch(hello: Hello) -> str:
    """Why a child of another release cannot work for this host."""
    return f"the child speaks protocol version {hello.version}, this host {PROTOCOL_VERSION}"
