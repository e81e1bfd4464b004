"""Benchmark of growth: what a capture host costs as its jobs add up.

Run `python benchmarks/growth_bench.py [--jobs N] [--sqlite-jobs N] [--rows N] [--sqlite-rows N]
[--trace-jobs N]`. It starts a throwaway PostgreSQL (`tests.postgres_server`, fsync off) and a
SQLite file in a temporary folder, and removes both at the end. Hosts are real
`python -m supervisor run --concurrency 2` processes with the production defaults (children
recycled after ~500 jobs, info-level JSON log to a file), fed `noop` jobs.

What is measured:

1. Memory over N jobs (default 100,000 on PostgreSQL, 20,000 on SQLite). Jobs are queued in
   chunks of `--every` (the last of each with `queue.enqueue`, so PostgreSQL hosts hear a
   NOTIFY); when the host's log shows the chunk completed and a second has passed, psutil reads
   the RSS and USS of the parent, its fork server and its children. A second PostgreSQL run
   with `--max-jobs-per-child` above N keeps the same two children throughout, so their own
   growth shows too. Growth per 10,000 jobs is the least-squares slope of the parent's RSS over
   the samples from 10,000 jobs on (the first thousands fill caches: compiled statements,
   imports done on first use, the allocator's arenas; section 4 shows what keeps growing).
2. Statements per job, in the first PostgreSQL run. The host connects as a role of its own
   with `log_statement = all` (`ALTER ROLE ... SET`), so the server logs every statement it is
   sent by the host, and only by it: BEGIN and COMMIT, each execution of a prepared statement,
   the LISTEN connection's. Lines logged from the first chunk's insert to the last chunk's
   completion are counted and sorted by shape (claim, ack, renewal, ...) from their text. Beside
   them, from the statistics collector over the same span: `xact_commit` of the host's
   database (less the benchmark's own inserts; autovacuum's transactions are included), and
   `pg_stat_user_tables` for `jobs` (sequential and index scans, tuples inserted and updated).
   auto_explain logs the plan of every statement of the host's role too, and the plans that
   scanned `jobs` whole are counted by shape, and whether they were generic plans (psycopg
   prepares a statement on its fifth execution, and PostgreSQL may then plan it once for any
   values: such a plan cannot use a partial index whose predicate compares with a parameter).
   Logging costs the server time, so jobs/s in that run is below the host's best.
3. Plans with 1,000,000 finished jobs. `jobs` gets that many completed, failed and cancelled
   rows (one `INSERT ... SELECT generate_series` on PostgreSQL, a recursive CTE on SQLite), a
   few thousand queued ones (some not due yet: retries in backoff) and a few running ones, then
   ANALYZE (PostgreSQL; the host never analyses SQLite, so neither does this). Each statement
   the host runs as it works is captured from the `supervisor.db.queue` function that sends it
   (run in a transaction that is rolled back), then shown with `EXPLAIN (ANALYZE, BUFFERS)`
   (PostgreSQL, rolled back) or `EXPLAIN QUERY PLAN` (SQLite), with its time: the median of
   `PLAN_RUNS` executions, each in a rolled-back transaction, measured in this process. A plan
   that reads the table whole (a sequential scan of `jobs`; on SQLite a SCAN of it on no
   partial index, or a SEARCH on no index) is flagged.
4. With `--trace-jobs N`: a PostgreSQL host started through `traced_host` (this module), which
   turns tracemalloc on in the parent only when first signalled, after the first chunk (the
   warm-up runs untraced, at full speed; forks stop tracing), and on each SIGUSR1 writes the
   count of live objects by type (`gc.get_objects()`) and, once tracing, a snapshot into the
   folder `STORYSHELF_GROWTH_TRACE` names. Readings after the first chunk, halfway and after
   N jobs: what the second half left allocated is printed by line, with the objects by type.
   Tracing slows the parent several times over, so N is best kept to some 10,000.

The machine is shared and noisy: memory figures are readings, not rates, and repeat well;
times are medians.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import re
import runpy
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from sqlalchemy import Connection, Engine, event, insert, select, text  # noqa: E402

from benchmarks.queue_bench import print_table  # noqa: E402
from supervisor.commands.status import read_status  # noqa: E402
from supervisor.db import queue  # noqa: E402
from supervisor.db.connection import connect, is_postgres, transaction  # noqa: E402
from supervisor.db.migrate import upgrade  # noqa: E402
from supervisor.db.tables import jobs  # noqa: E402
from tests.postgres_server import TemporaryPostgres  # noqa: E402

#: The role and database the PostgreSQL host uses: its statements alone are logged.
HOST_ROLE = "growth_host"
HOST_DATABASE = "growth"
#: Names the folder for the traced parent's snapshots (read by `traced_host`).
TRACE_VARIABLE = "STORYSHELF_GROWTH_TRACE"
TRACE_FRAMES = 12
#: Job counts the memory table shows (those the runs reach).
REPORTED = (0, 10_000, 25_000, 50_000, 75_000, 100_000)
#: Samples before this many jobs are the warm-up, left out of the growth slope.
WARM_UP_JOBS = 10_000
#: Idle time before a memory reading, so that it sees a host at rest.
SETTLE_SECONDS = 1.0
#: Longest a chunk of jobs may take.
CHUNK_TIMEOUT_SECONDS = 600.0
MIB = 2**20
#: Rows beside the finished ones in the plans' table.
QUEUED_DUE = 3_000
QUEUED_LATER = 200
RUNNING_OURS = 8
RUNNING_THEIRS = 8
#: Who holds the running rows the fenced statements name.
PLAN_HOST = "growth-host"
PLAN_RUNS = 5
LEASE_SECONDS = 60.0


# ---------------------------------------------------------------------------------------------
# Output


def mib(value: float) -> str:
    return f"{value / MIB:.1f}"


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The traced parent (runs inside the host process)


def traced_host() -> None:
    """`python -m supervisor` whose parent can be traced: each SIGUSR1 takes a reading.

    Run as `python -c "from benchmarks.growth_bench import traced_host; traced_host()" run ...`
    with `STORYSHELF_GROWTH_TRACE` naming a folder. The first signal turns tracemalloc on (after
    the warm-up, which then runs at full speed), and every signal writes, after a full
    collection, the count of live objects by type (`objects-N.json`) and, once tracing, a
    snapshot (`snapshot-N.pickle`), each appearing whole (written, then renamed). Only this
    process is traced: a process forked from it stops tracing at once.
    """
    folder = Path(os.environ[TRACE_VARIABLE])
    os.register_at_fork(after_in_child=tracemalloc.stop)
    numbers = itertools.count(1)

    def write(path: Path, save: Callable[[Path], object]) -> None:
        partial = path.with_suffix(".tmp")
        save(partial)
        partial.rename(path)

    def take(_signal: int, _frame: FrameType | None) -> None:
        number = next(numbers)
        gc.collect()
        if tracemalloc.is_tracing():
            snapshot = tracemalloc.take_snapshot()
            write(folder / f"snapshot-{number}.pickle", lambda path: snapshot.dump(str(path)))
        kinds = Counter(type(thing).__qualname__ for thing in gc.get_objects())
        write(folder / f"objects-{number}.json", lambda path: path.write_text(json.dumps(kinds)))
        if not tracemalloc.is_tracing():
            tracemalloc.start(TRACE_FRAMES)

    signal.signal(signal.SIGUSR1, take)
    sys.argv = ["supervisor", *sys.argv[1:]]
    runpy.run_module("supervisor", run_name="__main__", alter_sys=True)


# ---------------------------------------------------------------------------------------------
# Hosts


class Host:
    """`python -m supervisor run --concurrency 2 ...` logging JSON at info level to a file."""

    def __init__(
        self, url: str, workdir: Path, *options: str, trace_folder: Path | None = None
    ) -> None:
        self.log_path = workdir / f"host-{time.monotonic_ns()}.log"
        env = {**os.environ, "PYTHONPATH": str(REPO), "STORYSHELF_LOG_LEVEL": "info"}
        env.pop("STORYSHELF_PLUGINS", None)
        entry = ["-m", "supervisor"]
        if trace_folder is not None:
            env[TRACE_VARIABLE] = str(trace_folder)
            entry = ["-c", "from benchmarks.growth_bench import traced_host; traced_host()"]
        command = [
            sys.executable, *entry, "run", "--database-url", url,
            "--artifacts", str(workdir / "artifacts"), "--concurrency", "2", *options,
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=REPO
            )
        self._offset = 0
        self.completed = 0
        self.seen: set[str] = set()

    @property
    def pid(self) -> int:
        return self.process.pid

    def read(self) -> None:
        """Take in the log's new whole lines: events seen, jobs completed."""
        with self.log_path.open("rb") as log:
            log.seek(self._offset)
            data = log.read()
        whole = data[: data.rfind(b"\n") + 1]
        self._offset += len(whole)
        for line in whole.splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue
            name = entry.get("event", "")
            self.seen.add(name)
            if name == "job finished":
                if entry.get("outcome") != "completed":
                    raise RuntimeError(f"a job ended otherwise: {entry}")
                self.completed += 1

    def wait(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.read()
            if done():
                return
            if self.process.poll() is not None:
                raise RuntimeError(f"the host exited {self.process.returncode} before {what}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out waiting for {what}\n{self.log_tail()}")
            time.sleep(0.05)

    def wait_for_event(self, name: str, timeout: float = 60.0) -> None:
        self.wait(lambda: name in self.seen, timeout, f"'{name}'")

    def wait_completed(self, count: int) -> None:
        self.wait(lambda: self.completed >= count, CHUNK_TIMEOUT_SECONDS, f"{count} jobs")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_tail(self) -> str:
        return self.log_path.read_text()[-4000:]


def feed(engine: Engine, count: int, first: int) -> None:
    """Queue `count` noop jobs in one transaction, the last with `queue.enqueue` (its NOTIFY)."""
    with transaction(engine) as conn:
        if count > 1:
            rows = [{"kind": "noop", "data": {"seq": first + i}} for i in range(count - 1)]
            conn.execute(insert(jobs), rows)
        queue.enqueue(conn, "noop", {"seq": first + count - 1})


# ---------------------------------------------------------------------------------------------
# 1. Memory


@dataclass(frozen=True)
class Memory:
    rss: int
    uss: int


@dataclass(frozen=True)
class Sample:
    jobs: int
    seconds: float
    parent: Memory
    fork_server: Memory
    children: tuple[Memory, ...]
    child_pids: tuple[int, ...]
    #: Sequential scans of `jobs` so far (PostgreSQL's statistics), when read.
    seq_scans: int | None = None


def memory_of(process: psutil.Process) -> Memory:
    info = process.memory_full_info()
    return Memory(int(info.rss), int(info.uss))


def sample(host: Host, jobs_done: int, began: float, engine: Engine) -> Sample:
    """The memory of the host's parent, its fork server (its oldest child) and its children."""
    parent = psutil.Process(host.pid)
    forked = sorted(parent.children(), key=lambda p: (p.create_time(), p.pid))
    if not forked:
        raise RuntimeError("the host has no fork server")
    return Sample(
        jobs_done,
        time.monotonic() - began,
        memory_of(parent),
        memory_of(forked[0]),
        tuple(memory_of(child) for child in forked[1:]),
        tuple(child.pid for child in forked[1:]),
        table_stats(engine)["seq_scan"] if is_postgres(engine) else None,
    )


def table_stats(engine: Engine) -> dict[str, int]:
    """The `jobs` table's scan and write counters (read without committing: a read-only
    transaction is not counted in `xact_commit`)."""
    with engine.connect() as conn:
        row = conn.execute(
            text(
                "SELECT seq_scan, idx_scan, n_tup_ins, n_tup_upd, n_tup_hot_upd"
                " FROM pg_stat_user_tables WHERE relname = 'jobs'"
            )
        ).one()
    return {key: int(value or 0) for key, value in row._mapping.items()}


@dataclass
class Run:
    """One host's run: its memory samples and, when they were counted, the statements it sent."""

    name: str
    samples: list[Sample] = field(default_factory=list)
    statements: Statements | None = None


def run_jobs(
    name: str,
    url: str,
    engine: Engine,
    workdir: Path,
    total: int,
    every: int,
    *options: str,
    counter: StatementCounter | None = None,
) -> Run:
    """Feed a fresh host `total` noop jobs, `every` at a time, reading its memory after each."""
    progress(f"{name}: {total:,} jobs")
    empty_jobs(engine)
    run = Run(name)
    host = Host(url, workdir, *options)
    try:
        host.wait_for_event("image engine loaded")
        time.sleep(SETTLE_SECONDS)
        began = time.monotonic()
        run.samples.append(sample(host, 0, began, engine))
        if counter is not None:
            counter.begin()
        done = 0
        while done < total:
            chunk = min(every, total - done)
            feed(engine, chunk, done)
            done += chunk
            host.wait_completed(done)
            time.sleep(SETTLE_SECONDS)
            run.samples.append(sample(host, done, began, engine))
            if counter is not None and done == total:
                run.statements = counter.end(chunks=-(-total // every), jobs=total)
            progress(f"  {done:,} jobs, parent RSS {mib(run.samples[-1].parent.rss)} MiB")
    finally:
        host.stop()
    return run


def empty_jobs(engine: Engine) -> None:
    with transaction(engine) as conn:
        conn.execute(text("TRUNCATE jobs" if is_postgres(conn) else "DELETE FROM jobs"))


def slope_per_10k(points: Sequence[tuple[int, int]]) -> float:
    """Least-squares growth of the values per 10,000 jobs."""
    if len(points) < 2:
        return 0.0
    xs = [x for x, _ in points]
    ys = [y for _, y in points]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    num = sum((x - mx) * (y - my) for x, y in points)
    den = sum((x - mx) ** 2 for x in xs)
    return num / den * 10_000


def report_memory(run: Run) -> None:
    samples = run.samples
    last = samples[-1].jobs
    shown = [s for s in samples if s.jobs in REPORTED or s.jobs == last]
    most_children = max(len(s.children) for s in samples)
    scans = samples[0].seq_scans is not None
    headers = ["jobs", "parent RSS", "parent USS", "fork server RSS"]
    headers += [f"child {i + 1} RSS" for i in range(most_children)]
    headers += ["s", *(["seq scans of jobs since the row above"] if scans else [])]
    rows = []
    for s in shown:
        children = [mib(c.rss) for c in s.children]
        children += [""] * (most_children - len(children))
        before = shown[max(0, shown.index(s) - 1)].seq_scans
        step = [f"{(s.seq_scans or 0) - (before or 0):,}"] if scans else []
        rows.append(
            [
                f"{s.jobs:,}",
                mib(s.parent.rss),
                mib(s.parent.uss),
                mib(s.fork_server.rss),
                *children,
                f"{s.seconds:.0f}",
                *step,
            ]
        )
    print_table(f"1. Memory, MiB: {run.name}", headers, rows)
    settled = [s for s in samples if s.jobs >= WARM_UP_JOBS] or samples
    growth = slope_per_10k([(s.jobs, s.parent.rss) for s in settled])
    growth_uss = slope_per_10k([(s.jobs, s.parent.uss) for s in settled])
    first, end = samples[0], samples[-1]
    jobs_per_second = (end.jobs - first.jobs) / (end.seconds - first.seconds)
    print(
        f"   parent: {growth / MIB:+.3f} MiB RSS ({growth_uss / MIB:+.3f} USS) per 10,000 jobs "
        f"(slope over {len(settled)} samples from {settled[0].jobs:,} jobs, every "
        f"{samples[1].jobs - samples[0].jobs:,}); {mib(end.parent.rss - first.parent.rss)} MiB "
        f"from start-up to {end.jobs:,} jobs; {jobs_per_second:,.0f} jobs/s with the readings"
    )
    if first.children and all(s.child_pids == first.child_pids for s in samples):
        kept = [
            slope_per_10k([(s.jobs, s.children[i].rss) for s in settled])
            for i in range(len(first.children))
        ]
        print(
            "   children (the same ones throughout): "
            + ", ".join(f"{k / MIB:+.3f}" for k in kept)
            + " MiB RSS per 10,000 jobs"
        )


# ---------------------------------------------------------------------------------------------
# 2. Statements per job


#: Statement shapes, first match wins: a name and a pattern over the statement's text.
SHAPES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.S))
    for name, pattern in (
        ("BEGIN", r"^BEGIN"),
        ("COMMIT", r"^COMMIT"),
        ("ROLLBACK", r"^ROLLBACK"),
        ("savepoint", r"^(RELEASE )?SAVEPOINT"),
        ("claim", r"^WITH expired AS"),
        ("lease renewal", r"^UPDATE jobs SET lease_expires_at="),
        ("ack", r"^UPDATE jobs SET status=.*finished_at=.*WHERE \(jobs\.id, jobs\.attempt\) IN"),
        ("release (give back)", r"^UPDATE jobs SET status=.*run_at=.*attempt=\(jobs\.attempt -"),
        ("lease expiry sweep", r"^UPDATE jobs SET .*jobs\.lease_expires_at < "),
        ("fenced fail/retry/cancel", r"^UPDATE jobs SET .*WHERE jobs\.id = "),
        ("cancel check", r"^SELECT jobs\.id \s*FROM jobs \s*WHERE jobs\.id IN"),
        ("next due (poll delay)", r"^SELECT min\(jobs\.run_at\)"),
        ("open jobs (--drain)", r"^SELECT count\(\*\) AS count_1 \s*FROM jobs"),
        ("notify", r"pg_notify"),
        ("listener keep-alive", r"^SELECT 1$"),
        ("LISTEN", r"^LISTEN"),
    )
)


def shape_of(statement: str) -> str:
    flat = " ".join(statement.split())
    for name, pattern in SHAPES:
        if pattern.search(flat):
            return name
    return "other: " + " ".join(flat.split()[:6])


#: A statement line of the server's log: `<pid> <role> LOG:  statement: ...` (simple protocol)
#: or `... LOG:  execute <name>: ...` (extended protocol); its continuation lines start with a tab.
LOG_STATEMENT = re.compile(rf"^\d+ {HOST_ROLE} LOG:  (?:statement|execute [^:]*): (.*)$")
#: auto_explain's entry for a statement: this line, then `Query Text: ...` and the plan.
LOG_PLAN = re.compile(rf"^\d+ {HOST_ROLE} LOG:  duration: .* plan:$")
#: A parameter in a plan's condition, `((status)::text = ($1)::text)` (the statement's own text
#: never puts one alone in brackets): a generic plan, made without the values, which then
#: cannot prove a partial index's predicate.
GENERIC = re.compile(r"\(\$\d+\)")


@dataclass(frozen=True)
class Statements:
    """What the host sent over a run, from the server's log and statistics."""

    jobs: int
    shapes: Counter[str]
    xact_commit: int
    tables: dict[str, int]
    #: Plans (auto_explain) that scanned `jobs` whole, by statement shape, and how many of
    #: those were generic plans.
    seq_scans: Counter[str]
    generic_seq_scans: Counter[str]

    @property
    def total(self) -> int:
        return sum(self.shapes.values())

    @property
    def transactions(self) -> int:
        return self.shapes["COMMIT"] + self.shapes["ROLLBACK"]


class StatementCounter:
    """Counts the host role's logged statements and the database's statistics over a span."""

    def __init__(self, server: TemporaryPostgres, admin: Engine, engine: Engine) -> None:
        self.log = server.log
        self.admin = admin
        self.engine = engine
        self._offset = 0
        self._before: dict[str, int] = {}

    def stats(self) -> dict[str, int]:
        """`xact_commit` of the host's database and the `jobs` table's counters."""
        with self.admin.connect() as conn:
            commits = conn.execute(
                text("SELECT xact_commit FROM pg_stat_database WHERE datname = :name"),
                {"name": HOST_DATABASE},
            ).scalar_one()
        return {"xact_commit": int(commits)} | table_stats(self.engine)

    def begin(self) -> None:
        self._offset = self.log.stat().st_size
        self._before = self.stats()

    def end(self, chunks: int, jobs: int) -> Statements:
        size = self.log.stat().st_size
        # Statistics reach the shared counters when a backend goes idle (at most ~10 s later).
        time.sleep(11)
        after = self.stats()
        with self.log.open("rb") as log:
            log.seek(self._offset)
            lines = log.read(size - self._offset).decode(errors="replace").splitlines()
        shapes: Counter[str] = Counter()
        seq_scans: Counter[str] = Counter()
        generic: Counter[str] = Counter()
        entry: list[str] | None = None
        is_plan = False
        for line in [*lines, ""]:
            if entry is not None and line.startswith("\t"):
                entry.append(line[1:])
                continue
            if entry is not None and not is_plan:
                shapes[shape_of("\n".join(entry))] += 1
            elif entry is not None and any("Seq Scan on jobs" in part for part in entry):
                text_and_plan = "\n".join(entry).removeprefix("Query Text: ")
                shape = shape_of(text_and_plan)
                seq_scans[shape] += 1
                generic[shape] += bool(GENERIC.search(text_and_plan))
            entry = None
            if match := LOG_STATEMENT.match(line):
                entry, is_plan = [match.group(1)], False
            elif LOG_PLAN.match(line):
                entry, is_plan = [], True
        delta = {key: after[key] - self._before[key] for key in after}
        # The benchmark's own transactions in that database: one insert per chunk.
        commits = delta.pop("xact_commit") - chunks
        return Statements(jobs, shapes, commits, delta, seq_scans, generic)


def host_url(admin: Engine, database: str, role: str | None = None) -> str:
    url = admin.url.set(database=database)
    if role is not None:
        url = url.set(username=role)
    return url.render_as_string(hide_password=False)


def report_statements(measured: Statements) -> None:
    n = measured.jobs
    order = [
        "claim", "ack", "lease renewal", "release (give back)", "lease expiry sweep",
        "fenced fail/retry/cancel", "cancel check", "next due (poll delay)",
        "open jobs (--drain)", "notify", "listener keep-alive", "LISTEN", "savepoint",
    ]  # fmt: skip
    named = [shape for shape in order if measured.shapes[shape]]
    others = sorted(
        (s for s in measured.shapes if s not in order and s not in ("BEGIN", "COMMIT", "ROLLBACK")),
        key=lambda s: -measured.shapes[s],
    )
    rows = [
        [shape, f"{measured.shapes[shape]:,}", f"{measured.shapes[shape] / n:.4f}"]
        for shape in [*named, *others]
    ]
    work = sum(measured.shapes[s] for s in [*named, *others])
    rows += [
        ["statements other than BEGIN/COMMIT", f"{work:,}", f"{work / n:.4f}"],
        ["BEGIN", f"{measured.shapes['BEGIN']:,}", f"{measured.shapes['BEGIN'] / n:.4f}"],
        ["COMMIT + ROLLBACK (transactions)", f"{measured.transactions:,}", f"{measured.transactions / n:.4f}"],
        ["every statement (round trips)", f"{measured.total:,}", f"{measured.total / n:.4f}"],
    ]  # fmt: skip
    print_table(
        f"2. Statements the host sent over {n:,} noop jobs (PostgreSQL, log_statement = all for "
        "the host's role), per job",
        ["statement", "count", "per job"],
        rows,
    )
    t = measured.tables
    print(
        f"   cross-check, pg_stat_database.xact_commit less the benchmark's inserts: "
        f"{measured.xact_commit:,} ({measured.xact_commit / n:.4f} per job; the log: "
        f"{measured.transactions / n:.4f})\n"
        f"   pg_stat_user_tables for jobs, per job: seq scans {t['seq_scan'] / n:.4f} "
        f"({t['seq_scan']:,} in all), index scans {t['idx_scan'] / n:.4f}, rows inserted "
        f"{t['n_tup_ins'] / n:.4f}, updated {t['n_tup_upd'] / n:.4f} "
        f"(HOT {t['n_tup_hot_upd'] / n:.4f})"
    )
    scans = measured.seq_scans
    print(
        "   plans that scanned jobs whole (auto_explain): "
        + (
            ", ".join(
                f"{shape} {count:,} ({measured.generic_seq_scans[shape]:,} generic)"
                for shape, count in scans.most_common()
            )
            or "none"
        )
    )


# ---------------------------------------------------------------------------------------------
# 3. Plans with a million finished jobs


FILL_POSTGRES = """
INSERT INTO jobs (kind, status, data, attempt, run_at, created_at, finished_at, error)
SELECT 'capture',
       CASE WHEN g % 100 < 95 THEN 'completed' WHEN g % 100 < 99 THEN 'failed'
            ELSE 'cancelled' END,
       jsonb_build_object('build_id', g / 40, 'shard', g % 40, 'count', 15),
       1 + (g % 100 >= 95)::int,
       now() - make_interval(secs => :count - g),
       now() - make_interval(secs => :count - g + 5),
       now() - make_interval(secs => :count - g - 3),
       CASE WHEN g % 100 >= 95 THEN 'worker crashed: SIGKILL' END
FROM generate_series(1, :count) AS g
"""

FILL_SQLITE = """
WITH RECURSIVE seq(g) AS (SELECT 1 UNION ALL SELECT g + 1 FROM seq WHERE g < :count)
INSERT INTO jobs (kind, status, data, attempt, run_at, created_at, finished_at, error)
SELECT 'capture',
       CASE WHEN g % 100 < 95 THEN 'completed' WHEN g % 100 < 99 THEN 'failed'
            ELSE 'cancelled' END,
       json_object('build_id', g / 40, 'shard', g % 40, 'count', 15),
       1 + (g % 100 >= 95),
       strftime('%Y-%m-%d %H:%M:%S.000000', 'now', '-' || (:count - g) || ' seconds'),
       strftime('%Y-%m-%d %H:%M:%S.000000', 'now', '-' || (:count - g + 5) || ' seconds'),
       strftime('%Y-%m-%d %H:%M:%S.000000', 'now', '-' || (:count - g - 3) || ' seconds'),
       CASE WHEN g % 100 >= 95 THEN 'worker crashed: SIGKILL' END
FROM seq
"""


def fill_finished(engine: Engine, finished: int) -> list[queue.Lease]:
    """`finished` ended jobs, then the open ones; the leases of the jobs `PLAN_HOST` runs."""
    empty_jobs(engine)
    with transaction(engine) as conn:
        fill = FILL_POSTGRES if is_postgres(conn) else FILL_SQLITE
        conn.execute(text(fill), {"count": finished})
    with transaction(engine) as conn:
        conn.execute(
            insert(jobs), [{"kind": "capture", "data": {"shard": n}} for n in range(QUEUED_DUE)]
        )
        # Jobs waiting out a retry's backoff: queued, not due.
        for n in range(QUEUED_LATER):
            queue.enqueue(conn, "capture", {"retry": n}, delay_seconds=300 + n)
        for holder, count in ((PLAN_HOST, RUNNING_OURS), ("other-host", RUNNING_THEIRS)):
            claimed = queue.claim(conn, holder, count, LEASE_SECONDS)
            assert len(claimed) == count, "the queued rows above are due"
    with transaction(engine) as conn:
        rows = conn.execute(
            select(jobs.c.id, jobs.c.attempt).where(
                jobs.c.status == "running", jobs.c.locked_by == PLAN_HOST
            )
        ).all()
        if is_postgres(conn):
            conn.execute(text("ANALYZE jobs"))
    return [queue.Lease(row.id, row.attempt, PLAN_HOST) for row in rows]


@dataclass(frozen=True)
class Probe:
    """A statement the host runs, named with when it runs, and the call that sends it."""

    label: str
    when: str
    call: Callable[[Connection], object]


def probes(leases: Sequence[queue.Lease]) -> list[Probe]:
    ids = [lease.job_id for lease in leases]
    return [
        Probe(
            "claim, 2 slots",
            "each claim",
            lambda c: queue.claim(c, PLAN_HOST, 2, LEASE_SECONDS, child_pids=[101, 102]),
        ),
        Probe("ack_all, 2 jobs", "each claim (acks ride with it)", lambda c: queue.ack_all(c, leases[:2])),
        Probe("renew, 1 job", "a quarter lease, per running job", lambda c: queue.renew(c, leases[0], LEASE_SECONDS)),
        Probe(f"renew_all, {len(leases)} held", "held-ahead jobs, a quarter lease", lambda c: queue.renew_all(c, leases, LEASE_SECONDS)),
        Probe(f"release_all, {len(leases)} held", "giving back held jobs", lambda c: queue.release_all(c, leases)),
        Probe("expire_leases", "every quarter lease", queue.expire_leases),
        Probe(f"cancel_requested, {len(ids)} ids", "every 2 s while jobs run", lambda c: queue.cancel_requested(c, ids)),
        Probe("seconds_until_next_due", "after a short claim (each idle poll)", queue.seconds_until_next_due),
        Probe("open_job_count", "--drain: after a claim found nothing", queue.open_job_count),
        Probe("open_jobs_by_kind", "each /metrics scrape (queue depth)", queue.open_jobs_by_kind),
        Probe("status: read_status", "`status` command (monitoring)", read_status),
    ]  # fmt: skip


def captured(engine: Engine, call: Callable[[Connection], object]) -> list[tuple[str, Any]]:
    """The statements (and parameters) `call` sends, run in a transaction rolled back."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if not statement.startswith(("BEGIN", "SAVEPOINT", "RELEASE SAVEPOINT")):
            sent.append((statement, parameters))

    with engine.connect() as conn, conn.begin() as trans:
        event.listen(conn, "before_cursor_execute", record)
        call(conn)
        event.remove(conn, "before_cursor_execute", record)
        trans.rollback()
    return sent


@contextmanager
def rolled_back(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn, conn.begin() as trans:
        yield conn
        trans.rollback()


def plan_of(engine: Engine, statement: str, parameters: Any) -> list[str]:
    with rolled_back(engine) as conn:
        if is_postgres(conn):
            rows = conn.exec_driver_sql(f"EXPLAIN (ANALYZE, BUFFERS) {statement}", parameters)
            return [str(row[0]) for row in rows]
        rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
        depth: dict[int, int] = {0: 0}
        lines = []
        for node, parent, _unused, detail in rows:
            depth[node] = depth.get(parent, 0) + 1
            lines.append("  " * (depth[node] - 1) + str(detail))
        return lines


def time_of(engine: Engine, statement: str, parameters: Any) -> float:
    """Median seconds of the statement, each run in its own rolled-back transaction."""
    times = []
    for _ in range(PLAN_RUNS):
        with rolled_back(engine) as conn:
            began = time.perf_counter()
            result = conn.exec_driver_sql(statement, parameters)
            if result.returns_rows:
                result.all()
            times.append(time.perf_counter() - began)
    return statistics.median(times)


#: A plan that reads `jobs` whole: a sequential scan on PostgreSQL; on SQLite a SCAN of the
#: table or of an index other than the partial ones (which hold open jobs only), or a SEARCH
#: of the table on no index at all.
WHOLE_TABLE = re.compile(
    r"Seq Scan on jobs|^\s*SCAN jobs(?! USING (?:COVERING )?INDEX ix_jobs_(?:queued_run_at|running_lease))"
    r"|^\s*SEARCH jobs$"
)


def reads_whole_table(plan: Sequence[str]) -> bool:
    return any(WHOLE_TABLE.search(line) for line in plan)


def report_plans(name: str, engine: Engine, finished: int) -> list[tuple[str, str, float, bool]]:
    """Print the plan and time of each probe's statements; (label, when, seconds, whole-table)."""
    progress(f"plans on {name}: filling {finished:,} finished jobs")
    began = time.monotonic()
    leases = fill_finished(engine, finished)
    progress(f"  filled in {time.monotonic() - began:.0f} s")
    print(
        f"\n3. Plans on {name}: {finished:,} finished jobs, {QUEUED_DUE:,} queued and due, "
        f"{QUEUED_LATER} queued for later, {RUNNING_OURS + RUNNING_THEIRS} running"
        + (" (after ANALYZE)" if is_postgres(engine) else " (no ANALYZE, as the host runs it)")
    )
    summary = []
    for probe in probes(leases):
        for index, (statement, parameters) in enumerate(captured(engine, probe.call)):
            label = probe.label + (f" [{index + 1}]" if index else "")
            plan = plan_of(engine, statement, parameters)
            seconds = time_of(engine, statement, parameters)
            whole = reads_whole_table(plan)
            summary.append((label, probe.when, seconds, whole))
            verdict = "READS THE WHOLE TABLE" if whole else "index only, no scan of the table"
            print(f"\n  {label} ({probe.when}): {seconds * 1000:.3f} ms median; {verdict}")
            print(f"    {' '.join(statement.split())[:300]}")
            print("\n".join(f"    | {line}" for line in plan))
    print_table(
        f"3. Summary, {name}, {finished:,} finished jobs: median of {PLAN_RUNS} runs",
        ["statement", "when the host runs it", "ms", "plan"],
        [
            [label, when, f"{seconds * 1000:.3f}", "WHOLE TABLE" if whole else "index"]
            for label, when, seconds, whole in summary
        ],
    )
    claim = next(s for s in summary if s[0].startswith("claim"))
    print(f"   the claim is an index scan: {'yes' if not claim[3] else 'NO'}")
    return summary


# ---------------------------------------------------------------------------------------------
# 4. Where the parent's memory goes (tracemalloc)


def trace_parent(url: str, engine: Engine, workdir: Path, total: int, every: int) -> None:
    """Where the parent's memory goes: tracing from the first chunk on, readings halfway and at
    `total` jobs; what the second half added is printed by line, and objects by type."""
    progress(f"traced parent: {total:,} jobs")
    folder = workdir / "trace"
    folder.mkdir()
    empty_jobs(engine)
    host = Host(url, workdir, trace_folder=folder)
    readings = itertools.count(1)

    def reading() -> tuple[Path, Counter[str]]:
        number = next(readings)
        time.sleep(SETTLE_SECONDS)
        host.process.send_signal(signal.SIGUSR1)
        objects = folder / f"objects-{number}.json"
        host.wait(objects.exists, 120, f"reading {number}")
        return folder / f"snapshot-{number}.pickle", Counter(json.loads(objects.read_text()))

    def run_to(count: int, done: int) -> int:
        while done < count:
            chunk = min(every, count - done)
            feed(engine, chunk, done)
            done += chunk
            host.wait_completed(done)
            progress(f"  {done:,} jobs")
        return done

    try:
        host.wait_for_event("image engine loaded")
        done = run_to(every, 0)
        _, start_objects = reading()
        halfway = every + (total - every) // 2
        done = run_to(halfway, done)
        middle, middle_objects = reading()
        done = run_to(total, done)
        end, end_objects = reading()
    finally:
        host.stop()
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap>"),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap_external>"),
    ]
    first = tracemalloc.Snapshot.load(str(middle)).filter_traces(ignore)
    last = tracemalloc.Snapshot.load(str(end)).filter_traces(ignore)
    grown = last.compare_to(first, "lineno")
    size = sum(stat.size for stat in last.statistics("filename"))
    print_table(
        f"4. The traced parent (tracing from {every:,} jobs): what is still allocated at "
        f"{halfway:,} and at {done:,} jobs, by line ({size / MIB:.3f} MiB traced at the end)",
        ["allocated at", f"KiB at {done:,}", "KiB change", "blocks change"],
        [
            [
                str(stat.traceback[0]),
                f"{stat.size / 1024:.1f}",
                f"{stat.size_diff / 1024:+.1f}",
                f"{stat.count_diff:+,}",
            ]
            for stat in grown[:15]
        ],
    )
    traces = last.compare_to(first, "traceback")
    for stat in grown[:3]:
        if stat.size_diff <= 0:
            break
        # Tracebacks run oldest frame first; a "lineno" statistic holds the most recent one.
        match = next((t for t in traces if t.traceback[-1] == stat.traceback[-1]), None)
        if match is not None:
            print(f"\n   {match.size_diff / 1024:+.1f} KiB, the largest growth through:")
            print(
                "\n".join(f"     {line}" for line in match.traceback.format(most_recent_first=True))
            )
    print_table(
        "   live objects (gc-tracked) by type",
        ["type", f"at {every:,}", f"at {halfway:,}", f"at {done:,}"],
        [
            [kind, f"{start_objects[kind]:,}", f"{middle_objects[kind]:,}", f"{count:,}"]
            for kind, count in sorted(
                end_objects.items(), key=lambda item: start_objects[item[0]] - item[1]
            )[:12]
        ],
    )


# ---------------------------------------------------------------------------------------------


def start_postgres() -> tuple[TemporaryPostgres, Engine]:
    """The throwaway server with the host's role (its statements logged) and its database."""
    server = TemporaryPostgres().start()
    admin = connect(server.url)
    with admin.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        conn.exec_driver_sql("ALTER SYSTEM SET log_line_prefix = '%%p %%u '")
        conn.exec_driver_sql("SELECT pg_reload_conf()")
        conn.exec_driver_sql(f"CREATE ROLE {HOST_ROLE} LOGIN SUPERUSER")
        conn.exec_driver_sql(f"CREATE DATABASE {HOST_DATABASE}")
    return server, admin


def log_host_statements(admin: Engine, on: bool) -> None:
    """Turn the host role's statement logging, and auto_explain's plan of each statement, on or
    off (for its next connections)."""
    settings = {
        "log_statement": "all",
        "session_preload_libraries": "auto_explain",
        "auto_explain.log_min_duration": "0",
    }
    with admin.connect() as conn:
        conn.execution_options(isolation_level="AUTOCOMMIT")
        for name, value in settings.items():
            change = f"SET {name} = '{value}'" if on else f"RESET {name}"
            conn.exec_driver_sql(f"ALTER ROLE {HOST_ROLE} {change}")


def measure_memory(
    args: argparse.Namespace,
    server: TemporaryPostgres,
    admin: Engine,
    pg: Engine,
    sqlite: Engine,
    workdir: Path,
) -> None:
    """Sections 1 and 2: the PostgreSQL runs (statements logged in the first), then SQLite's;
    a run of 0 jobs is left out."""
    pg_url = host_url(admin, HOST_DATABASE, HOST_ROLE)
    runs: list[Run] = []
    if args.jobs:
        log_host_statements(admin, True)
        runs.append(
            run_jobs(
                "PostgreSQL, children recycled after ~500 jobs (the default)",
                pg_url, pg, workdir, args.jobs, args.every,
                counter=StatementCounter(server, admin, pg),
            )
        )  # fmt: skip
        log_host_statements(admin, False)
        runs.append(
            run_jobs(
                "PostgreSQL, the same 2 children throughout",
                pg_url, pg, workdir, args.jobs, args.every,
                "--max-jobs-per-child", str(2 * args.jobs),
            )
        )  # fmt: skip
    if args.sqlite_jobs:
        runs.append(
            run_jobs(
                "SQLite, children recycled after ~500 jobs (the default)",
                str(sqlite.url), sqlite, workdir, args.sqlite_jobs, args.every,
            )
        )  # fmt: skip
    for run in runs:
        report_memory(run)
    for run in runs:
        if run.statements is not None:
            report_statements(run.statements)
    sys.stdout.flush()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs of each PostgreSQL run")
    parser.add_argument("--sqlite-jobs", type=int, default=20_000, help="jobs of the SQLite run")
    parser.add_argument("--every", type=int, default=5_000, help="jobs between memory readings")
    parser.add_argument("--rows", type=int, default=1_000_000, help="finished jobs for the plans")
    parser.add_argument("--sqlite-rows", type=int, default=1_000_000)
    parser.add_argument(
        "--trace-jobs", type=int, default=0, help="jobs of the traced parent (0: no trace)"
    )
    parser.add_argument(
        "--only", choices=("memory", "plans", "trace"), help="run one part (default: all)"
    )
    args = parser.parse_args(argv)
    began = time.monotonic()
    server, admin = start_postgres()
    try:
        with tempfile.TemporaryDirectory(prefix="growth-bench-") as folder:
            workdir = Path(folder)
            pg_url = host_url(admin, HOST_DATABASE, HOST_ROLE)
            sqlite_url = f"sqlite:///{workdir / 'growth.db'}"
            pg = connect(host_url(admin, HOST_DATABASE))
            sqlite = connect(sqlite_url)
            try:
                for engine in (pg, sqlite):
                    upgrade(engine)
                with pg.connect() as conn:
                    version = conn.execute(text("SHOW server_version")).scalar_one()
                print(
                    f"Environment: {os.cpu_count()} CPUs, PostgreSQL {version} (temporary, "
                    f"fsync off), SQLite {sqlite3.sqlite_version} (WAL file), "
                    f"Python {platform.python_version()}"
                )
                if args.only in (None, "memory"):
                    measure_memory(args, server, admin, pg, sqlite, workdir)
                if args.only in (None, "plans"):
                    report_plans("PostgreSQL", pg, args.rows)
                    report_plans("SQLite", sqlite, args.sqlite_rows)
                    sys.stdout.flush()
                if args.trace_jobs and args.only in (None, "trace"):
                    trace_parent(pg_url, pg, workdir, args.trace_jobs, args.every)
            finally:
                pg.dispose()
                sqlite.dispose()
    finally:
        admin.dispose()
        server.stop()
    print(f"\n(total {time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    main()
