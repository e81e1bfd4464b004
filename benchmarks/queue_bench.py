"""Benchmark of the database queue (`supervisor.db.queue`) on PostgreSQL, beside pgqueuer.

Run `python benchmarks/queue_bench.py [--jobs N] [--runs R] [--database-url URL]`. Without a URL
it starts a throwaway PostgreSQL (`tests.postgres_server`, fsync off) and removes it at the end;
with one, that database is used as scratch: its `jobs` table and pgqueuer's tables are emptied.
Both tools always run against the same server, in the same run, alternating run by run.

What is measured:

1. Claim-and-ack throughput. N jobs are enqueued in bulk (not timed), then 1 or 4 worker
   processes (multiprocessing, spawn) start together and each loops: claim a batch of 1, 8 or 32
   in one transaction, then acknowledge each job of the batch in its own transaction ("each"),
   or the whole batch in one (`queue.ack_all`, one statement: "batch", as a host acknowledges
   what its children finished), until a claim comes back empty. Throughput is N divided by the
   time from the common start to the last worker finishing. pgqueuer does the equivalent through
   its own API: `Queries.dequeue` with the batch size, then `Queries.log_jobs` for each job on
   its own, or for the whole batch in one call (the "successful" transition that deletes the
   rows and writes their log entries, one autocommit statement). Each cell is the median of R runs; the spread is the slowest and fastest run.
   The ratio is ours / pgqueuer: above 1 our queue moves more jobs per second, below 1 fewer.
2. Enqueue-to-claim latency of an idle listener. A listener process blocks in `select` on our
   `Listener` connection (LISTEN on `supervisor.db.queue.CHANNEL`), claims when it wakes and reports
   when the claim returned; the parent enqueues one job every ~20 ms and stamps the time just
   before the enqueue transaction commits (NOTIFY is delivered on commit). pgqueuer's equivalent
   is its `QueueManager` (LISTEN/NOTIFY), stamped when the job function starts, against an
   enqueue in an explicit transaction stamped just before its commit. Both stamps are
   `time.monotonic()`, which is the system-wide CLOCK_MONOTONIC on Linux, so they compare across
   processes. The ratio is again ours / pgqueuer, of latencies: below 1 ours wakes up sooner.
3. Statements per job of our queue, counted on the engine: statements the driver executes
   (SQLAlchemy `before_cursor_execute`), transaction begins and commits (SQLAlchemy `begin` and
   `commit` events: psycopg sends BEGIN before the first statement and COMMIT at the end, each a
   round trip). The engine does not pre-ping pooled connections, so nothing else is sent. Each
   operation runs in its own `transaction(engine)`, as the host does.
4. The plan of our claim statement: the statement `claim` compiles is captured and run under
   `EXPLAIN (ANALYZE, BUFFERS)` (rolled back) on a queue of N queued jobs after ANALYZE, and the
   benchmark says whether the partial index `ix_jobs_queued_run_at` appears in it. When it does
   not, the plan with sequential scans disabled follows, to show what the index can do for it.

Throughput depends on N, not only on the tools: a claim whose plan reads and sorts every
claimable row instead of walking an index in order (section 4 shows which ours does) costs more
per call the deeper the queue, so compare ratios at the same N. The machine is shared and noisy: quote medians, and read a ratio within ~10 % of
1 as a tie.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import select
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from importlib.metadata import version
from multiprocessing import get_context
from multiprocessing.context import SpawnProcess
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psycopg  # noqa: E402
import sqlalchemy  # noqa: E402
from pgqueuer import PsycopgDriver, Queries, QueueManager  # noqa: E402
from pgqueuer.db import SyncPsycopgDriver  # noqa: E402
from pgqueuer.models import Job as PgqJob  # noqa: E402
from pgqueuer.queries import EntrypointExecutionParameter, SyncQueries  # noqa: E402
from pgqueuer.types import QueueEntrypoint, QueueManagerId  # noqa: E402
from sqlalchemy import Connection, Engine, event, insert, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from supervisor.db import queue  # noqa: E402
from supervisor.db.connection import connect, transaction  # noqa: E402
from supervisor.db.migrate import upgrade  # noqa: E402
from supervisor.db.tables import jobs  # noqa: E402
from supervisor.host.wakeup import Listener, libpq_conninfo  # noqa: E402
from tests.postgres_server import TemporaryPostgres  # noqa: E402

BATCH_SIZES = (1, 8, 32)
PROCESS_COUNTS = (1, 4)
KIND = "capture"
#: pgqueuer entrypoints of the throughput and latency runs.
PGQ_THROUGHPUT = "bench_throughput"
PGQ_LATENCY = "bench_latency"
#: Long enough that no lease expires during a run (an expired lease would be re-claimed).
LEASE_SECONDS = 600.0
LATENCY_SAMPLES = 200
LATENCY_WARMUP = 5
LATENCY_SPACING_SECONDS = 0.020
#: Longest wait for one job to be claimed before the latency run is declared broken.
LATENCY_TIMEOUT_SECONDS = 10.0
#: How far ahead of the common start the workers are told to begin, so all are waiting.
START_LEAD_SECONDS = 0.05
#: Claims per batch size and enqueues in the statement count.
COUNT_CLAIMS = 4
COUNT_ENQUEUES = 200
#: Batch size of the EXPLAINed claim.
EXPLAIN_LIMIT = 32
INDEX = "ix_jobs_queued_run_at"


# ---------------------------------------------------------------------------------------------
# Output


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """A plain text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(headers[i]), *(len(row[i]) for row in rows)) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        )

    print(f"\n{title}")
    print(line(headers))
    print("  ".join("-" * width for width in widths))
    for row in rows:
        print(line(row))


def fmt_rate(value: float) -> str:
    return f"{value:,.0f}"


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f}"


# ---------------------------------------------------------------------------------------------
# Setup and filling the queues (never timed)


@contextmanager
def database(url: str | None) -> Iterator[tuple[str, str]]:
    """The SQLAlchemy URL to use and a description of the server; a temporary one without `url`."""
    if url is not None:
        yield make_url(url).set(drivername="postgresql+psycopg").render_as_string(False), "given"
        return
    server = TemporaryPostgres().start()
    try:
        yield server.url, "temporary, fsync=off, synchronous_commit=off"
    finally:
        server.stop()


async def install_pgqueuer(conninfo: str) -> None:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        if not await queries.schema_is_installed():
            await queries.install()


def fill_ours(engine: Engine, count: int) -> None:
    """Empty `jobs`, queue `count` jobs in one statement batch, ANALYZE."""
    with transaction(engine) as conn:
        conn.execute(text("TRUNCATE jobs"))
        if count:
            conn.execute(insert(jobs), [{"kind": KIND, "data": {"seq": i}} for i in range(count)])
        conn.execute(text("ANALYZE jobs"))


async def fill_pgqueuer(conninfo: str, entrypoint: str, count: int) -> None:
    """Empty pgqueuer's queue and log, queue `count` jobs in one statement, ANALYZE."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        await queries.clear_queue()
        await queries.clear_queue_log()
        if count:
            await queries.enqueue(
                [entrypoint] * count, [str(i).encode() for i in range(count)], [0] * count
            )
        await queries.driver.execute(f"ANALYZE {queries.qbq.settings.queue_table}")


# ---------------------------------------------------------------------------------------------
# 1. Throughput: worker processes that drain the queue


@dataclass(frozen=True)
class Drain:
    """A worker's order: drain with `tool` in batches of `batch`, acknowledging each job in its
    own transaction or (`batched_ack`) the whole batch in one statement."""

    tool: str
    batch: int
    batched_ack: bool = False


def throughput_worker(url: str, inbox: Queue[Drain | float | None], outbox: Queue[Any]) -> None:
    """A worker process: for each `Drain`, connect, say ready, wait for the start time, drain."""
    while (order := inbox.get()) is not None:
        assert isinstance(order, Drain)
        try:
            if order.tool == "ours":
                done = drain_ours(url, order, inbox, outbox)
            else:
                done = asyncio.run(drain_pgqueuer(libpq_conninfo(url), order, inbox, outbox))
        except Exception as error:
            outbox.put(f"{order.tool} worker {os.getpid()} failed: {error!r}")
            raise
        outbox.put((done, time.monotonic()))


def wait_for_start(inbox: Queue[Drain | float | None], outbox: Queue[Any]) -> None:
    outbox.put("ready")
    start = inbox.get()
    assert isinstance(start, float)
    time.sleep(max(0.0, start - time.monotonic()))


def drain_ours(
    url: str, order: Drain, inbox: Queue[Drain | float | None], outbox: Queue[Any]
) -> int:
    engine = connect(url, pool_size=1)
    try:
        with transaction(engine) as conn:
            conn.execute(text("SELECT 1"))
        locked_by = f"bench-{os.getpid()}"
        wait_for_start(inbox, outbox)
        done = 0
        while True:
            with transaction(engine) as conn:
                claimed = queue.claim(conn, locked_by, order.batch, LEASE_SECONDS)
            if not claimed:
                return done
            if order.batched_ack:
                with transaction(engine) as conn:
                    ours = len(queue.ack_all(conn, [job.lease for job in claimed]))
            else:
                ours = 0
                for job in claimed:
                    with transaction(engine) as conn:
                        ours += queue.ack(conn, job.lease)
            if ours != len(claimed):
                raise RuntimeError("jobs were no longer ours at ack")
            done += len(claimed)
    finally:
        engine.dispose()


async def drain_pgqueuer(
    conninfo: str, order: Drain, inbox: Queue[Drain | float | None], outbox: Queue[Any]
) -> int:
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))
        entrypoints = {QueueEntrypoint(PGQ_THROUGHPUT): EntrypointExecutionParameter(0)}
        manager_id = QueueManagerId(uuid.uuid4())
        await conn.execute("SELECT 1")
        wait_for_start(inbox, outbox)
        done = 0
        while True:
            picked = await queries.dequeue(
                batch_size=order.batch,
                entrypoints=entrypoints,
                queue_manager_id=manager_id,
                global_concurrency_limit=None,
                heartbeat_timeout=timedelta(seconds=LEASE_SECONDS),
            )
            if not picked:
                return done
            if order.batched_ack:
                await queries.log_jobs([(job, "successful", None) for job in picked])
            else:
                for job in picked:
                    await queries.log_jobs([(job, "successful", None)])
            done += len(picked)


@dataclass
class WorkerPool:
    """Worker processes started once (spawn is slow) and handed one drain after another."""

    url: str
    size: int
    outbox: Queue[Any] = field(init=False)
    inboxes: list[Queue[Drain | float | None]] = field(init=False, default_factory=list)
    processes: list[SpawnProcess] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        ctx = get_context("spawn")
        self.outbox = ctx.Queue()
        for _ in range(self.size):
            inbox: Queue[Drain | float | None] = ctx.Queue()
            process = ctx.Process(
                target=throughput_worker, args=(self.url, inbox, self.outbox), daemon=True
            )
            process.start()
            self.inboxes.append(inbox)
            self.processes.append(process)

    def drain(self, order: Drain, processes: int, expected: int) -> float:
        """Jobs per second of `processes` workers draining a queue of `expected` jobs."""
        inboxes = self.inboxes[:processes]
        for inbox in inboxes:
            inbox.put(order)
        for _ in inboxes:
            self.receive(timeout=120)
        start = time.monotonic() + START_LEAD_SECONDS
        for inbox in inboxes:
            inbox.put(start)
        results: list[tuple[int, float]] = [self.receive(timeout=1800) for _ in inboxes]
        done = sum(count for count, _ in results)
        if done != expected:
            raise RuntimeError(f"{order.tool}: drained {done} jobs of {expected}")
        return done / (max(end for _, end in results) - start)

    def receive(self, timeout: float) -> Any:
        """The next message of a worker; a worker's failure (a message other than "ready") raises."""
        message = self.outbox.get(timeout=timeout)
        if isinstance(message, str) and message != "ready":
            raise RuntimeError(message)
        return message

    def close(self) -> None:
        for inbox in self.inboxes:
            inbox.put(None)
        for process in self.processes:
            process.join(timeout=30)


@dataclass
class Cell:
    ours: list[float] = field(default_factory=list)
    pgqueuer: list[float] = field(default_factory=list)


#: How a cell acknowledges its jobs, as its row says.
ACKS = {False: "each", True: "batch"}


def measure_throughput(
    url: str, engine: Engine, count: int, runs: int
) -> dict[tuple[int, int, bool], Cell]:
    conninfo = libpq_conninfo(url)
    cells = {
        (p, b, batched): Cell()
        for p in PROCESS_COUNTS
        for b in BATCH_SIZES
        for batched in ((False, True) if b > 1 else (False,))
    }
    pool = WorkerPool(url, max(PROCESS_COUNTS))
    try:
        for run in range(runs):
            for (processes, batch, batched), cell in cells.items():
                fill_ours(engine, count)
                cell.ours.append(pool.drain(Drain("ours", batch, batched), processes, count))
                asyncio.run(fill_pgqueuer(conninfo, PGQ_THROUGHPUT, count))
                cell.pgqueuer.append(
                    pool.drain(Drain("pgqueuer", batch, batched), processes, count)
                )
                print(
                    f"  run {run + 1}/{runs} procs={processes} batch={batch} "
                    f"{ACKS[batched]}: "
                    f"ours {fmt_rate(cell.ours[-1])}/s, pgqueuer {fmt_rate(cell.pgqueuer[-1])}/s",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        pool.close()
    return cells


def report_throughput(cells: dict[tuple[int, int, bool], Cell], count: int, runs: int) -> None:
    def spread(values: list[float]) -> str:
        return f"{fmt_rate(min(values))}-{fmt_rate(max(values))}"

    rows = []
    for (processes, batch, batched), cell in cells.items():
        ours, theirs = statistics.median(cell.ours), statistics.median(cell.pgqueuer)
        rows.append(
            [
                str(processes),
                str(batch),
                ACKS[batched],
                fmt_rate(ours),
                fmt_rate(theirs),
                f"{ours / theirs:.2f}",
                spread(cell.ours),
                spread(cell.pgqueuer),
            ]
        )
    print_table(
        f"1. Claim-and-ack throughput, jobs/s (median of {runs} runs of {count} jobs; "
        "ratio > 1: ours faster)",
        [
            "procs",
            "batch",
            "acks",
            "ours",
            "pgqueuer",
            "ours/pgqueuer",
            "ours spread",
            "pgqueuer spread",
        ],
        rows,
    )


# ---------------------------------------------------------------------------------------------
# 2. Latency: an idle listener process


def listen_ours(url: str, stop: Event, outbox: Queue[tuple[int, float]]) -> None:
    """Claim what is queued, then block in select on the LISTEN connection and claim on wake-up."""
    engine = connect(url, pool_size=1)
    listener = Listener(url, random.Random(0))
    if not listener.connect():
        raise RuntimeError("the listener could not connect")
    fileno = listener.fileno()
    assert fileno is not None

    def claim_and_report() -> None:
        with transaction(engine) as conn:
            claimed = queue.claim(conn, "latency", 8, LEASE_SECONDS)
        claimed_at = time.monotonic()
        for job in claimed:
            outbox.put((int(job.data["seq"]), claimed_at))
            with transaction(engine) as conn:
                queue.ack(conn, job.lease)

    try:
        # Like a starting host: what was queued before LISTEN took effect is claimed now.
        claim_and_report()
        while not stop.is_set():
            readable, _, _ = select.select([fileno], [], [], 0.5)
            if readable:
                listener.drain()
                claim_and_report()
    finally:
        listener.close()
        engine.dispose()


def listen_pgqueuer(conninfo: str, stop: Event, outbox: Queue[tuple[int, float]]) -> None:
    asyncio.run(run_queue_manager(conninfo, stop, outbox))


async def run_queue_manager(conninfo: str, stop: Event, outbox: Queue[tuple[int, float]]) -> None:
    """pgqueuer's QueueManager with its defaults; the job function stamps when it starts."""
    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        manager = QueueManager(Queries(PsycopgDriver(conn)))

        @manager.entrypoint(PGQ_LATENCY)
        async def started(job: PgqJob) -> None:
            started_at = time.monotonic()
            assert job.payload is not None
            outbox.put((int(job.payload), started_at))

        async def stop_when_told() -> None:
            await asyncio.to_thread(stop.wait)
            manager.shutdown.set()

        stopper = asyncio.create_task(stop_when_told())
        await manager.run()
        await stopper


def enqueue_ours(engine: Engine) -> Callable[[int], float]:
    def enqueue(seq: int) -> float:
        with transaction(engine) as conn:
            queue.enqueue(conn, KIND, {"seq": seq})
            return time.monotonic()

    return enqueue


def enqueue_pgqueuer(conn: psycopg.Connection[Any]) -> Callable[[int], float]:
    queries = SyncQueries(SyncPsycopgDriver(conn))

    def enqueue(seq: int) -> float:
        with conn.transaction():
            queries.enqueue(PGQ_LATENCY, str(seq).encode())
            return time.monotonic()

    return enqueue


def latencies(
    target: Callable[[str, Event, Queue[tuple[int, float]]], None],
    target_url: str,
    enqueue: Callable[[int], float],
    samples: int = LATENCY_SAMPLES,
    spacing: float = LATENCY_SPACING_SECONDS,
) -> list[float]:
    """Seconds from just before each enqueue commit to the listener's stamp, warm-up excluded."""
    ctx = get_context("spawn")
    stop = ctx.Event()
    outbox: Queue[tuple[int, float]] = ctx.Queue()
    process = ctx.Process(target=target, args=(target_url, stop, outbox), daemon=True)
    process.start()
    try:
        # Wait for each warm-up job: once one is back the listener is up and listening.
        for seq in range(LATENCY_WARMUP):
            enqueue(seq)
            outbox.get(timeout=120)
        sent: dict[int, float] = {}
        next_at = time.monotonic()
        for seq in range(LATENCY_WARMUP, LATENCY_WARMUP + samples):
            time.sleep(max(0.0, next_at - time.monotonic()))
            sent[seq] = enqueue(seq)
            next_at += spacing
        received = dict(outbox.get(timeout=LATENCY_TIMEOUT_SECONDS) for _ in sent)
        return [received[seq] - at for seq, at in sent.items()]
    finally:
        stop.set()
        process.join(timeout=30)
        if process.is_alive():
            process.terminate()


def measure_latency(url: str, engine: Engine) -> tuple[list[float], list[float]]:
    fill_ours(engine, 0)
    ours = latencies(listen_ours, url, enqueue_ours(engine))
    conninfo = libpq_conninfo(url)
    asyncio.run(fill_pgqueuer(conninfo, PGQ_LATENCY, 0))
    with psycopg.connect(conninfo, autocommit=True) as conn:
        theirs = latencies(listen_pgqueuer, conninfo, enqueue_pgqueuer(conn))
    return ours, theirs


def report_latency(ours: list[float], theirs: list[float]) -> None:
    def percentile(values: list[float], p: int) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[p - 1]

    rows = []
    for label, pick in (
        ("p50", lambda v: percentile(v, 50)),
        ("p90", lambda v: percentile(v, 90)),
        ("p99", lambda v: percentile(v, 99)),
        ("max", max),
    ):
        a, b = pick(ours), pick(theirs)
        rows.append([label, fmt_ms(a), fmt_ms(b), f"{a / b:.2f}"])
    print_table(
        f"2. Enqueue-to-claim latency of an idle listener, ms ({LATENCY_SAMPLES} enqueues "
        f"~{LATENCY_SPACING_SECONDS * 1000:.0f} ms apart; ratio < 1: ours sooner)",
        ["", "ours (claimed)", "pgqueuer (job started)", "ours/pgqueuer"],
        rows,
    )


# ---------------------------------------------------------------------------------------------
# 3. Statements per job


@dataclass(frozen=True)
class Measured:
    """What one operation sent, per call."""

    operation: str
    calls: int
    jobs_per_call: int
    statements: float
    begins: float
    commits: float
    seen: str

    @property
    def round_trips(self) -> float:
        return self.statements + self.begins + self.commits

    @property
    def round_trips_per_job(self) -> float:
        return self.round_trips / self.jobs_per_call


@dataclass
class Counts:
    """Running totals of the counting engine's events since the last `take`."""

    statements: int = 0
    begins: int = 0
    commits: int = 0
    seen: set[str] = field(default_factory=set)

    def take(self, operation: str, calls: int, jobs_per_call: int) -> Measured:
        measured = Measured(
            operation,
            calls,
            jobs_per_call,
            self.statements / calls,
            self.begins / calls,
            self.commits / calls,
            ", ".join(sorted(self.seen)),
        )
        self.reset()
        return measured

    def reset(self) -> None:
        self.statements = self.begins = self.commits = 0
        self.seen = set()


def counting_engine(url: str) -> tuple[Engine, Counts]:
    engine = connect(url, pool_size=1)
    counts = Counts()

    def on_statement(*args: Any) -> None:
        counts.statements += 1
        counts.seen.add(describe_statement(args[2]))

    def on_begin(*_: Any) -> None:
        counts.begins += 1

    def on_commit(*_: Any) -> None:
        counts.commits += 1

    event.listen(engine, "before_cursor_execute", on_statement)
    event.listen(engine, "begin", on_begin)
    event.listen(engine, "commit", on_commit)
    return engine, counts


def describe_statement(statement: str) -> str:
    """A short name for a statement: its first words, or what the claim and the NOTIFY are."""
    words = statement.split()
    if words[:2] == ["WITH", "expired"]:
        return "claim (WITH expired, due .. UPDATE jobs)"
    if words[0] == "SELECT" and "pg_notify" in statement:
        return "SELECT pg_notify"
    return " ".join(words[:3] if words[0] == "INSERT" else words[:2])


def measure_statements(url: str, engine: Engine) -> list[Measured]:
    """Count enqueue, claim at each batch size, ack and ack_all, each call in its own
    transaction."""
    fill_ours(engine, 0)
    counter, counts = counting_engine(url)
    measured: list[Measured] = []
    try:
        # Open the pooled connection first, so that connecting is not counted.
        with transaction(counter) as conn:
            conn.execute(text("SELECT 1"))
        counts.reset()
        for seq in range(COUNT_ENQUEUES):
            with transaction(counter) as conn:
                queue.enqueue(conn, KIND, {"seq": seq})
        measured.append(counts.take("enqueue", COUNT_ENQUEUES, 1))
        claimed: list[queue.Job] = []
        for batch in BATCH_SIZES:
            for _ in range(COUNT_CLAIMS):
                with transaction(counter) as conn:
                    got = queue.claim(conn, "count", batch, LEASE_SECONDS)
                if len(got) != batch:
                    raise RuntimeError(f"claimed {len(got)} jobs, expected {batch}")
                claimed.extend(got)
            measured.append(counts.take(f"claim batch {batch}", COUNT_CLAIMS, batch))
        # The last 4 x 32 claimed are acknowledged 32 to a statement, the rest one by one.
        each, batched = claimed[: -COUNT_CLAIMS * 32], claimed[-COUNT_CLAIMS * 32 :]
        for job in each:
            with transaction(counter) as conn:
                queue.ack(conn, job.lease)
        measured.append(counts.take("ack", len(each), 1))
        for start in range(0, len(batched), 32):
            with transaction(counter) as conn:
                queue.ack_all(conn, [job.lease for job in batched[start : start + 32]])
        measured.append(counts.take("ack_all batch 32", COUNT_CLAIMS, 32))
    finally:
        counter.dispose()
    return measured


def report_statements(measured: list[Measured]) -> None:
    rows = [
        [
            m.operation,
            str(m.calls),
            str(m.jobs_per_call),
            f"{m.statements:g}",
            f"{m.begins:g}",
            f"{m.commits:g}",
            f"{m.round_trips:g}",
            f"{m.round_trips_per_job:.2f}",
            m.seen,
        ]
        for m in measured
    ]
    print_table(
        "3. Statements per operation of our queue (each call in its own transaction(engine))",
        [
            "operation",
            "calls",
            "jobs/call",
            "stmts/call",
            "BEGIN",
            "COMMIT",
            "round trips/call",
            "round trips/job",
            "statements seen",
        ],
        rows,
    )
    per_job = {m.operation: m.round_trips_per_job for m in measured}
    lifecycle = "; ".join(
        f"batch {batch}: {per_job['enqueue'] + per_job[f'claim batch {batch}'] + per_job['ack']:.2f}"
        for batch in BATCH_SIZES
    )
    print(
        "   stmts: before_cursor_execute; BEGIN/COMMIT: SQLAlchemy begin/commit events (psycopg\n"
        "   sends each as its own round trip). Round trips = the sum.\n"
        f"   Whole life of a job (enqueue + claim/batch + ack), round trips: {lifecycle}; "
        f"batch 32 with ack_all: "
        f"{per_job['enqueue'] + per_job['claim batch 32'] + per_job['ack_all batch 32']:.2f}"
    )


# ---------------------------------------------------------------------------------------------
# 4. The claim's plan


def claim_statement(engine: Engine) -> tuple[str, Any]:
    """The SQL and parameters `queue.claim` sends, captured from a rolled-back claim."""
    captured: list[tuple[str, Any]] = []

    def capture(*args: Any) -> None:
        captured.append((args[2], args[3]))

    with engine.connect() as conn:
        event.listen(conn, "before_cursor_execute", capture)
        with conn.begin() as trans:
            queue.claim(conn, "explain", EXPLAIN_LIMIT, LEASE_SECONDS)
            trans.rollback()
    if len(captured) != 1:
        raise RuntimeError(f"claim sent {len(captured)} statements, expected 1")
    return captured[0]


def explain(conn: Connection, statement: str, parameters: Any, *settings: str) -> list[str]:
    """EXPLAIN ANALYZE (it executes the UPDATE) inside a transaction that is rolled back."""
    with conn.begin() as trans:
        for setting in settings:
            conn.exec_driver_sql(f"SET LOCAL {setting}")
        plan = [
            str(row[0])
            for row in conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters)
        ]
        trans.rollback()
    return plan


def report_plan(engine: Engine, count: int) -> None:
    fill_ours(engine, count)
    statement, parameters = claim_statement(engine)
    with engine.connect() as conn:
        plan = explain(conn, statement, parameters)
        used = any(INDEX in line for line in plan)
        print(
            f"\n4. EXPLAIN (ANALYZE, BUFFERS) of the claim (batch {EXPLAIN_LIMIT}) on {count} "
            f"queued jobs after ANALYZE; {INDEX} used: {'yes' if used else 'NO'}"
        )
        print(f"   statement: {' '.join(statement.split())}")
        print("\n".join(f"   {line}" for line in plan))
        if not used:
            print("\n   The same claim with enable_seqscan=off:")
            forced = explain(conn, statement, parameters, "enable_seqscan = off")
            print("\n".join(f"   {line}" for line in forced))


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per throughput run")
    parser.add_argument("--runs", type=int, default=3, help="runs per throughput cell")
    parser.add_argument(
        "--database-url",
        help="PostgreSQL to use as scratch (its jobs and pgqueuer tables are emptied); "
        "default: a temporary server",
    )
    args = parser.parse_args(argv)

    with database(args.database_url) as (url, server):
        engine = connect(url)
        try:
            upgrade(engine)
            asyncio.run(install_pgqueuer(libpq_conninfo(url)))
            with engine.connect() as conn:
                server_version = conn.execute(text("SHOW server_version")).scalar_one()
            print(
                f"Environment: {os.cpu_count()} CPUs, PostgreSQL {server_version} ({server}), "
                f"pgqueuer {version('pgqueuer')}, Python {platform.python_version()}, "
                f"SQLAlchemy {sqlalchemy.__version__}, psycopg {psycopg.__version__}"
            )
            cells = measure_throughput(url, engine, args.jobs, args.runs)
            report_throughput(cells, args.jobs, args.runs)
            report_latency(*measure_latency(url, engine))
            report_statements(measure_statements(url, engine))
            report_plan(engine, args.jobs)
        finally:
            engine.dispose()


if __name__ == "__main__":
    main()
