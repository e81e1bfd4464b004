"""The children through their lives: one kept per slot, each death read once, the hung and the
bloated killed.

Spawning backs off when forks fail or children keep dying before they finish a job, so a host
whose children cannot live does not fork in a tight loop. A death is read in one place
(`reap`): what the child sent before dying counts, then its cause (`supervisor.host.deaths`),
then what it means for its jobs (`supervisor.host.settle`) and for the host. Kills are decided
here on what each child said by now: hung (silent for `stall_seconds`), slow to stop when asked,
or over the memory limits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from structlog.stdlib import BoundLogger

from ipc.forkserver import ForkRefused, ForkServerError
from ipc.messages import Stop
from supervisor.host import scratch
from supervisor.host.deaths import DELIBERATE_KILLS, OomCounter, death_cause
from supervisor.host.drain import Drain
from supervisor.host.exchange import Exchange
from supervisor.host.health import SpawnBackoff
from supervisor.host.inflight import InFlight
from supervisor.host.lease import LeaseKeeper
from supervisor.host.memory import TreeMemory
from supervisor.host.pool import Pool
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from supervisor.host.sizing import Sizing
from supervisor.host.timers import Timers
from supervisor.metrics.registry import HostMetrics

#: How long a cancelled or lost job's child may take to stop before it is killed.
CANCEL_GRACE_SECONDS = 2.0
#: How often children's memory is read.
MEMORY_CHECK_SECONDS = 1.0


def spawn_failed(
    pool: Pool, spawning: SpawnBackoff, error: ForkServerError, log: BoundLogger
) -> float:
    """A fork was refused or the fork server is gone: end it, back off; the delay."""
    if not isinstance(error, ForkRefused):
        pool.kill_fork_server()  # gone or hung: a new one is started on the next try
    delay = spawning.fork_failed()
    spawning.fork_error = f"cannot spawn a child: {error}"
    log.error(
        "host unhealthy: cannot spawn a child; spawning backs off",
        error=str(error),
        backoff_seconds=round(delay, 2),
        failures=spawning.fork_failures,
    )
    return delay


class Children:
    """The children of a running host, kept, reaped and killed by the loop's thread."""

    def __init__(
        self,
        settings: HostSettings,
        sizing: Sizing,
        pool: Pool,
        exchange: Exchange,
        inflight: InFlight,
        lease: LeaseKeeper,
        settler: Settler,
        spawning: SpawnBackoff,
        drain: Drain,
        timers: Timers,
        scratch_roots: tuple[Path, ...],
        metrics: HostMetrics,
        log: BoundLogger,
        clock: Callable[[], float],
    ) -> None:
        self.settings = settings
        self.sizing = sizing
        self.pool = pool
        self.exchange = exchange
        self.inflight = inflight
        self.lease = lease
        self.settler = settler
        self.spawning = spawning
        self.drain = drain
        self.timers = timers
        self.scratch_roots = scratch_roots
        self.metrics = metrics
        self.log = log
        self.clock = clock
        self.oom = OomCounter()
        self.memory = TreeMemory()

    def keep(self) -> None:
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
            self.timers.spawn_after = now + spawn_failed(self.pool, self.spawning, error, self.log)
            return
        if self.spawning.forked():
            self.spawning.fork_error = None
            self.log.info("host healthy again: children spawn")

    def reap(self) -> None:
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
            self.exchange.service(child)
            self.pool.close(child)
            scratch.remove_child_scratch(self.scratch_roots, pid)
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

    def kill_stalled(self) -> None:
        """Kill children that did not stop when asked, children hung on their job, and new
        children that never said hello.

        A child is judged on what it said by now, not on what the host has read: the loop reads
        what waits in the sockets first (`Waiting.read_ready`), since it may itself have been
        held up (reconnecting to a database that restarted took it 3 s in the soak, and a child
        whose progress sat unread was killed as hung)."""
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
                self.exchange.give_back(child)
                if not child.jobs:
                    self.pool.send(child, Stop())
