"""Byte-identical snapshots settled end to end by one host, on SQLite and on PostgreSQL.

Run ``python benchmarks/settle_bench.py [--snapshots 1000 10000] [--runs 3]``. The common case of
a branch that changed nothing visible: every image of the branch build has its baseline's
bytes, so the child settles it ``unchanged`` from the SHA-256 without decoding. For each
database (a SQLite file in a temporary folder; a throwaway PostgreSQL from
``tests.postgres_server``, fsync off, a fresh database per size) and each size N:

1. N distinct PNG files are written: the 1280x800 page of ``diff_bench`` (zlib level 6, about
   125 KiB), each with a ``tEXt`` chunk naming its number, so that every file has its own
   SHA-256 and is stored, hashed and looked up on its own as real screenshots are;
2. ``migrate``, then a baseline build of the N files on ``main``, drained by ``run --drain`` (its
   snapshots are ``new``, each fully decoded): set-up, not timed, but its ``enqueue-build`` is
   reported (hashing and storing N files, then queueing);
3. ``--runs`` times: the same files as a build of branch ``feature`` (``enqueue-build``, timed:
   hashing N files already stored, reading their baselines, queueing), then ``run --drain``
   (timed whole: start-up, the drain, the report and the exit).

The window is the one ``diff_bench.bench_host`` measures: from the branch build's first event
in the host's JSON log (``capture prepared``: a job claimed, its work begun) to its ``build
finished``, both from the log's timestamps (microseconds); snapshots/s is N over that window.
The report is written after the build's end commits, so it is outside the window and reported
on its own: ``build finished`` to ``report written``. Peak RSS is each process's high-water mark
(``VmHWM`` of ``/proc/PID/status``), sampled every 50 ms over the host's process tree (psutil):
the parent, and the largest of the fork server and children. Memory is flat when the 10,000 row
matches the 1,000 row.

Every cell is the median of the runs (the machine is shared); the branch build is checked to have
N snapshots, all ``unchanged``. ``--profile DIR`` runs each timed ``run --drain`` under cProfile
(``python -m cProfile -o DIR/parent-DB-N-RUN.prof -m supervisor run --drain``), which slows it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import psutil  # noqa: E402
from sqlalchemy import create_engine, text  # noqa: E402
from sqlalchemy.engine import make_url  # noqa: E402

from benchmarks.diff_bench import page  # noqa: E402
from tests.postgres_server import TemporaryPostgres  # noqa: E402

DATABASES = ("sqlite", "postgres")
#: How often the host's processes are looked at for their memory's high-water mark.
SAMPLE_SECONDS = 0.05
MIB = 2**20


@dataclass(frozen=True)
class Measured:
    """One command: its wall time, its log, and the peak RSS of its process and descendants."""

    seconds: float
    #: CPU time of the process and of every descendant it reaped (user and system).
    cpu_seconds: float
    log: str
    parent_peak: int
    children_peak: int
    children: int


@dataclass(frozen=True)
class Run:
    """One branch build settled: what each column of the table shows."""

    enqueue_seconds: float
    window_seconds: float
    report_seconds: float
    run_seconds: float
    run_cpu_seconds: float
    shards: int
    parent_peak: int
    children_peak: int
    enqueue_peak: int


def with_text_chunk(png: bytes, label: str) -> bytes:
    """`png` with a `tEXt` chunk before its `IEND`: the same picture, other bytes (PNG
    specification, sections 5.3 and 11.3.4.3: length, type, data, CRC of type and data)."""
    data = b"Comment\0" + label.encode("latin-1")
    chunk = struct.pack(">I", len(data)) + b"tEXt" + data
    chunk += struct.pack(">I", zlib.crc32(b"tEXt" + data) & 0xFFFFFFFF)
    iend = png.rindex(b"IEND") - 4
    return png[:iend] + chunk + png[iend:]


def write_images(folder: Path, count: int) -> None:
    """`count` PNGs of one page under `folder`, each with bytes of its own."""
    folder.mkdir(parents=True)
    png = page(1280, 800, variant=False).pngsave_buffer(compression=6)
    for index in range(count):
        (folder / f"story-{index:05d}.png").write_bytes(with_text_chunk(png, f"story {index}"))


def high_water_mark(process: psutil.Process) -> int:
    """The most resident memory `process` has held so far, in bytes (Linux `VmHWM`)."""
    try:
        status = Path(f"/proc/{process.pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def measured(command: Sequence[str], log_path: Path) -> Measured:
    """Run `command` with its output in `log_path`; its time and its tree's peak memory."""
    peaks: dict[int, int] = {}
    env = {**os.environ, "PYTHONPATH": str(REPO), "STORYSHELF_LOG_LEVEL": "info"}
    start = time.perf_counter()
    with log_path.open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        root = psutil.Process(process.pid)
        done = threading.Event()

        def sample() -> None:
            while not done.wait(SAMPLE_SECONDS):
                try:
                    tree = [root, *root.children(recursive=True)]
                except psutil.NoSuchProcess:
                    return
                for member in tree:
                    peaks[member.pid] = max(peaks.get(member.pid, 0), high_water_mark(member))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        # wait4: the exit and the CPU time of the process and of the descendants it reaped
        # (the host reaps its fork server and children), which a loaded machine does not inflate
        # as it does wall time.
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = code = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        done.set()
        sampler.join()
    log = log_path.read_text()
    if code != 0:
        raise RuntimeError(f"{' '.join(command)} exited {code}:\n{log[-3000:]}")
    others = [peak for pid, peak in peaks.items() if pid != process.pid]
    cpu = usage.ru_utime + usage.ru_stime
    return Measured(
        seconds, cpu, log, peaks.get(process.pid, 0), max(others, default=0), len(others)
    )


def events(log: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.splitlines() if line.startswith("{")]


def moment(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(event["timestamp"])


def build_times(log: str, build_id: int) -> tuple[float, float]:
    """The build's window (its first event to `build finished`) and its report's writing
    (`build finished` to `report written`), in seconds, from the host's log."""
    mine = [event for event in events(log) if event.get("build_id") == build_id]
    start = min(moment(event) for event in mine)
    finished = moment(next(event for event in mine if event["event"] == "build finished"))
    written = moment(next(event for event in mine if event["event"] == "report written"))
    return (finished - start).total_seconds(), (written - finished).total_seconds()


class Case:
    """One database and one size: the files, the database, and the commands on them."""

    def __init__(
        self, folder: Path, url: str, count: int, options: argparse.Namespace, label: str
    ) -> None:
        self.folder = folder
        self.url = url
        self.count = count
        self.options = options
        self.label = label
        self.images = folder / "images"
        self.artifacts = folder / "artifacts"

    def supervisor(self, *args: str, profile: Path | None = None) -> Measured:
        where = ["--database-url", self.url]
        if args[0] != "migrate":
            where += ["--artifacts", str(self.artifacts)]
        python = [sys.executable]
        if profile is not None:
            python += ["-m", "cProfile", "-o", str(profile)]
        log_path = self.folder / f"{args[0]}-{time.monotonic_ns()}.log"
        return measured([*python, "-m", "supervisor", *args, *where], log_path)

    def enqueue(self, branch: str) -> tuple[Measured, dict[str, Any]]:
        shards = [] if self.options.shards is None else ["--shards", str(self.options.shards)]
        done = self.supervisor(
            "enqueue-build",
            "--project",
            "bench",
            "--branch",
            branch,
            "--images",
            str(self.images),
            "--json",
            *shards,
        )
        queued = next(
            json.loads(line) for line in done.log.splitlines() if line.startswith('{"build_id"')
        )
        return done, queued

    def drain(self, profile: Path | None = None) -> Measured:
        concurrency = self.options.concurrency
        extra = [] if concurrency is None else ["--concurrency", str(concurrency)]
        return self.supervisor("run", "--drain", *extra, profile=profile)

    def set_up(self) -> float:
        """The files, the schema and the baseline build; the baseline's enqueue time."""
        write_images(self.images, self.count)
        self.supervisor("migrate")
        baseline, _ = self.enqueue("main")
        self.drain()
        return baseline.seconds

    def branch_build(self, index: int) -> Run:
        enqueued, queued = self.enqueue("feature")
        build_id = int(queued["build_id"])
        profile = None
        if self.options.profile is not None:
            profile = self.options.profile / f"parent-{self.label}-{self.count}-{index}.prof"
        run = self.drain(profile)
        window, report = build_times(run.log, build_id)
        self.check(build_id)
        return Run(
            enqueue_seconds=enqueued.seconds,
            window_seconds=window,
            report_seconds=report,
            run_seconds=run.seconds,
            run_cpu_seconds=run.cpu_seconds,
            shards=int(queued["shards"]),
            parent_peak=run.parent_peak,
            children_peak=run.children_peak,
            enqueue_peak=enqueued.parent_peak,
        )

    def check(self, build_id: int) -> None:
        """The build has every snapshot, all unchanged, and its report: else nothing was timed."""
        engine = create_engine(self.url)
        try:
            with engine.connect() as conn:
                row = conn.execute(
                    text("SELECT status, unchanged, report_url FROM builds WHERE id = :id"),
                    {"id": build_id},
                ).one()
        finally:
            engine.dispose()
        if row.status != "passed" or row.unchanged != self.count or row.report_url is None:
            raise RuntimeError(f"build {build_id}: {row.status}, {row.unchanged} unchanged")


@contextmanager
def postgres(given: str | None) -> Iterator[str]:
    """The URL of a PostgreSQL server: `given`, or a throwaway one removed at the end."""
    if given is not None:
        yield given
        return
    server = TemporaryPostgres().start()
    try:
        yield server.url
    finally:
        server.stop()


def fresh_database(server_url: str, name: str) -> str:
    """A new, empty database on the server of `server_url`; its URL."""
    engine = create_engine(server_url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def mib(value: float) -> str:
    return f"{value / MIB:.0f}"


def print_row(label: str, count: int, baseline_enqueue: float, runs: list[Run]) -> None:
    def median(field: str) -> float:
        return float(statistics.median(getattr(run, field) for run in runs))

    window = median("window_seconds")
    rates = sorted(count / run.window_seconds for run in runs)
    print(
        f"{label:<9} {count:>7} {runs[0].shards:>6} {count / window:>11.0f}"
        f" {rates[0]:>6.0f}-{rates[-1]:<6.0f} {window:>8.2f} {baseline_enqueue:>9.2f}"
        f" {median('enqueue_seconds'):>9.2f} {median('report_seconds'):>8.2f}"
        f" {median('run_seconds'):>7.2f} {median('run_cpu_seconds'):>7.2f}"
        f" {mib(median('parent_peak')):>7}"
        f" {mib(median('children_peak')):>7} {mib(median('enqueue_peak')):>8}",
        flush=True,
    )


def header() -> None:
    print(
        f"{'database':<9} {'snaps':>7} {'shards':>6} {'snapshots/s':>11} {'min-max':>13}"
        f" {'window s':>8} {'enq base':>9} {'enq branch':>9} {'report s':>8} {'run s':>7}"
        f" {'run cpu':>7}"
        f" {'parent':>7} {'child':>7} {'enqueue':>8}"
    )
    print(
        f"{'':<9} {'':>7} {'':>6} {'':>11} {'':>13} {'':>8} {'s':>9} {'s':>9} {'':>8} {'':>7}"
        f" {'s':>7}"
        f" {'MiB':>7} {'MiB':>7} {'MiB':>8}"
    )


def measure(database: str, server_url: str | None, options: argparse.Namespace) -> None:
    for count in options.snapshots:
        with tempfile.TemporaryDirectory(prefix="settle-bench-") as temporary:
            folder = Path(temporary)
            if database == "sqlite":
                url = f"sqlite:///{folder / 'bench.sqlite'}"
            else:
                assert server_url is not None
                url = fresh_database(server_url, f"settle_{count}")
            case = Case(folder, url, count, options, database)
            baseline_enqueue = case.set_up()
            runs = [case.branch_build(index) for index in range(options.runs)]
            print_row(database, count, baseline_enqueue, runs)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--snapshots", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--runs", type=int, default=3, help="branch builds per cell (median)")
    parser.add_argument("--databases", nargs="+", choices=DATABASES, default=list(DATABASES))
    parser.add_argument("--shards", type=int, help="enqueue-build --shards (default: its own)")
    parser.add_argument("--concurrency", type=int, help="run --concurrency (default: its own)")
    parser.add_argument("--postgres-url", help="a server to use instead of a throwaway one")
    parser.add_argument("--profile", type=Path, help="folder for cProfile output of each run")
    options = parser.parse_args(argv)
    if options.profile is not None:
        options.profile.mkdir(parents=True, exist_ok=True)
    print(
        "byte-identical snapshots settled end to end by one host; medians of"
        f" {options.runs} runs; {os.cpu_count()} CPUs"
    )
    header()
    for database in options.databases:
        if database == "postgres":
            with postgres(options.postgres_url) as server_url:
                measure(database, server_url, options)
        else:
            measure(database, None, options)


if __name__ == "__main__":
    main()
