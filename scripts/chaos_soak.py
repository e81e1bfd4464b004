"""The chaos soak: several hosts share one PostgreSQL while their children, the hosts themselves
and the database are killed at random; afterwards, the promises of DESIGN section 3 are checked.

Each path (a crash, a hang, a lost lease, a drain, a database restart, a cancel) has its own
test; only hosts that share a database while those faults overlap show whether the paths
compose: whether every job still ends exactly once, every shard's results are recorded exactly
once, and the verdicts equal those of a calm run of the same workload.

A run: generate the workload (screenshot-like PNGs, drawn in pure Python like
`supervisor.commands.demo_images`), run it calmly once with one host for the reference results, then run
rounds until `--minutes` have passed. A round gets a fresh database and artifacts folder,
captures the accepted `main` build calmly (the baselines), enqueues the other builds, starts the
hosts and injects faults until its builds are done or the time is up, lets the hosts finish,
stops them with SIGTERM and checks the invariants. The fault schedule (which fault, how long
after the last) is a function of `--seed`; what a fault hits depends on what runs at that moment.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

import psutil
from sqlalchemy import Connection, Engine, func, select, text

from supervisor.builds.cancel import cancel_build
from supervisor.builds.crash_failure import crash_error
from supervisor.builds.uploads import enqueue_build, store_images
from supervisor.commands.demo_images import Canvas
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, transaction
from supervisor.db.migrate import upgrade
from supervisor.db.tables import builds, capture_shards, jobs, snapshots
from supervisor.logs import configure as configure_logging
from tests.postgres_server import TemporaryPostgres

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "chaos"
T = TypeVar("T")

# -- the workload ----------------------------------------------------------------------------

#: Small screenshots: the soak is about the host's paths, not about the diff's speed.
WIDTH, HEIGHT = 320, 240
Variant = Literal["unchanged", "changed", "new", "truncated", "garbage"]
#: How often each variant appears in a build; the damaged ones must fail only their snapshot.
VARIANT_WEIGHTS: dict[Variant, int] = {
    "unchanged": 50,
    "changed": 25,
    "new": 12,
    "truncated": 7,
    "garbage": 6,
}
#: Distinct changes per story, so that builds share images as real branches do.
CHANGES_PER_STORY = 8
PALETTE = ((37, 99, 235), (22, 163, 74), (220, 38, 38), (147, 51, 234), (234, 88, 12))


@dataclass(frozen=True)
class PlannedBuild:
    """One upload of the workload: a folder of PNGs and the names whose image is damaged."""

    branch: str
    commit: str
    folder: Path
    damaged: frozenset[str]


@dataclass(frozen=True)
class Workload:
    baseline: PlannedBuild
    builds: tuple[PlannedBuild, ...]
    shards: int


def story_name(index: int) -> str:
    return f"story/{index:03d}"


def draw_story(index: int, change: int | None) -> bytes:
    """Story `index` as a PNG: a header, cards and text placed by the index; `change` adds a
    patch (a moved or recoloured element) the way a branch changes a component."""
    layout = random.Random(index)
    canvas = Canvas(WIDTH, HEIGHT, (248, 250, 252))
    canvas.rect(0, 0, WIDTH, 28, PALETTE[index % len(PALETTE)])
    canvas.text(10, 9, f"STORY {index}", (255, 255, 255))
    for _ in range(3):
        x, y = layout.randrange(8, WIDTH - 110), layout.randrange(36, HEIGHT - 60)
        canvas.box(x, y, 100, 50, (255, 255, 255), (226, 232, 240))
        canvas.text(x + 8, y + 8, "CARD TEXT", (15, 23, 42))
    if change is not None:
        patch = random.Random(index * 1000 + change)
        x, y = patch.randrange(0, WIDTH - 40), patch.randrange(0, HEIGHT - 20)
        colour = (patch.randrange(256), patch.randrange(256), patch.randrange(256))
        canvas.rounded(x, y, patch.randrange(6, 40), patch.randrange(4, 20), 3, colour)
    return canvas.png()


def make_workload(folder: Path, *, builds: int, snapshots: int, shards: int, seed: int) -> Workload:
    """Write the baseline and `builds` branch uploads under `folder`, the mix drawn from `seed`."""
    choose = random.Random(seed)
    drawn: dict[tuple[int, int | None], bytes] = {}

    def image(index: int, change: int | None) -> bytes:
        if (index, change) not in drawn:
            drawn[index, change] = draw_story(index, change)
        return drawn[index, change]

    baseline = _write_upload(
        folder / "main", "main", "main", {story_name(i): image(i, None) for i in range(snapshots)}
    )
    planned = []
    variants, weights = zip(*VARIANT_WEIGHTS.items(), strict=True)
    for number in range(builds):
        files: dict[str, bytes] = {}
        damaged = set()
        for index in range(snapshots):
            variant: Variant = choose.choices(variants, weights)[0]
            change = choose.randrange(CHANGES_PER_STORY)
            name = story_name(index)
            if variant == "unchanged":
                files[name] = image(index, None)
            elif variant == "changed":
                files[name] = image(index, change)
            elif variant == "new":
                files[f"new/{number:03d}-{index:03d}"] = image(snapshots + index, None)
            elif variant == "truncated":
                whole = image(index, change)
                files[name] = whole[: len(whole) // 2]
                damaged.add(name)
            else:
                files[name] = b"\x89PNG\r\n\x1a\n" + choose.randbytes(2000)
                damaged.add(name)
        commit = f"chaos-{number:03d}"
        planned.append(
            _write_upload(folder / commit, f"feature-{number:03d}", commit, files, damaged)
        )
    return Workload(baseline, tuple(planned), shards)


def _write_upload(
    folder: Path, branch: str, commit: str, files: dict[str, bytes], damaged: set[str] | None = None
) -> PlannedBuild:
    for name, data in files.items():
        path = folder / f"{name}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return PlannedBuild(branch, commit, folder, frozenset(damaged or ()))


# -- databases, hosts ------------------------------------------------------------------------


def retrying(engine: Engine, step: Callable[[Connection], T], timeout: float = 60.0) -> T:
    """Run `step` in a transaction, again while the database restarts (a fault we inject)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with transaction(engine) as conn:
                return step(conn)
        except DatabaseUnavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def create_database(server: TemporaryPostgres, name: str) -> str:
    """A new, migrated database on `server`: each round starts from nothing."""
    admin = connect(server.url).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    url = server.url.rsplit("/", 1)[0] + f"/{name}"
    engine = connect(url)
    upgrade(engine)
    engine.dispose()
    return url


def _no_core_dumps() -> None:
    """Injected SIGSEGVs must not fill the disk with core files (children inherit the limit)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass
class HostRun:
    """One `python -m supervisor run` subprocess and how the soak ended it."""

    process: subprocess.Popen[bytes]
    log_path: Path
    #: "sigkill", "sigterm" (must exit 0), "died" (unasked: a bug), or None while it runs.
    ended_by: str | None = None
    exit_code: int | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def started(self) -> bool:
        """It forked its fork server, so its signal handlers are set: a SIGTERM must drain it.
        (Before that, the interpreter is still starting and SIGTERM's default action applies.)"""
        try:
            return bool(psutil.Process(self.pid).children())
        except psutil.Error:
            return False

    def wait_started(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.started and self.process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)

    def events(self) -> Iterator[dict[str, Any]]:
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event


def start_host(url: str, artifacts: Path, logs: Path, options: list[str]) -> HostRun:
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"host-{time.monotonic_ns()}.log"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "STORYSHELF_LOG_LEVEL": "info"}
    command = [
        sys.executable, "-m", "supervisor", "run",
        "--database-url", url, "--artifacts", str(artifacts), *options,
    ]  # fmt: skip
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            preexec_fn=_no_core_dumps,
        )
    return HostRun(process, log_path)


def run_to_end(url: str, artifacts: Path, logs: Path, options: list[str]) -> None:
    """One calm `--drain` host until the queue is empty."""
    host = start_host(url, artifacts, logs, [*options, "--drain"])
    code = host.process.wait(timeout=1800)
    if code != 0:
        raise RuntimeError(f"calm host exited {code}; see {host.log_path}")


def upload(engine: Engine, artifacts: Path, build: PlannedBuild, shards: int) -> int:
    images = store_images(artifacts, build.folder)

    def enqueue(conn: Connection) -> int:
        queued = enqueue_build(
            conn,
            project=PROJECT,
            branch=build.branch,
            images=images,
            shards=shards,
            commit=build.commit,
        )
        return queued.build_id

    return retrying(engine, enqueue)


def prepare(url: str, artifacts: Path, logs: Path, workload: Workload, options: list[str]) -> None:
    """Capture the `main` build calmly (it becomes the baselines), then queue the others."""
    engine = connect(url)
    try:
        upload(engine, artifacts, workload.baseline, workload.shards)
        run_to_end(url, artifacts, logs, options)
        status = retrying(engine, lambda conn: conn.execute(select(builds.c.status)).scalar_one())
        if status != "passed":
            raise RuntimeError(f"the baseline build ended {status}, not passed")
        for build in workload.builds:
            upload(engine, artifacts, build, workload.shards)
    finally:
        engine.dispose()


# -- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BuildResult:
    """A build's outcome, keyed by names, so that runs on different databases compare."""

    status: str
    counts: tuple[int, int, int, int]
    shards: dict[int, str]
    #: name -> (status, diff_pixels, shard index)
    snapshots: dict[str, tuple[str, int | None, int]]


def read_results(conn: Connection) -> dict[str, BuildResult]:
    """Every build's result by commit."""
    shard_index = {row.id: row._mapping["index"] for row in conn.execute(select(capture_shards))}
    shards: dict[int, dict[int, str]] = defaultdict(dict)
    for row in conn.execute(select(capture_shards)):
        shards[row.build_id][row._mapping["index"]] = row.status
    shots: dict[int, dict[str, tuple[str, int | None, int]]] = defaultdict(dict)
    for row in conn.execute(select(snapshots)):
        shots[row.build_id][row.name] = (row.status, row.diff_pixels, shard_index[row.shard_id])
    return {
        row.commit: BuildResult(
            row.status,
            (row.new, row.unchanged, row.changed, row.failed),
            shards[row.id],
            shots[row.id],
        )
        for row in conn.execute(select(builds))
    }


# -- faults ----------------------------------------------------------------------------------

FaultType = Literal[
    "child SIGKILL",
    "child SIGSEGV",
    "child SIGSTOP",
    "host SIGKILL",
    "host SIGTERM",
    "postgres restart",
    "cancel",
]
FAULT_WEIGHTS: dict[FaultType, int] = {
    "child SIGKILL": 5,
    "child SIGSEGV": 4,
    "child SIGSTOP": 1,
    "host SIGKILL": 1,
    "host SIGTERM": 1,
    "postgres restart": 1,
    "cancel": 1,
}
#: The crash cause a host records for each child fault (see `supervisor.host.deaths`).
CRASH_FAULTS: dict[str, FaultType] = {
    "SIGKILL (likely out of memory)": "child SIGKILL",
    "SIGSEGV": "child SIGSEGV",
}
HUNG_CAUSE = re.compile(r"hung \(no progress for [\d.]+ s\)")
#: Faults after which a job's lease may run out: its host or child stopped renewing it.
LEASE_FAULTS = frozenset({"host SIGKILL", "child SIGSTOP", "postgres restart"})
#: At most this share of the builds is cancelled (the rest are compared with the calm run).
CANCEL_SHARE = 0.15
#: Seconds between faults: a draw from this range after each one.
FAULT_GAP_SECONDS = (0.3, 2.0)
#: A round is started only with this much of `--minutes` left: one with no time for faults
#: would only repeat the calm run.
MIN_ROUND_SECONDS = 20.0


@dataclass(frozen=True)
class Fault:
    at: float
    type: FaultType
    target: str
    job_ids: tuple[int, ...]


@dataclass(frozen=True)
class SoakSettings:
    hosts: int
    seed: int
    host_options: list[str]
    settle_seconds: float
    work: Path


@dataclass
class RoundReport:
    number: int
    faults: list[Fault]
    jobs: Counter[str]
    retries: int
    crashes_survived: int
    seconds: float
    broken: dict[str, list[str]]


@dataclass
class Round:
    """One database, one artifacts folder, the hosts on them and the faults they took."""

    number: int
    url: str
    artifacts: Path
    logs: Path
    settings: SoakSettings
    server: TemporaryPostgres
    workload: Workload
    schedule: random.Random
    targets: random.Random
    started: float
    engine: Engine = field(init=False)
    hosts: list[HostRun] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    cancelled: set[str] = field(default_factory=set)
    #: Every process a host started, as (pid, start time): none may outlive the soak.
    descendants: set[tuple[int, float]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.engine = connect(self.url)

    # -- hosts

    def live_hosts(self) -> list[HostRun]:
        return [host for host in self.hosts if host.ended_by is None]

    def add_host(self) -> None:
        host = start_host(self.url, self.artifacts, self.logs, self.settings.host_options)
        self.hosts.append(host)

    def watch(self) -> None:
        """Note the hosts' descendants and exit codes; a host that died unasked is replaced."""
        for host in list(self.hosts):
            if host.exit_code is None and host.process.poll() is not None:
                host.exit_code = host.process.returncode
                if host.ended_by is None:
                    host.ended_by = "died"
                    print(f"  host {host.pid} died unasked (exit {host.exit_code})", flush=True)
                    self.add_host()
            if host.exit_code is not None:
                continue
            with contextlib.suppress(psutil.Error):
                for process in psutil.Process(host.pid).children(recursive=True):
                    with contextlib.suppress(psutil.Error):
                        self.descendants.add((process.pid, process.create_time()))

    def open_jobs(self) -> int:
        return retrying(
            self.engine,
            lambda conn: int(
                conn.execute(
                    select(func.count())
                    .select_from(jobs)
                    .where(jobs.c.status.in_(("queued", "running")))
                ).scalar_one()
            ),
        )

    # -- injecting

    def inject(self, deadline: float) -> None:
        """Faults at random until `deadline` or until every job has ended."""
        next_at = time.monotonic() + self.schedule.uniform(*FAULT_GAP_SECONDS)
        types, weights = zip(*FAULT_WEIGHTS.items(), strict=True)
        while time.monotonic() < deadline and self.open_jobs():
            self.watch()
            if time.monotonic() >= next_at:
                fault: FaultType = self.schedule.choices(types, weights)[0]
                self.injected(fault, self.inject_one(fault))
                next_at = time.monotonic() + self.schedule.uniform(*FAULT_GAP_SECONDS)
            time.sleep(0.1)

    def injected(self, fault: FaultType, hit: tuple[str, tuple[int, ...]] | None) -> None:
        if hit is None:
            return  # nothing to hit right now (no child busy, no open build)
        at = round(time.monotonic() - self.started, 2)
        self.faults.append(Fault(at, fault, *hit))
        print(f"  [{at:8.2f} s] {fault:<16} {hit[0]} jobs={list(hit[1])}", flush=True)

    def inject_one(self, fault: FaultType) -> tuple[str, tuple[int, ...]] | None:
        if fault.startswith("child "):
            return self.signal_child(signal.Signals[fault.removeprefix("child ")])
        if fault == "host SIGKILL":
            return self.kill_host()
        if fault == "host SIGTERM":
            return self.stop_host()
        if fault == "postgres restart":
            running = self.running_jobs()
            self.server.restart()
            return "server", tuple(running)
        return self.cancel_a_build()

    def running_jobs(self, **where: Any) -> list[int]:
        def read(conn: Connection) -> list[int]:
            query = select(jobs.c.id).where(jobs.c.status == "running")
            for column, value in where.items():
                query = query.where(jobs.c[column] == value)
            return sorted(conn.execute(query).scalars())

        return retrying(self.engine, read)

    def signal_child(self, sig: signal.Signals) -> tuple[str, tuple[int, ...]] | None:
        """Stop a busy child first, so the job it runs cannot change before the signal lands."""
        busy = retrying(
            self.engine,
            lambda conn: sorted(
                conn.execute(
                    select(jobs.c.child_pid).where(
                        jobs.c.status == "running", jobs.c.child_pid.is_not(None)
                    )
                ).scalars()
            ),
        )
        if not busy:
            return None
        pid = self.targets.choice(busy)
        try:
            os.kill(pid, signal.SIGSTOP)
        except ProcessLookupError:
            return None
        job_ids = tuple(self.running_jobs(child_pid=pid))
        if sig != signal.SIGSTOP:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
                os.kill(pid, signal.SIGCONT)
        return f"child {pid}", job_ids

    def pick_host(self) -> HostRun | None:
        live = self.live_hosts()
        return self.targets.choice(live) if live else None

    def kill_host(self) -> tuple[str, tuple[int, ...]] | None:
        host = self.pick_host()
        if host is None:
            return None
        self.watch()
        held = self.jobs_held_by(host)
        host.process.kill()
        host.ended_by = "sigkill"
        host.process.wait()
        self.add_host()
        return f"host {host.pid}", held

    def stop_host(self) -> tuple[str, tuple[int, ...]] | None:
        started = [host for host in self.live_hosts() if host.started]
        if not started:
            return None
        host = self.targets.choice(started)
        held = self.jobs_held_by(host)
        host.process.send_signal(signal.SIGTERM)
        host.ended_by = "sigterm"
        self.add_host()
        return f"host {host.pid}", held

    def jobs_held_by(self, host: HostRun) -> tuple[int, ...]:
        return tuple(
            retrying(
                self.engine,
                lambda conn: sorted(
                    conn.execute(
                        select(jobs.c.id).where(
                            jobs.c.status == "running",
                            jobs.c.locked_by.like(f"%:{host.pid}:%"),
                        )
                    ).scalars()
                ),
            )
        )

    def cancel_a_build(self) -> tuple[str, tuple[int, ...]] | None:
        if len(self.cancelled) >= max(1, int(len(self.workload.builds) * CANCEL_SHARE)):
            return None
        open_builds = retrying(
            self.engine,
            lambda conn: sorted(
                conn.execute(
                    select(builds.c.id, builds.c.commit).where(
                        builds.c.status.in_(("pending", "capturing")), builds.c.branch != "main"
                    )
                ).all()
            ),
        )
        if not open_builds:
            return None
        build_id, commit = self.targets.choice(open_builds)
        running = self.running_jobs(build_id=build_id)
        retrying(self.engine, lambda conn: cancel_build(conn, build_id, self.artifacts))
        self.cancelled.add(commit)
        return f"build {build_id}", tuple(running)

    # -- ending

    def kill_hosts(self) -> None:
        for host in self.hosts:
            if host.process.poll() is None:
                host.process.kill()
                host.process.wait()

    def finish(self) -> None:
        """Let the hosts end every job (bounded), then SIGTERM them and wait for their exit."""
        deadline = time.monotonic() + self.settings.settle_seconds
        while self.open_jobs() and time.monotonic() < deadline:
            self.watch()
            time.sleep(0.5)
        self.watch()
        for host in self.live_hosts():
            host.wait_started(timeout=30)
            host.process.send_signal(signal.SIGTERM)
            host.ended_by = "sigterm"
        for host in self.hosts:
            try:
                host.exit_code = host.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                host.process.kill()
                host.exit_code = host.process.wait()
        self.engine.dispose()
        self.engine = connect(self.url)


# -- invariants ------------------------------------------------------------------------------

Check = Callable[["Evidence"], list[str]]


@dataclass
class Evidence:
    """What the checks read: the round's tables, its hosts' logs and processes, the calm run."""

    round: Round
    jobs: list[dict[str, Any]]
    shards: dict[int, dict[str, Any]]
    results: dict[str, BuildResult]
    calm: dict[str, BuildResult]
    duplicate_snapshots: list[tuple[int, str]]
    snapshot_names: dict[int, list[str]]
    events: list[dict[str, Any]]


def gather(soak_round: Round, calm: dict[str, BuildResult]) -> Evidence:
    def read(conn: Connection) -> Evidence:
        names: dict[int, list[str]] = defaultdict(list)
        for row in conn.execute(select(snapshots.c.shard_id, snapshots.c.name)):
            names[row.shard_id].append(row.name)
        duplicates = conn.execute(
            select(snapshots.c.build_id, snapshots.c.name)
            .group_by(snapshots.c.build_id, snapshots.c.name)
            .having(func.count() > 1)
        ).all()
        return Evidence(
            round=soak_round,
            jobs=[dict(row._mapping) for row in conn.execute(select(jobs).order_by(jobs.c.id))],
            shards={row.id: dict(row._mapping) for row in conn.execute(select(capture_shards))},
            results=read_results(conn),
            calm=calm,
            duplicate_snapshots=[(row.build_id, row.name) for row in duplicates],
            snapshot_names=dict(names),
            events=[event for host in soak_round.hosts for event in host.events()],
        )

    return retrying(soak_round.engine, read)


TERMINAL_JOB_STATES = ("completed", "failed", "cancelled")
TERMINAL_OUTCOMES = frozenset({"completed", "failed", "cancelled", "dropped", "unhandled"})
SHARD_OF_JOB = {"completed": "completed", "failed": "failed", "cancelled": "cancelled"}


def every_job_ended_once(evidence: Evidence) -> list[str]:
    """Final state, no lease held, and at most one host reporting the job's end."""
    broken = [
        f"job {job['id']}: {job['status']}, locked_by={job['locked_by']}, "
        f"lease_expires_at={job['lease_expires_at']}, child_pid={job['child_pid']}"
        for job in evidence.jobs
        if job["status"] not in TERMINAL_JOB_STATES
        or job["locked_by"] is not None
        or job["lease_expires_at"] is not None
        or job["child_pid"] is not None
    ]
    endings: Counter[int] = Counter()
    for event in evidence.events:
        if (
            event.get("event") == "job finished" and event.get("outcome") in TERMINAL_OUTCOMES
        ) or event.get("event") == "expired lease ended a job":
            endings[int(event["job_id"])] += 1
    broken += [
        f"job {job_id}: ended {count} times" for job_id, count in endings.items() if count > 1
    ]
    return broken


def every_build_ended(evidence: Evidence) -> list[str]:
    return [
        f"build {commit}: {result.status}"
        for commit, result in evidence.results.items()
        if result.status not in ("passed", "changed", "failed", "cancelled")
    ]


def results_recorded_once(evidence: Evidence) -> list[str]:
    """A completed shard has exactly its job's snapshots; any other shard has none."""
    broken = [f"build {b}: snapshot {n!r} recorded twice" for b, n in evidence.duplicate_snapshots]
    for job in evidence.jobs:
        shard = evidence.shards[job["shard_id"]]
        expected = sorted(shot["name"] for shot in job["data"]["snapshots"])
        recorded = sorted(evidence.snapshot_names.get(job["shard_id"], []))
        if shard["status"] != SHARD_OF_JOB.get(job["status"]):
            broken.append(f"job {job['id']} {job['status']} but its shard is {shard['status']}")
        if shard["status"] == "completed" and recorded != expected:
            broken.append(f"shard {shard['id']}: {len(recorded)} of {len(expected)} snapshots")
        if shard["status"] != "completed" and recorded:
            broken.append(f"shard {shard['id']} is {shard['status']} with {len(recorded)} results")
    for commit, result in evidence.results.items():
        counted = Counter(status for status, _pixels, _shard in result.snapshots.values())
        if result.counts != tuple(counted[s] for s in ("new", "unchanged", "changed", "failed")):
            broken.append(f"build {commit}: counts {result.counts} but snapshots {dict(counted)}")
    return broken


def results_equal_calm_run(evidence: Evidence) -> list[str]:
    """Every recorded snapshot of a build not cancelled is what the calm run found; a build
    whose shards all completed has the calm run's verdict and counts."""
    broken = []
    for commit, result in evidence.results.items():
        if commit in evidence.round.cancelled:
            continue
        calm = evidence.calm[commit]
        for name, (status, pixels, index) in sorted(result.snapshots.items()):
            if (status, pixels, index) != calm.snapshots.get(name):
                broken.append(
                    f"build {commit} {name}: {status}/{pixels} (calm: {calm.snapshots.get(name)})"
                )
        if set(result.shards.values()) == {"completed"} and (result.status, result.counts) != (
            calm.status,
            calm.counts,
        ):
            broken.append(
                f"build {commit}: {result.status} {result.counts} (calm: {calm.status} {calm.counts})"
            )
    return broken


def damaged_images_fail_only_their_snapshot(evidence: Evidence) -> list[str]:
    broken = []
    for build in evidence.round.workload.builds:
        result = evidence.results[build.commit]
        for name in sorted(build.damaged):
            status, _pixels, _index = result.snapshots.get(name, ("failed", None, 0))
            if status != "failed":
                broken.append(f"build {build.commit} {name}: damaged image recorded {status}")
    for job in evidence.jobs:
        if job["status"] == "failed" and "image" in (job["error"] or ""):
            broken.append(f"job {job['id']} failed for an image: {job['error']}")
    return broken


def failures_explained(evidence: Evidence) -> list[str]:
    """Every crash a job counts matches a fault injected into its child; every failed job names
    its crashes or a lease lost on its final attempt to a fault that stops renewals."""
    injected: dict[int, Counter[str]] = defaultdict(Counter)
    for fault in evidence.round.faults:
        for job_id in fault.job_ids:
            injected[job_id][fault.type] += 1
    broken = []
    for job in evidence.jobs:
        causes = Counter(_fault_of(cause) for cause in job["crash_causes"] or ())
        for fault_type, count in causes.items():
            if count > injected[job["id"]][fault_type]:
                broken.append(
                    f"job {job['id']}: {count} x {fault_type} counted, "
                    f"{injected[job['id']][fault_type]} injected"
                )
        if job["status"] != "failed":
            continue
        if job["error"] == queue.LEASE_EXHAUSTED_ERROR:
            if not LEASE_FAULTS & set(injected[job["id"]]):
                broken.append(f"job {job['id']}: lease expired with no fault to explain it")
        elif job["error"] != crash_error(job["kind"], job["crash_causes"] or ()):
            broken.append(f"job {job['id']} failed: {job['error']}")
    return broken


def _fault_of(cause: str) -> str:
    if HUNG_CAUSE.fullmatch(cause):
        return "child SIGSTOP"
    return CRASH_FAULTS.get(cause, f"unexplained cause {cause!r}")


def nothing_left_behind(evidence: Evidence) -> list[str]:
    """No scratch file, no surviving process a host started, every SIGTERM answered with 0."""
    scratch = evidence.round.artifacts / ".scratch"
    broken = [f"scratch left: {path.name}" for path in sorted(scratch.glob("*"))]
    deadline = time.monotonic() + 10
    while survivors := _survivors(evidence.round.descendants):
        if time.monotonic() > deadline:
            broken += [f"process {pid} survived ({state})" for pid, state in survivors]
            break
        time.sleep(0.2)
    broken += [
        f"host {host.pid} exited {host.exit_code} after SIGTERM (log {host.log_path})"
        for host in evidence.round.hosts
        if host.ended_by == "sigterm" and host.exit_code != 0
    ]
    broken += [
        f"host {host.pid} died unasked, exit {host.exit_code} (log {host.log_path})"
        for host in evidence.round.hosts
        if host.ended_by == "died"
    ]
    return broken


def _survivors(processes: set[tuple[int, float]]) -> list[tuple[int, str]]:
    alive: list[tuple[int, str]] = []
    for pid, started in sorted(processes):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.create_time() == started:
                alive.append((pid, process.status()))
    return alive


INVARIANTS: dict[str, Check] = {
    "every job ended exactly once, no lease held": every_job_ended_once,
    "every build ended": every_build_ended,
    "results recorded exactly once per completed shard": results_recorded_once,
    "results equal the calm run's": results_equal_calm_run,
    "damaged images fail only their snapshot": damaged_images_fail_only_their_snapshot,
    "failures explained by injected faults": failures_explained,
    "no scratch, no orphan, hosts exit 0 on SIGTERM and only then": nothing_left_behind,
}


def check(evidence: Evidence) -> dict[str, list[str]]:
    return {name: found for name, invariant in INVARIANTS.items() if (found := invariant(evidence))}


# -- the run ---------------------------------------------------------------------------------


def calm_reference(
    server: TemporaryPostgres, work: Path, workload: Workload, options: list[str]
) -> dict[str, BuildResult]:
    """The workload run with one host and no faults: what every chaotic run must agree with."""
    url = create_database(server, "calm")
    artifacts, logs = work / "calm" / "artifacts", work / "calm" / "logs"
    prepare(url, artifacts, logs, workload, options)
    run_to_end(url, artifacts, logs, options)
    engine = connect(url)
    try:
        results = retrying(engine, read_results)
        failed = retrying(
            engine,
            lambda conn: conn.execute(
                select(func.count()).select_from(jobs).where(jobs.c.status != "completed")
            ).scalar_one(),
        )
    finally:
        engine.dispose()
    if failed:
        raise RuntimeError(f"the calm run ended {failed} job(s) other than completed")
    return results


def run_round(
    number: int,
    server: TemporaryPostgres,
    workload: Workload,
    settings: SoakSettings,
    calm: dict[str, BuildResult],
    deadline: float,
) -> RoundReport:
    started = time.monotonic()
    url = create_database(server, f"chaos_{number}")
    folder = settings.work / f"round-{number}"
    prepare(url, folder / "artifacts", folder / "logs", workload, settings.host_options)
    soak_round = Round(
        number,
        url,
        folder / "artifacts",
        folder / "logs",
        settings,
        server,
        workload,
        schedule=random.Random(f"{settings.seed}/{number}/schedule"),
        targets=random.Random(f"{settings.seed}/{number}/targets"),
        started=started,
    )
    try:
        for _ in range(settings.hosts):
            soak_round.add_host()
        soak_round.inject(deadline)
        soak_round.finish()
    except BaseException:
        soak_round.kill_hosts()  # interrupted, or the soak itself failed: leave nothing running
        raise
    evidence = gather(soak_round, calm)
    broken = check(evidence)
    soak_round.engine.dispose()
    return RoundReport(
        number,
        soak_round.faults,
        Counter(job["status"] for job in evidence.jobs),
        sum(max(0, job["attempt"] - 1) for job in evidence.jobs),
        sum(job["crashes"] for job in evidence.jobs if job["status"] == "completed"),
        time.monotonic() - started,
        broken,
    )


def summarize(reports: list[RoundReport], seconds: float) -> str:
    faults = Counter(fault.type for report in reports for fault in report.faults)
    job_states = sum((report.jobs for report in reports), Counter[str]())
    broken = {name for report in reports for name in report.broken}
    lines = [
        f"chaos soak: {len(reports)} round(s) in {seconds:.0f} s (wall time), "
        f"the longest {max(report.seconds for report in reports):.0f} s",
        f"faults injected: {sum(faults.values())} "
        + ", ".join(f"{kind} x{count}" for kind, count in sorted(faults.items())),
        "jobs: " + ", ".join(f"{state} {count}" for state, count in sorted(job_states.items())),
        f"retries (attempts beyond the first): {sum(r.retries for r in reports)}",
        f"crashes survived (by jobs that completed): {sum(r.crashes_survived for r in reports)}",
        "invariants:",
    ]
    lines += [f"  {'BROKEN' if name in broken else 'held  '} {name}" for name in INVARIANTS]
    for report in reports:
        for name, found in report.broken.items():
            lines.append(f"round {report.number}: {name}:")
            lines += [f"    {item}" for item in found[:20]]
    return "\n".join(lines)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="scripts/chaos", description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=2.0, help="how long to inject faults")
    parser.add_argument("--seed", type=int, default=1, help="seeds the workload and the faults")
    parser.add_argument("--builds", type=int, default=40, help="branch builds per round")
    parser.add_argument("--snapshots", type=int, default=60, help="snapshots per build")
    parser.add_argument("--shards", type=int, default=4, help="shards per build")
    parser.add_argument("--hosts", type=int, default=3, help="hosts running at once")
    parser.add_argument("--concurrency", type=int, default=2, help="children per host")
    parser.add_argument("--lease-seconds", type=float, default=10.0)
    parser.add_argument("--stall-seconds", type=float, default=10.0)
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=240.0,
        help="after the faults, how long the hosts may take to end every job",
    )
    parser.add_argument("--work", type=Path, help="keep databases' artifacts and logs here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging("warning")  # the soak's own uploads and cancels; the hosts log to files
    began = time.monotonic()
    options = [
        "--concurrency", str(args.concurrency),
        "--lease-seconds", str(args.lease_seconds),
        "--stall-seconds", str(args.stall_seconds),
        "--backoff-base-seconds", "0.2",
        "--poll-seconds", "0.5",
        "--drain-seconds", "10",
    ]  # fmt: skip
    work = args.work or Path(tempfile.mkdtemp(prefix="storyshelf-chaos-"))
    settings = SoakSettings(args.hosts, args.seed, options, args.settle_seconds, work)
    print(f"chaos soak: seed {args.seed}, work folder {work}", flush=True)
    workload = make_workload(
        work / "uploads",
        builds=args.builds,
        snapshots=args.snapshots,
        shards=args.shards,
        seed=args.seed,
    )
    server = TemporaryPostgres().start()
    reports: list[RoundReport] = []
    try:
        calm = calm_reference(server, work, workload, options)
        print(f"calm run done in {time.monotonic() - began:.0f} s", flush=True)
        deadline = time.monotonic() + args.minutes * 60
        while not reports or deadline - time.monotonic() > MIN_ROUND_SECONDS:
            print(f"round {len(reports) + 1}:", flush=True)
            reports.append(run_round(len(reports) + 1, server, workload, settings, calm, deadline))
    finally:
        server.stop()
    print(summarize(reports, time.monotonic() - began), flush=True)
    broken = sorted({name for report in reports for name in report.broken})
    if broken:
        print("invariants broken: " + "; ".join(broken), file=sys.stderr)
        return 1
    return 0
