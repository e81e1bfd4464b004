"""Children and jobs made in memory for the host's unit tests: no processes, no database."""

from __future__ import annotations

import itertools
import socket
from collections.abc import Callable, Iterator

import structlog

from ipc.messages import PROTOCOL_VERSION, Hello
from supervisor.builds.kinds import Kind
from supervisor.db.queue import Job
from supervisor.host.pool import Child
from supervisor.host.running import Running

MakeChild = Callable[..., Child]
_ids = itertools.count(1)


def make_child_fixture() -> Iterator[MakeChild]:
    sockets: list[socket.socket] = []

    def make(max_jobs: int = 500, jobs_done: int = 0) -> Child:
        ours, theirs = socket.socketpair()
        sockets.extend((ours, theirs))
        child = Child(pid=next(_ids), sock=ours, spawned_at=0.0, max_jobs=max_jobs)
        child.jobs_done = jobs_done
        child.hello = Hello(PROTOCOL_VERSION, child.pid, "libvips")  # ready for work
        return child

    yield make
    for sock in sockets:
        sock.close()


def claimed_for(child: Child, started_at: float = 0.0) -> Running:
    job_id = next(_ids)
    job = Job(
        id=job_id, kind="noop", status="running", data={}, attempt=1, max_attempts=5,
        crash_causes=(), build_id=None, shard_id=None, locked_by="host",
        lease_expires_at=None, cancel_requested=False, error=None,
    )  # fmt: skip
    kind = Kind("noop", accepts=lambda _data: True)
    log = structlog.get_logger().bind(job_id=job_id)
    return Running(job, kind, child, {}, log, started_at, started_at, started_at)
