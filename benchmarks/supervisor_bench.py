"""Benchmark of the capture host (`python -m supervisor run`) end to end, beside pgqueuer.

Run `python benchmarks/supervisor_bench.py [--jobs N] [--runs R]`. It starts a throwaway
PostgreSQL (`tests.postgres_server`, fsync off) and a SQLite file in a temporary folder, and
removes both at the end. Hosts are real subprocesses started as `tests.hosts` starts them,
logging JSON at debug level; every time of a host below comes from the timestamps of its log (wall clock,
UTC, microseconds), so they compare with `time.time()` stamps taken in this process.

What is measured:

1. No-op throughput through the children. N `noop` jobs are queued in bulk (not timed), then
   `python -m supervisor run --drain --concurrency 2 --log-level info` starts (info is the
   production level: one line per job). Jobs per second is N divided by the time from the first
   job's start (its `job finished` stamp less the `seconds` it took) to the last `job finished`
   (outcome completed) of its log: start-up and the exit after the drain are not counted. Beside
   the rate: the statements the host sent per job (its own count, `statements` of its `host
   stopped` event, start-up and the drain's end included) and the parent's RSS once its image
   engine loaded and just before it exits (psutil, sampled every 0.2 s). Children are recycled after their
   default `max_jobs_per_child` (500, jittered), as in production. Beside it, on the same
   database in the same run:
   (a) the queue alone: 2 processes each loop claim (batch 1) + ack, one transaction each, with
       no children, no IPC and no logging (`queue_bench`'s worker pool). host / queue is the
       share of the queue's rate the host keeps: 1 would mean supervision costs nothing.
   (b) pgqueuer on the same PostgreSQL: two `QueueManager` processes (one per host child), each
       running an async no-op entrypoint in drain mode with pgqueuer's defaults (dequeue batch
       10, no concurrency limit; with an entrypoint `concurrency_limit=2` it ran at ~1 job/s
       here, so that is left out). Timed from the first job function's start to the last one's
       return: pgqueuer writes completions through a buffer (up to a batch later), and its
       `run()` takes a further 2-3 s to return in drain mode, which is not counted.
       host / pgqueuer above 1: the host moves more jobs per second.
2. Pickup latency of an idle host: a host runs (no --drain) and this process queues one `noop`
   job every ~50 ms, stamping `time.time()` just before the enqueue commits; the latency is up
   to the job's `job started` event (logged after the claim committed, just before `Run` goes
   to the child). PostgreSQL wakes the host with NOTIFY; SQLite polls,
   with `--poll-seconds 1.0` and with the default cadence (after a warm-up job, so inside the
   60 s active window: every 2 s plus 0-20 % jitter). "first job" is the warm-up job, queued
   1 s after start-up: on SQLite with the default cadence it waits for the 15 s idle poll.
   pgqueuer's latency is `queue_bench`'s (its QueueManager, stamped when the job function
   starts, against an enqueue stamped just before its commit, both `time.monotonic()`).
3. Crash recovery: on PostgreSQL a host with the test kinds (`STORYSHELF_PLUGINS=tests.kinds`)
   runs `crash` jobs that SIGKILL their child on the first attempt, each after 4 `noop` jobs
   (so no child dies without having completed a job, which would make spawning back off).
   From the log: `child exited` to the job's `job finished` (outcome retried), to the
   replacement's `child spawned` and to its first `job started`. Then spawn-to-hello, timed in
   a separate process that starts its own `ForkServer`: `spawn()` (fork request to pid and
   socket) and the first `Hello` read (the child's libvips self-check included).
4. Memory: a PostgreSQL host with `--max-jobs-per-child` above the job count (so the same two
   children run every job and a leak in them would show) is measured with psutil, RSS and USS,
   idle after start-up, after 5,000 and after 10,000 `noop` jobs.

The machine is shared and noisy: each cell of table 1 is the median of R runs, with the slowest
and fastest; read a ratio within ~10 % of 1 as a tie.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib.metadata import version
from multiprocessing import get_context
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
import psycopg  # noqa: E402
from pgqueuer import PsycopgDriver, Queries, QueueManager  # noqa: E402
from pgqueuer.models import Job as PgqJob  # noqa: E402
from pgqueuer.types import QueueExecutionMode  # noqa: E402
from sqlalchemy import Engine, func, insert, select, text  # noqa: E402

from benchmarks.queue_bench import (  # noqa: E402
    PGQ_LATENCY,
    Drain,
    WorkerPool,
    database,
    enqueue_pgqueuer,
    fill_pgqueuer,
    fmt_ms,
    fmt_rate,
    install_pgqueuer,
    latencies,
    listen_pgqueuer,
    print_table,
)
from ipc import logs  # noqa: E402
from ipc.framing import FrameReader, encode  # noqa: E402
from ipc.messages import TO_PARENT, Hello, Stop  # noqa: E402
from supervisor.db import queue  # noqa: E402
from supervisor.db.connection import connect, is_postgres, transaction  # noqa: E402
from supervisor.db.migrate import upgrade  # noqa: E402
from supervisor.db.tables import jobs  # noqa: E402
from supervisor.host.forkserver import ForkServer  # noqa: E402
from supervisor.host.wakeup import libpq_conninfo  # noqa: E402
from tests.hosts import HostProcess  # noqa: E402

CONCURRENCY = ("--concurrency", "2")
#: pgqueuer entrypoint of the end-to-end runs.
PGQ_NOOP = "bench_noop"
#: pgqueuer worker processes in the throughput runs, one per host child.
PGQ_PROCESSES = 2
#: Longest a draining host may take for one throughput run.
HOST_TIMEOUT_SECONDS = 600.0
#: Idle time given to a host after its image engine loaded (second child up, LISTEN issued).
SETTLE_SECONDS = 1.0
PICKUP_SAMPLES = 100
PICKUP_SPACING_SECONDS = 0.050
CRASHES = 20
NOOPS_PER_CRASH = 4
CRASH_DATA = {"signal": "SIGKILL", "crash_attempts": 1}
SPAWN_WARMUP = 3
SPAWN_SAMPLES = 50
MEMORY_JOBS = 10_000
MEMORY_STEPS = 2
MIB = 2**20


@dataclass(frozen=True)
class Database:
    name: str
    url: str
    engine: Engine


def timestamp(event: dict[str, Any]) -> float:
    """A log event's time, in `time.time()` seconds."""
    return datetime.fromisoformat(event["timestamp"]).timestamp()


def percentile(values: Sequence[float], p: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[p - 1]


def fill(db: Database, count: int) -> None:
    """Empty `jobs` and queue `count` noop jobs in one statement (no NOTIFY: hosts start after)."""
    with transaction(db.engine) as conn:
        conn.execute(text("TRUNCATE jobs" if is_postgres(conn) else "DELETE FROM jobs"))
        if count:
            conn.execute(insert(jobs), [{"kind": "noop", "data": {"seq": i}} for i in range(count)])
        if is_postgres(conn):
            conn.execute(text("ANALYZE jobs"))


def add_jobs(db: Database, kind: str, count: int, data: dict[str, Any]) -> int:
    """Queue `count` jobs for a running host: in bulk, and the last with `queue.enqueue` (NOTIFY)."""
    with transaction(db.engine) as conn:
        if count > 1:
            conn.execute(insert(jobs), [{"kind": kind, "data": data}] * (count - 1))
        return queue.enqueue(conn, kind, data)


def completed(db: Database) -> int:
    with transaction(db.engine) as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.status == "completed")
            ).scalar_one()
        )


T = TypeVar("T")


def wait_for(predicate: Callable[[], T | None], timeout: float, interval: float = 0.05) -> T:
    """Poll until `predicate` returns something other than None."""
    deadline = time.monotonic() + timeout
    while (value := predicate()) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {predicate}")
        time.sleep(interval)
    return value


def wait_until_completed(db: Database, count: int) -> None:
    wait_for(lambda: True if completed(db) >= count else None, HOST_TIMEOUT_SECONDS, 0.5)


def start_host(workdir: Path, db: Database, *options: str, plugins: str = "") -> HostProcess:
    """`python -m supervisor run --concurrency 2 ...` with its JSON log in `workdir`."""
    return HostProcess(db.url, workdir / "artifacts", *CONCURRENCY, *options, plugins=plugins)


# ---------------------------------------------------------------------------------------------
# 1. Throughput


@dataclass(frozen=True)
class HostRun:
    """One draining host: its rate, statements per job and the parent's RSS (bytes)."""

    rate: float
    statements_per_job: float
    rss_start: int
    rss_end: int


def wait_sampling_rss(host: HostProcess, timeout: float) -> tuple[int, list[int]]:
    """Wait for the host to exit; its exit status and its RSS every 0.2 s once its image
    engine loaded (the children and the fork server are not counted)."""
    deadline = time.monotonic() + timeout
    samples: list[int] = []
    process = psutil.Process(host.pid)
    while host.process.poll() is None:
        if time.monotonic() > deadline:
            host.process.kill()
            raise RuntimeError(f"host did not exit in {timeout} s\n{host.log_tail()}")
        if samples or host.events("image engine loaded"):
            try:
                samples.append(int(process.memory_info().rss))
            except psutil.NoSuchProcess:
                break
        time.sleep(0.2)
    return host.wait(), samples


def host_drain(workdir: Path, db: Database, count: int) -> HostRun:
    """A draining host's jobs per second, first job's start to last `job finished`."""
    fill(db, count)
    host = start_host(workdir, db, "--drain", "--log-level", "info")
    code, rss = wait_sampling_rss(host, HOST_TIMEOUT_SECONDS)
    events = host.events()
    finished = [e for e in events if e["event"] == "job finished" and e["outcome"] == "completed"]
    stopped = host.events("host stopped")
    if code != 0 or len(finished) != count or completed(db) != count or not stopped or not rss:
        raise RuntimeError(
            f"{db.name} host: exit {code}, {len(finished)} of {count} completed\n{host.log_tail()}"
        )
    began = min(timestamp(e) - e["seconds"] for e in finished)
    rate = count / (max(timestamp(e) for e in finished) - began)
    return HostRun(rate, stopped[0]["statements"] / count, rss[0], rss[-1])


def pgqueuer_drain_worker(conninfo: str, start: Event, outbox: Queue[Any]) -> None:
    outbox.put(asyncio.run(pgqueuer_drain(conninfo, start, outbox)))


async def pgqueuer_drain(
    conninfo: str, start: Event, outbox: Queue[Any]
) -> tuple[int, float | None, float]:
    """(jobs run, first job's start, last job's return) of one QueueManager in drain mode."""
    started: list[float] = []
    returned: list[float] = []
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        manager = QueueManager(Queries(PsycopgDriver(conn)))

        @manager.entrypoint(PGQ_NOOP)
        async def noop(job: PgqJob) -> None:
            started.append(time.monotonic())
            returned.append(time.monotonic())

        outbox.put("ready")
        await asyncio.to_thread(start.wait)
        await manager.run(mode=QueueExecutionMode.drain)
    return len(started), min(started, default=None), max(returned, default=0.0)


def pgqueuer_throughput(conninfo: str, count: int) -> float:
    """Jobs per second of `PGQ_PROCESSES` QueueManager processes with pgqueuer's defaults."""
    asyncio.run(fill_pgqueuer(conninfo, PGQ_NOOP, count))
    ctx = get_context("spawn")
    start = ctx.Event()
    outbox: Queue[Any] = ctx.Queue()
    workers = [
        ctx.Process(target=pgqueuer_drain_worker, args=(conninfo, start, outbox), daemon=True)
        for _ in range(PGQ_PROCESSES)
    ]
    for worker in workers:
        worker.start()
    try:
        for _ in workers:
            if outbox.get(timeout=120) != "ready":
                raise RuntimeError("a pgqueuer worker did not start")
        start.set()
        results: list[tuple[int, float | None, float]] = [
            outbox.get(timeout=HOST_TIMEOUT_SECONDS) for _ in workers
        ]
    finally:
        for worker in workers:
            worker.join(timeout=30)
    done = sum(n for n, _, _ in results)
    firsts = [first for _, first, _ in results if first is not None]
    if done != count or not firsts:
        raise RuntimeError(f"pgqueuer ran {done} jobs of {count}")
    return count / (max(end for _, _, end in results) - min(firsts))


@dataclass
class Throughput:
    """Jobs per second of each configuration, one value per run."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    hosts: list[HostRun] = field(default_factory=list)

    def add(self, label: str, rate: float) -> None:
        self.rates.setdefault(label, []).append(rate)
        print(f"  {label}: {fmt_rate(rate)}/s", file=sys.stderr, flush=True)

    def add_host(self, run: HostRun) -> None:
        self.hosts.append(run)
        self.add(HOST, run.rate)

    def median(self, label: str) -> float:
        return statistics.median(self.rates[label])


HOST = "host (children)"
QUEUE_ALONE = "queue alone, 2 procs"
PGQUEUER = "pgqueuer, 2 QueueManagers"


def measure_throughput(
    workdir: Path, pg: Database, sqlite: Database, count: int, runs: int
) -> dict[str, Throughput]:
    results = {pg.name: Throughput(), sqlite.name: Throughput()}
    conninfo = libpq_conninfo(pg.url)
    pools = {db.name: WorkerPool(db.url, 2) for db in (pg, sqlite)}
    try:
        for run in range(runs):
            print(f" run {run + 1}/{runs}", file=sys.stderr, flush=True)
            for db in (pg, sqlite):
                results[db.name].add_host(host_drain(workdir, db, count))
                fill(db, count)
                results[db.name].add(QUEUE_ALONE, pools[db.name].drain(Drain("ours", 1), 2, count))
            results[pg.name].add(PGQUEUER, pgqueuer_throughput(conninfo, count))
    finally:
        for pool in pools.values():
            pool.close()
    return results


def report_throughput(results: dict[str, Throughput], count: int, runs: int) -> None:
    rows = []
    for name, result in results.items():
        host = result.median(HOST)
        for label, rates in result.rates.items():
            median = statistics.median(rates)
            rows.append(
                [
                    f"{name}: {label}",
                    fmt_rate(median),
                    f"{fmt_rate(min(rates))}-{fmt_rate(max(rates))}",
                    "" if label == HOST else f"{host / median:.2f}",
                ]
            )
    print_table(
        f"1. No-op jobs/s end to end, first job started to last completed (host JSON log); "
        f"median of {runs} runs of {count} jobs, concurrency 2",
        ["configuration", "jobs/s", "spread (min-max)", "host / this"],
        rows,
    )
    print(
        "   host / queue alone: share of the bare queue's rate the host keeps (1 = supervision\n"
        "   is free). host / pgqueuer > 1: the host is faster. QM = pgqueuer QueueManager."
    )
    print_table(
        "   The host's statements per job (its own count, start-up and exit included) and the "
        "parent's RSS, MiB, medians",
        ["database", "statements / job", "RSS, engine loaded", "RSS, before exit"],
        [
            [
                name,
                f"{statistics.median(run.statements_per_job for run in result.hosts):.3f}",
                f"{statistics.median(run.rss_start for run in result.hosts) / MIB:.1f}",
                f"{statistics.median(run.rss_end for run in result.hosts) / MIB:.1f}",
            ]
            for name, result in results.items()
        ],
    )


# ---------------------------------------------------------------------------------------------
# 2. Pickup latency


@dataclass(frozen=True)
class Pickup:
    label: str
    samples: list[float]
    first: float | None


def enqueue_stamped(db: Database, seq: int) -> tuple[int, float]:
    """Queue a noop job; its id and `time.time()` just before the commit."""
    with transaction(db.engine) as conn:
        job_id = queue.enqueue(conn, "noop", {"seq": seq})
        stamped = time.time()
    return job_id, stamped


def started_at(host: HostProcess, job_ids: set[int]) -> dict[int, float] | None:
    """When each job's `job started` was logged, once all were."""
    found = {e["job_id"]: timestamp(e) for e in host.events("job started")}
    return found if job_ids <= found.keys() else None


def host_pickup(workdir: Path, db: Database, label: str, *options: str) -> Pickup:
    fill(db, 0)
    host = start_host(workdir, db, *options)
    try:
        host.wait_for_event("image engine loaded", timeout=60)
        time.sleep(SETTLE_SECONDS)
        first_id, first_at = enqueue_stamped(db, -1)
        first = wait_for(lambda: started_at(host, {first_id}), timeout=60)[first_id] - first_at
        host.wait_for_event("job finished", job_id=first_id)
        sent: dict[int, float] = {}
        next_at = time.monotonic()
        for seq in range(PICKUP_SAMPLES):
            time.sleep(max(0.0, next_at - time.monotonic()))
            job_id, stamped = enqueue_stamped(db, seq)
            sent[job_id] = stamped
            next_at += PICKUP_SPACING_SECONDS
        found = wait_for(lambda: started_at(host, set(sent)), timeout=60)
    finally:
        host.stop()
    return Pickup(label, [found[job_id] - at for job_id, at in sent.items()], first)


def measure_pickup(workdir: Path, pg: Database, sqlite: Database) -> list[Pickup]:
    pickups = [
        host_pickup(workdir, pg, "host, PostgreSQL, NOTIFY"),
        host_pickup(
            workdir, sqlite, "host, SQLite, poll --poll-seconds 1.0", "--poll-seconds", "1.0"
        ),
        host_pickup(workdir, sqlite, "host, SQLite, poll default cadence"),
    ]
    conninfo = libpq_conninfo(pg.url)
    asyncio.run(fill_pgqueuer(conninfo, PGQ_LATENCY, 0))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        theirs = latencies(
            listen_pgqueuer,
            conninfo,
            enqueue_pgqueuer(conn),
            samples=PICKUP_SAMPLES,
            spacing=PICKUP_SPACING_SECONDS,
        )
    pickups.append(Pickup("pgqueuer QueueManager, NOTIFY", theirs, None))
    return pickups


def report_pickup(pickups: list[Pickup]) -> None:
    rows = [
        [
            p.label,
            fmt_ms(percentile(p.samples, 50)),
            fmt_ms(percentile(p.samples, 90)),
            fmt_ms(percentile(p.samples, 99)),
            fmt_ms(max(p.samples)),
            "" if p.first is None else fmt_ms(p.first),
        ]
        for p in pickups
    ]
    print_table(
        f"2. Pickup latency of an idle host, enqueue commit to job started, ms "
        f"({PICKUP_SAMPLES} jobs ~{PICKUP_SPACING_SECONDS * 1000:.0f} ms apart)",
        ["", "p50", "p90", "p99", "max", "first job after start-up"],
        rows,
    )
    pg, theirs = pickups[0], pickups[-1]
    print(
        f"   host (PostgreSQL) / pgqueuer: p50 {percentile(pg.samples, 50) / percentile(theirs.samples, 50):.2f}, "
        f"p99 {percentile(pg.samples, 99) / percentile(theirs.samples, 99):.2f} (< 1: the host is sooner)"
    )


# ---------------------------------------------------------------------------------------------
# 3. Crash recovery and spawn-to-hello


@dataclass(frozen=True)
class Recovery:
    requeued: list[float]
    spawned: list[float]
    replacement_job: list[float]


def measure_recovery(workdir: Path, pg: Database) -> Recovery:
    """Crash jobs among noops; times from each `child exited` in the host's log."""
    fill(pg, 0)
    with transaction(pg.engine) as conn:
        for index in range(CRASHES):
            for seq in range(NOOPS_PER_CRASH):
                queue.enqueue(conn, "noop", {"seq": index * NOOPS_PER_CRASH + seq})
            queue.enqueue(conn, "crash", CRASH_DATA)
        for seq in range(2 * NOOPS_PER_CRASH):
            queue.enqueue(conn, "noop", {"seq": -seq})
    host = start_host(
        workdir, pg, "--drain", "--backoff-base-seconds", "0.1", plugins="tests.kinds"
    )
    code = host.wait(HOST_TIMEOUT_SECONDS)
    expected = CRASHES * (NOOPS_PER_CRASH + 1) + 2 * NOOPS_PER_CRASH
    if code != 0 or completed(pg) != expected:
        raise RuntimeError(f"crash host: exit {code}, {completed(pg)} of {expected} completed")
    events = host.events()
    requeued: list[float] = []
    spawned: list[float] = []
    replacement_job: list[float] = []
    claimed_pids: set[int] = set()
    for index, death in enumerate(events):
        if death["event"] != "child exited" or death.get("job_id") is None:
            continue
        after = events[index + 1 :]
        died = timestamp(death)
        retried = next(
            e
            for e in after
            if e["event"] == "job finished"
            and e["job_id"] == death["job_id"]
            and e["outcome"] == "retried"
        )
        requeued.append(timestamp(retried) - died)
        spawn = next(
            (
                e
                for e in after
                if e["event"] == "child spawned" and e["child_pid"] not in claimed_pids
            ),
            None,
        )
        if spawn is None:  # no replacement: the host was draining by then
            continue
        claimed_pids.add(spawn["child_pid"])
        spawned.append(timestamp(spawn) - died)
        first_job = next(
            (
                e
                for e in after
                if e["event"] == "job started" and e["child_pid"] == spawn["child_pid"]
            ),
            None,
        )
        if first_job is not None:  # the other child may have taken the last jobs
            replacement_job.append(timestamp(first_job) - died)
    # More is possible: a job given back because its child died before accepting it (the host's
    # fault, no attempt spent) crashes again on its next first attempt.
    if len(requeued) < CRASHES:
        raise RuntimeError(f"saw {len(requeued)} crashes of {CRASHES}")
    return Recovery(requeued, spawned, replacement_job)


def spawn_timer(count: int, outbox: Queue[list[tuple[float, float]]]) -> None:
    """In a process of its own (it becomes a subreaper): spawn children, read each one's Hello."""
    logs.configure("warning")  # keep the fork server's debug lines off the report
    server = ForkServer.start()
    samples: list[tuple[float, float]] = []
    for _ in range(count):
        began = time.perf_counter()
        pid, sock = server.spawn(1)
        forked = time.perf_counter()
        reader = FrameReader(TO_PARENT)
        messages: list[Any] = []
        while not messages:
            data = sock.recv(1 << 16)
            if not data:
                raise RuntimeError(f"child {pid} closed its socket before its hello")
            messages = list(reader.feed(data))
        said_hello = time.perf_counter()
        if not isinstance(messages[0], Hello):
            raise RuntimeError(f"child {pid} began with {messages[0]!r}")
        sock.sendall(encode(Stop()))
        os.waitpid(pid, 0)
        sock.close()
        samples.append((forked - began, said_hello - began))
    server.stop()
    os.waitpid(server.pid, 0)
    outbox.put(samples)


def measure_spawn() -> tuple[list[float], list[float]]:
    """Seconds of `ForkServer.spawn()` and of spawn-to-hello, warm-up excluded."""
    ctx = get_context("spawn")
    outbox: Queue[list[tuple[float, float]]] = ctx.Queue()
    process = ctx.Process(target=spawn_timer, args=(SPAWN_WARMUP + SPAWN_SAMPLES, outbox))
    process.start()
    samples = outbox.get(timeout=300)[SPAWN_WARMUP:]
    process.join(timeout=30)
    return [forked for forked, _ in samples], [hello for _, hello in samples]


def report_recovery(recovery: Recovery, spawn: list[float], hello: list[float]) -> None:
    def row(label: str, values: list[float]) -> list[str]:
        return [
            label,
            str(len(values)),
            fmt_ms(percentile(values, 50)),
            fmt_ms(percentile(values, 90)),
            fmt_ms(min(values)),
            fmt_ms(max(values)),
        ]

    print_table(
        "3. Crash recovery (PostgreSQL, concurrency 2, crash jobs SIGKILL their child once) "
        "and child start-up, ms",
        ["interval", "n", "p50", "p90", "min", "max"],
        [
            row("child exited -> job requeued (job finished, retried)", recovery.requeued),
            row("child exited -> replacement child spawned", recovery.spawned),
            row("child exited -> replacement's first job started", recovery.replacement_job),
            row("ForkServer.spawn() (fork request -> pid + socket)", spawn),
            row("ForkServer.spawn() -> Hello read (libvips self-check included)", hello),
        ],
    )


# ---------------------------------------------------------------------------------------------
# 4. Memory


@dataclass(frozen=True)
class Memory:
    rss: int
    uss: int


def memory_of(pid: int) -> Memory:
    info = psutil.Process(pid).memory_full_info()
    return Memory(int(info.rss), int(info.uss))


def measure_memory(workdir: Path, pg: Database) -> tuple[list[str], dict[str, list[Memory]]]:
    """Memory of the host, its fork server and its children at each step of `MEMORY_JOBS`."""
    fill(pg, 0)
    host = start_host(workdir, pg, "--max-jobs-per-child", str(2 * MEMORY_JOBS))
    steps: list[str] = []
    memory: dict[str, list[Memory]] = {}
    try:
        fork_server = host.wait_for_event("fork server ready", timeout=60)["pid"]
        host.wait_for_event("image engine loaded", timeout=60)

        def record(step: str) -> None:
            time.sleep(SETTLE_SECONDS)
            children = sorted(p.pid for p in psutil.Process(host.pid).children())
            workers = [pid for pid in children if pid != fork_server]
            named = {"parent": host.pid, "fork server": fork_server}
            named |= {f"child {i + 1} (pid {pid})": pid for i, pid in enumerate(workers)}
            steps.append(step)
            for name, pid in named.items():
                memory.setdefault(name, []).append(memory_of(pid))

        record("idle after start-up")
        per_step = MEMORY_JOBS // MEMORY_STEPS
        for step in range(1, MEMORY_STEPS + 1):
            add_jobs(pg, "noop", per_step, {})
            wait_until_completed(pg, step * per_step)
            record(f"after {step * per_step:,} jobs")
    finally:
        host.stop()
    return steps, memory


def report_memory(steps: list[str], memory: dict[str, list[Memory]]) -> None:
    def mib(value: int) -> str:
        return f"{value / MIB:.1f}"

    rows = []
    for name, values in memory.items():
        if len(values) != len(steps):
            rows.append([name, *["?"] * (2 * len(steps) + 1)])
            continue
        cells = [f"{mib(m.rss)} / {mib(m.uss)}" for m in values]
        rows.append([name, *cells, f"{(values[-1].rss - values[0].rss) / MIB:+.1f}"])
    print_table(
        f"4. Memory, RSS / USS MiB (PostgreSQL host, concurrency 2, --max-jobs-per-child "
        f"{2 * MEMORY_JOBS}: the same children run all {MEMORY_JOBS:,} noop jobs)",
        ["process", *steps, "RSS change"],
        rows,
    )


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per throughput run")
    parser.add_argument("--runs", type=int, default=3, help="runs per throughput cell")
    parser.add_argument(
        "--steps",
        default="throughput,pickup,recovery,memory",
        help="comma-separated sections to run (default: all)",
    )
    args = parser.parse_args(argv)
    began = time.monotonic()

    with (
        database(None) as (pg_url, server),
        tempfile.TemporaryDirectory(prefix="supervisor-bench-") as folder,
    ):
        workdir = Path(folder)
        sqlite_url = f"sqlite:///{workdir / 'bench.db'}"
        pg = Database("PostgreSQL", pg_url, connect(pg_url))
        sqlite = Database("SQLite", sqlite_url, connect(sqlite_url))
        try:
            for db in (pg, sqlite):
                upgrade(db.engine)
            asyncio.run(install_pgqueuer(libpq_conninfo(pg_url)))
            with pg.engine.connect() as conn:
                server_version = conn.execute(text("SHOW server_version")).scalar_one()
            print(
                f"Environment: {os.cpu_count()} CPUs, PostgreSQL {server_version} ({server}), "
                f"SQLite file (WAL), pgqueuer {version('pgqueuer')}, "
                f"Python {platform.python_version()}"
            )
            steps: list[tuple[str, Callable[[], None]]] = [
                (
                    "throughput",
                    lambda: report_throughput(
                        measure_throughput(workdir, pg, sqlite, args.jobs, args.runs),
                        args.jobs,
                        args.runs,
                    ),
                ),
                ("pickup", lambda: report_pickup(measure_pickup(workdir, pg, sqlite))),
                (
                    "recovery",
                    lambda: report_recovery(measure_recovery(workdir, pg), *measure_spawn()),
                ),
                ("memory", lambda: report_memory(*measure_memory(workdir, pg))),
            ]
            chosen = set(args.steps.split(","))
            for name, step in steps:
                if name not in chosen:
                    continue
                print(f"{name}...", file=sys.stderr, flush=True)
                step()
                sys.stdout.flush()
        finally:
            pg.engine.dispose()
            sqlite.engine.dispose()
    print(f"\n(total {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
