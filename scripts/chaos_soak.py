"""The chaos soak: several hosts share one PostgreSQL (and an artifacts folder, or a bucket)
while their children, their fork servers, the hosts themselves, the database and the bucket are
killed at random, forks are refused, the reports folder cannot be written, a host's cache is
deleted and one host's clock is off; afterwards, the promises of DESIGN section 3 are checked.

Each path (a crash, a hang, a lost lease, a drain, a database restart, a cancel) has its own
test; only hosts that share a database while those faults overlap show whether the paths
compose: whether every job still ends exactly once, every shard's results are recorded exactly
once, the verdicts equal those of a calm run of the same workload, and every host exits only
when told to (0 after SIGTERM, or killed by the SIGKILL it was sent).

A run: generate the workload (screenshot-like PNGs, drawn in pure Python like
`supervisor.commands.demo_images`), run it calmly once with one host for the reference results,
then run rounds until `--minutes` have passed. A round gets a fresh database and artifacts
folder, captures the accepted `main` build calmly (the baselines), enqueues the other builds,
starts the hosts (one of them, and whichever replaces it, with its wall clock 30 s ahead or
behind, by libfaketime) and injects faults until its builds are done or the time is up, ends
the faults that last (forks refused, reports unwritable), lets the hosts finish, stops them with
SIGTERM, looks at every ended build with `python -m supervisor build ID` and checks the
invariants. The fault schedule (which fault, how long it lasts, how long after the last) is a
function of `--seed`; what a fault hits depends on what runs at that moment. `--faults` picks
the faults; one this machine cannot inject (no writable pids cgroup as root, no libfaketime) is
dropped with one line, except libfaketime under `CI=true`. A libfaketime that stops Python's
timed waits (0.9.10: `shift_stops_timed_waits`) keeps the shifted host's children from beating,
so the hangs that host finds are not judged, said in one line too.

`--store` says where the artifacts live. `folder` (the default): one artifacts folder that every
host shares, as hosts on one machine do. `s3`: a bucket on a SeaweedFS the soak starts (one per
soak, `tests.object_store_server`), a fresh key prefix for the calm run and for each round, so
no run sees another's files; the hosts then share nothing but PostgreSQL and the bucket, each
on a machine of its own (a working folder, its `--cache-dir`, its logs), and two more faults
apply: the object store restarted under the hosts, and one host's cache folder deleted while
its children read from it. A fault that needs a folder (the reports folder made unwritable)
is dropped in `s3` mode with one line.

As root, each host runs in a network namespace of its own and reaches PostgreSQL and the bucket
through a forwarder that adds latency, and the `partition` fault cuts one host off for 10-90 s
(`scripts.partitions`); two invariants join: no host records a result without holding its job's
lease (read from triggers in the round's database), and a cut host's `/healthz` says it is
unhealthy. Without root or namespaces the soak says so in one line and exits 2;
`--no-partitions` runs every host in the soak's own network.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, Literal, TypeVar, get_args

import psutil
from sqlalchemy import Connection, Engine, func, make_url, select, text

from ipc import scratch
from ipc.artifacts.keys import REPORTS_PREFIX as REPORTS_FOLDER
from ipc.artifacts.location import open_store
from ipc.artifacts.store import ArtifactStore
from ipc.logs import configure as configure_logging
from ipc.messages import STACK_DUMP_SIGNAL
from scripts.partitions import fencing, latency, namespaces
from scripts.partitions.health import Watch, ask
from scripts.partitions.namespaces import Network, NetworkError, Slot
from supervisor.builds.cancel import cancel_build
from supervisor.builds.crash_failure import crash_error
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.builds.uploads import enqueue_build, store_images
from supervisor.commands.build import BuildExit
from supervisor.commands.demo_images import Canvas
from supervisor.commands.main import main as supervisor_command
from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, connect, transaction
from supervisor.db.migrate import upgrade
from supervisor.db.tables import builds, capture_shards, jobs, snapshots
from tests.object_store_server import (
    ObjectStoreNotFound,
    TemporaryObjectStore,
    find_weed,
    free_ports,
)
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
    """One upload of the workload: a folder of PNGs (and the names whose image is damaged), or
    a Storybook static build that the hosts render."""

    branch: str
    commit: str
    folder: Path
    damaged: frozenset[str]
    source: Literal["images", "storybook"] = "images"
    #: The commit of an earlier build of the same files against the same baselines, whose
    #: calm result is this one's too: the calm run captures it once.
    same_as: str | None = None


@dataclass(frozen=True)
class Workload:
    baselines: tuple[PlannedBuild, ...]
    builds: tuple[PlannedBuild, ...]
    shards: int

    def distinct_builds(self) -> tuple[PlannedBuild, ...]:
        """The builds whose results can differ: what the calm run captures. The Storybook
        builds are two builds repeated (the token changed or not), and a Storybook is the
        costliest thing a round captures (a browser per child, seconds a story); capturing
        each repeat calmly again would double the calm run and tell nothing new."""
        return tuple(build for build in self.builds if build.same_as is None)


#: The test suite's Storybook fixture, which every round also captures.
STORYBOOK_FIXTURE = ROOT / "tests" / "fixtures" / "storybook" / "storybook-static"
#: Left out of the soak's Storybook: it takes its 15 s render cap, longer than the soak's stall
#: timeout; the test suite covers it.
SLOW_STORY = "example-hang--main-thread-hang"
#: The fixture's primary colour token, and the one-step darker value the soak's branch sets.
TOKEN, TOKEN_CHANGED = "--color-primary: #1d4ed8", "--color-primary: #1e40af"
#: One Storybook build per this many screenshot builds (at least one per round).
IMAGE_BUILDS_PER_STORYBOOK = 4


def write_storybook(folder: Path, *, token_changed: bool) -> Path:
    """The fixture without its slow story, its colour token changed on request (a branch that
    changes a design token: every story using it changes, the others must stay unchanged)."""
    shutil.copytree(STORYBOOK_FIXTURE, folder)
    index = json.loads((folder / "index.json").read_text())
    del index["entries"][SLOW_STORY]
    (folder / "index.json").write_text(json.dumps(index))
    if token_changed:
        for css in (folder / "assets").glob("*.css"):
            css.write_text(css.read_text().replace(TOKEN, TOKEN_CHANGED))
    return folder


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
    storybook = PlannedBuild(
        "main",
        "storybook-main",
        write_storybook(folder / "storybook-main", token_changed=False),
        frozenset(),
        "storybook",
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
    for number in range(max(1, builds // IMAGE_BUILDS_PER_STORYBOOK)):
        commit = f"storybook-{number:03d}"
        changed = number % 2 == 1
        built = write_storybook(folder / commit, token_changed=changed)
        same_as = f"storybook-{number % 2:03d}" if number >= 2 else None
        planned.append(
            PlannedBuild(f"stories-{number:03d}", commit, built, frozenset(), "storybook", same_as)
        )
    return Workload((baseline, storybook), tuple(planned), shards)


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


#: Where Debian's `faketime` package puts its preload library, by architecture.
FAKETIME_LIBRARY_PATTERNS = (
    "usr/lib/{multiarch}/faketime/libfaketime.so.1",
    "usr/lib/*/faketime/libfaketime.so.1",
    "usr/lib*/faketime/libfaketime.so.1",
    "usr/local/lib*/faketime/libfaketime.so.1",
)
#: How far a shifted host's wall clock is from the database's: the seed picks the sign.
CLOCK_SHIFT_SECONDS = 30


@cache
def find_libfaketime() -> Path | None:
    """libfaketime's preload library on this machine (its folder is named for the architecture)."""
    multiarch = sysconfig.get_config_var("MULTIARCH") or "*"
    for pattern in FAKETIME_LIBRARY_PATTERNS:
        for path in sorted(Path("/").glob(pattern.format(multiarch=multiarch))):
            if path.is_file():
                return path
    return None


@dataclass(frozen=True)
class ClockShift:
    """A host's clocks moved by `seconds` with libfaketime. A fixed offset moves the monotonic
    clock too, which changes no interval the host measures; only a decision that wrongly reads
    the wall clock against the database's sees the shift. (Leaving the monotonic clock alone
    breaks Python's absolute-deadline sleeps under libfaketime 0.9, wolfcw/libfaketime#426.)"""

    seconds: int
    library: Path

    def environment(self) -> dict[str, str]:
        preload = " ".join(filter(None, (str(self.library), os.environ.get("LD_PRELOAD"))))
        return {"LD_PRELOAD": preload, "FAKETIME": f"{self.seconds:+d}s"}


#: How long a timed wait of 0.1 s may take under a clock shift before it counts as stuck.
TIMED_WAIT_PROBE_SECONDS = 3.0


@cache
def shift_stops_timed_waits(library: Path) -> bool:
    """Whether Python's timed waits (`Event.wait(t)`, `Condition.wait(t)`: a lock acquired with
    a timeout) never time out under a clock shift by `library`.

    They do not under libfaketime 0.9.10 (Debian 12's) with Python 3.11 on glibc 2.30 or later:
    Python waits with `sem_clockwait` on the monotonic clock, which that libfaketime does not
    intercept, so the kernel gets a faked monotonic deadline (a wall-clock value) and waits for
    years (wolfcw/libfaketime#390; 0.9.11 intercepts it). A child of the shifted host then never
    beats while it waits on the bucket or on a page (`child.worker.beats`,
    `child.browser.watchdog`), and a wait longer than the stall time gets it killed as hung: a
    hang of the tool, which a machine whose clock is really off does not have."""
    probe = [sys.executable, "-c", "import threading; threading.Event().wait(0.1)"]
    env = {**os.environ, **ClockShift(CLOCK_SHIFT_SECONDS, library).environment()}
    try:
        subprocess.run(probe, env=env, timeout=TIMED_WAIT_PROBE_SECONDS, check=False)
    except subprocess.TimeoutExpired:
        return True
    return False


#: Where the artifacts live (`--store`): a folder every host shares, or a bucket.
StoreKind = Literal["folder", "s3"]
#: The soak's bucket on its own SeaweedFS; each run (the calm run, a round) has a prefix in it.
BUCKET = "storyshelf-chaos"


@dataclass(frozen=True)
class Machine:
    """A host's own machine, when hosts share nothing but PostgreSQL and the bucket: its
    working folder (the host's current folder), its cache of the bucket's files and its logs.
    A host that replaces a killed one runs on the same machine, as a restarted host would: it
    finds (and sweeps) what the dead one's children left in the cache."""

    folder: Path

    @property
    def cache(self) -> Path:
        return self.folder / "cache"

    @property
    def logs(self) -> Path:
        return self.folder / "logs"


@dataclass(frozen=True)
class Site:
    """Where one run (the calm run, or a round) keeps its artifacts and runs its hosts: an
    artifacts folder and a logs folder every host shares (`--store folder`), or a key prefix of
    the soak's bucket and a `Machine` per host (`--store s3`)."""

    #: What the hosts get as `--artifacts`: the folder's path, or `s3://bucket/prefix`.
    location: str
    #: The artifacts folder; None when the artifacts are in the bucket.
    folder: Path | None
    logs: Path
    machines: tuple[Machine, ...] = ()

    @classmethod
    def make(cls, folder: Path, bucket: str | None, hosts: int) -> Site:
        """The site of the run kept under `folder`: its artifacts in `folder` or, with a bucket
        (`s3://name`), under the prefix named for the folder (`s3://name/round-3`)."""
        if bucket is None:
            return cls(str(folder / "artifacts"), folder / "artifacts", folder / "logs")
        machines = tuple(Machine(folder / f"host-{index + 1}") for index in range(hosts))
        return cls(f"{bucket}/{folder.name}", None, folder / "logs", machines)

    def store(self) -> ArtifactStore:
        """The artifact store, as the soak's own uploads and checks reach it."""
        return open_store(self.location)

    def machine(self, index: int) -> Machine | None:
        """The machine host number `index` runs on; None when the hosts share a folder."""
        return self.machines[index % len(self.machines)] if self.machines else None

    def scratch_folders(self) -> list[tuple[str, Path]]:
        """Where children write unfinished files (`ipc.scratch`), each with a name to show: the
        artifacts folder's scratch, or the scratch of every machine's cache."""
        if self.folder is not None:
            return [("", scratch.folder(self.folder))]
        return [(f"{m.folder.name}: ", scratch.folder(m.cache)) for m in self.machines]


#: How the soak ended a host: "sigkill" (must die of it), "sigterm" (must exit 0), "died"
#: (it exited unasked: always a bug).
EndedBy = Literal["sigkill", "sigterm", "died"]


@dataclass
class HostRun:
    """One `python -m supervisor run` subprocess, how the soak ended it and how it exited."""

    process: subprocess.Popen[bytes]
    log_path: Path
    clock: ClockShift | None
    #: The machine it runs on (`--store s3`); None when the hosts share one folder.
    machine: Machine | None = None
    #: The network namespace it runs in; None when the hosts share the soak's network.
    slot: Slot | None = None
    #: The name its database connections carry (`application_name`), which the round's
    #: triggers record with every write (`scripts.partitions.fencing`).
    name: str = ""
    #: Where its `/healthz` answers, on its own loopback; None: not served.
    metrics_port: int | None = None
    ended_by: EndedBy | None = None
    exit_code: int | None = None
    #: Its signal handlers were set when the soak sent SIGTERM (else the default action kills it).
    stopped_after_start: bool = True
    #: It did not exit within `STOP_TIMEOUT_SECONDS` of the final SIGTERM, and was killed.
    stop_timed_out: bool = False
    #: The host process's own CPU seconds (not its children's) between the first and the last
    #: time the soak looked at it after it started, and those moments (monotonic).
    cpu_first: tuple[float, float] | None = None
    cpu_last: tuple[float, float] | None = None

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

    def jobs_finished(self) -> int:
        """How many jobs it ended (its log's `job finished` events): the work its CPU paid for."""
        return sum(1 for event in self.events() if event.get("event") == "job finished")

    def events(self) -> Iterator[dict[str, Any]]:
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                event = json.loads(line)
                if isinstance(event, dict):
                    yield event

    def log_tail(self, lines: int = 6) -> list[str]:
        """The last lines of its log (a traceback ends there), each cut to a readable width."""
        text = self.log_path.read_text(errors="replace").splitlines()
        return [line[:300] for line in text[-lines:]]

    def sample_cpu(self) -> None:
        """Note its CPU time now; `cpu_rate` is the rate between the first and last notes."""
        if not self.started:
            return
        with contextlib.suppress(psutil.Error):
            times = psutil.Process(self.pid).cpu_times()
            sample = (time.monotonic(), times.user + times.system)
            self.cpu_first = self.cpu_first or sample
            self.cpu_last = sample

    def cpu_rate(self) -> tuple[float, float] | None:
        """(CPU seconds per second, seconds observed) of the host process itself."""
        if self.cpu_first is None or self.cpu_last is None:
            return None
        seconds = self.cpu_last[0] - self.cpu_first[0]
        if seconds <= 0:
            return None
        return (self.cpu_last[1] - self.cpu_first[1]) / seconds, seconds


#: The name the soak's own connections (and the calm hosts') carry.
SOAK_NAME = "storyshelf-chaos"
#: `/healthz` of the n-th host of a round listens on this port plus n, in its own namespace (a
#: host and the one replacing it overlap while the first drains).
METRICS_PORT = 9400
#: One way, between a host and the services (`scripts.partitions.latency`).
LATENCY_MS = 2.0


@dataclass(frozen=True)
class Placement:
    """Where a host runs: its machine (`--store s3`), its network namespace and the names it
    goes by. Without a slot it shares the soak's network and reaches the services directly."""

    machine: Machine | None = None
    slot: Slot | None = None
    name: str = SOAK_NAME
    metrics_port: int | None = None


def start_host(
    url: str,
    site: Site,
    options: list[str],
    clock: ClockShift | None = None,
    placement: Placement = Placement(),
    routes: Routes | None = None,
) -> HostRun:
    """A host on `site`: in the soak's folder with the shared logs, or on its machine, in its
    working folder with its own cache and logs. (The bucket's credentials are in the soak's
    environment, which every host inherits.) In a slot of the soak's network, it reaches
    PostgreSQL and the bucket through `routes`, the latency forwarder."""
    machine, slot = placement.machine, placement.slot
    logs = machine.logs if machine is not None else site.logs
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / f"host-{time.monotonic_ns()}.log"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "STORYSHELF_LOG_LEVEL": "info",
        "PGAPPNAME": placement.name,
    }
    if clock is not None:
        env |= clock.environment()
    if slot is not None and routes is not None:
        url = routes.database_url(url, slot)
        if routes.store_port is not None:
            env["STORYSHELF_S3_ENDPOINT"] = f"http://{slot.services_address}:{routes.store_port}"
    command = [
        sys.executable, "-m", "supervisor", "run",
        "--database-url", url, "--artifacts", site.location, *options,
    ]  # fmt: skip
    if machine is not None:
        command += ["--cache-dir", str(machine.cache)]
    if placement.metrics_port is not None:
        command += ["--metrics-address", f"127.0.0.1:{placement.metrics_port}"]
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=machine.folder if machine is not None else ROOT,
            preexec_fn=_no_core_dumps if slot is None else lambda: _in_slot(slot),
        )
    return HostRun(process, log_path, clock, machine, slot, placement.name, placement.metrics_port)


def _in_slot(slot: Slot) -> None:
    """A host's process, between fork and exec: no core dumps, and its slot's network."""
    _no_core_dumps()
    namespaces.enter(slot.namespace)


@dataclass(frozen=True)
class Routes:
    """How hosts in slots reach the services: the latency forwarder's ports, on each slot's
    services address, for PostgreSQL and (with a bucket) the object store."""

    network: Network
    database_port: int
    store_port: int | None
    process: subprocess.Popen[bytes]

    def database_url(self, url: str, slot: Slot) -> str:
        """`url` (the soak's own, on 127.0.0.1) as a host in `slot` reaches it."""
        parsed = make_url(url)
        return parsed.set(host=slot.services_address, port=self.database_port).render_as_string(
            hide_password=False
        )

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def start_routes(
    network: Network, server: TemporaryPostgres, object_store: TemporaryObjectStore | None
) -> Routes:
    """The latency forwarder in the services' namespace (where the soak runs), on free ports."""
    database_port, store_port = free_ports(2)
    routes = [f"{database_port}=127.0.0.1:{server.port}"]
    if object_store is not None:
        routes.append(f"{store_port}=127.0.0.1:{object_store.ports.s3}")
    process = subprocess.Popen(
        [sys.executable, "-m", latency.__name__, "--delay-ms", str(LATENCY_MS),
         *routes],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
    )  # fmt: skip
    assert process.stdout is not None
    if process.stdout.readline().strip() != b"forwarding":
        process.kill()
        raise NetworkError(f"the latency forwarder did not start (exit {process.wait()})")
    return Routes(network, database_port, store_port if object_store is not None else None, process)


def run_to_end(url: str, site: Site, options: list[str]) -> None:
    """One calm `--drain` host (on the site's first machine, if it has machines, beside the
    services) until the queue is empty."""
    host = start_host(url, site, [*options, "--drain"], placement=Placement(site.machine(0)))
    code = host.process.wait(timeout=1800)
    if code != 0:
        raise RuntimeError(f"calm host exited {code}; see {host.log_path}")


def upload(engine: Engine, store: ArtifactStore, build: PlannedBuild, shards: int) -> int:
    if build.source == "storybook":
        return upload_storybook(engine, store, build, shards)
    images = store_images(store, build.folder)

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


def upload_storybook(engine: Engine, store: ArtifactStore, build: PlannedBuild, shards: int) -> int:
    stored = store_storybook(store, build.folder)

    def enqueue(conn: Connection) -> int:
        queued = enqueue_storybook(
            conn,
            project=PROJECT,
            branch=build.branch,
            storybook=stored,
            shards=shards,
            commit=build.commit,
        )
        return queued.build_id

    return retrying(engine, enqueue)


#: How the baselines' calm capture must end: the screenshots pass; the Storybook has one story
#: that throws in render, so it fails with that story alone failed.
BASELINE_OUTCOMES = {"main": ("passed", 0), "storybook-main": ("failed", 1)}


def prepare(
    url: str,
    site: Site,
    workload: Workload,
    options: list[str],
    planned: tuple[PlannedBuild, ...] | None = None,
) -> None:
    """Capture the `main` builds calmly (they become the baselines), then queue the others
    (`planned`, or every build of the workload)."""
    engine = connect(url)
    store = site.store()
    try:
        for baseline in workload.baselines:
            upload(engine, store, baseline, workload.shards)
        run_to_end(url, site, options)
        ended = retrying(
            engine,
            lambda conn: {
                row.commit: (row.status, row.failed)
                for row in conn.execute(select(builds.c.commit, builds.c.status, builds.c.failed))
            },
        )
        if ended != BASELINE_OUTCOMES:
            raise RuntimeError(f"the baseline builds ended {ended}, not {BASELINE_OUTCOMES}")
        for build in workload.builds if planned is None else planned:
            upload(engine, store, build, workload.shards)
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
    #: name -> why the snapshot failed (compared with nothing: evidence for a mismatch)
    errors: dict[str, str] = field(default_factory=dict)


def read_results(conn: Connection) -> dict[str, BuildResult]:
    """Every build's result by commit."""
    shard_index = {row.id: row._mapping["index"] for row in conn.execute(select(capture_shards))}
    shards: dict[int, dict[int, str]] = defaultdict(dict)
    for row in conn.execute(select(capture_shards)):
        shards[row.build_id][row._mapping["index"]] = row.status
    shots: dict[int, dict[str, tuple[str, int | None, int]]] = defaultdict(dict)
    errors: dict[int, dict[str, str]] = defaultdict(dict)
    for row in conn.execute(select(snapshots)):
        shots[row.build_id][row.name] = (row.status, row.diff_pixels, shard_index[row.shard_id])
        if row.error:
            errors[row.build_id][row.name] = row.error
    return {
        row.commit: BuildResult(
            row.status,
            (row.new, row.unchanged, row.changed, row.failed),
            shards[row.id],
            shots[row.id],
            errors[row.id],
        )
        for row in conn.execute(select(builds))
    }


# -- faults ----------------------------------------------------------------------------------

#: The faults injected at random moments.
FaultType = Literal[
    "child SIGKILL",
    "child SIGSEGV",
    "child SIGSTOP",
    "fork server SIGKILL",
    "fork server SIGSEGV",
    "browser SIGKILL",
    "forks refused",
    "reports unwritable",
    "host SIGKILL",
    "host SIGTERM",
    "postgres restart",
    "object store restarted",
    "cache deleted",
    "partition",
    "cancel",
]
FAULT_WEIGHTS: dict[FaultType, int] = {
    "child SIGKILL": 5,
    "child SIGSEGV": 4,
    "child SIGSTOP": 1,
    "fork server SIGKILL": 1,
    "fork server SIGSEGV": 1,
    "browser SIGKILL": 2,
    "forks refused": 1,
    "reports unwritable": 1,
    "host SIGKILL": 1,
    "host SIGTERM": 1,
    "postgres restart": 1,
    "object store restarted": 1,
    "cache deleted": 2,
    "partition": 1,
    "cancel": 1,
}
#: Faults that last a whole round rather than a moment: one host of each round (and whichever
#: host replaces it) runs with its wall clock shifted.
RoundFault = Literal["shifted clock"]
FaultName = FaultType | RoundFault
ALL_FAULTS: tuple[FaultName, ...] = (*get_args(FaultType), *get_args(RoundFault))
#: Faults of a bucket and of the hosts' caches of it (`--store s3` only), and faults of a
#: folder (`--store folder` only: a bucket has no reports folder to put a file in place of).
BUCKET_FAULTS: frozenset[FaultName] = frozenset({"object store restarted", "cache deleted"})
FOLDER_FAULTS: frozenset[FaultName] = frozenset({"reports unwritable"})
#: Faults that need the hosts in network namespaces of their own (root; not `--no-partitions`).
NETWORK_FAULTS: frozenset[FaultName] = frozenset({"partition"})
#: The crash cause a host records for each child fault (see `supervisor.host.deaths`).
CRASH_FAULTS: dict[str, FaultType] = {
    "SIGKILL (likely out of memory)": "child SIGKILL",
    "SIGSEGV": "child SIGSEGV",
}
HUNG_CAUSE = re.compile(r"hung \(no progress for [\d.]+ s\)")
#: Faults after which a job's lease may run out: its host or child stopped renewing it.
LEASE_FAULTS = frozenset({"host SIGKILL", "child SIGSTOP", "postgres restart", "partition"})
#: At most this share of the builds is cancelled (the rest are compared with the calm run).
CANCEL_SHARE = 0.15
#: Seconds between faults: a draw from this range after each one.
FAULT_GAP_SECONDS = (0.3, 2.0)
#: After a fault that found nothing to hit (no busy child, no started host), the next comes
#: this soon instead: short rounds would otherwise pass with hardly a fault.
MISS_GAP_SECONDS = 0.2
#: How long a fault that lasts (forks refused, reports unwritable) holds: a draw from this range.
OUTAGE_SECONDS = (2.0, 6.0)
#: How long a host is cut from the services: from a few of its leases (10 s in the soak) to
#: many, so that other hosts take its jobs while its children still work on them.
PARTITION_SECONDS = (10.0, 90.0)
#: How often a cut host's `/healthz` is asked.
HEALTH_POLL_SECONDS = 1.0
#: How soon a cut host must say it is unhealthy: a statement in flight notices when the
#: host's connection gives up unacknowledged data (`tcp_user_timeout`, 15 s), a new connection
#: within its connect timeout (5 s); plus a few loop turns and back-offs. Shorter cuts may end
#: before the host could know, and are not judged.
HEALTH_BOUND_SECONDS = 25.0
#: How long a host may take to exit after the final SIGTERM (its drain is 10 s).
STOP_TIMEOUT_SECONDS = 60.0
#: How long a host that ignored SIGTERM gets to write its threads' stacks before SIGKILL.
STACK_DUMP_SECONDS = 1.0
#: A round is started only with this much of `--minutes` left: one with no time for faults
#: would only repeat the calm run.
MIN_ROUND_SECONDS = 20.0


@dataclass(frozen=True)
class Fault:
    at: float
    type: FaultType
    target: str
    job_ids: tuple[int, ...]


#: What a fault hit (a description) and the jobs that were running there.
Hit = tuple[str, tuple[int, ...]]


@dataclass
class Outage:
    """A fault that lasts: what it took away, until when, and how to give it back (`restore`
    says what it gave back)."""

    what: str
    ends_at: float
    restore: Callable[[], str]


@dataclass
class Cut:
    """A host cut from the services: when (the soak's clock, and the database's for the
    triggers' records), for how long, and what its `/healthz` said meanwhile."""

    host: HostRun
    began: float
    since: datetime
    watch: Watch
    ended: float | None = None
    polled: float = -math.inf
    #: The host was still running when the cut ended (a host that died meanwhile is not
    #: judged by what its `/healthz` said).
    survived: bool = False

    @property
    def seconds(self) -> float:
        return (self.ended if self.ended is not None else time.monotonic()) - self.began


def fork_server_of(host_pid: int) -> int | None:
    """The pid of the host's fork server: the host's direct child still in the host's process
    group. Job children are direct children too (the host is their subreaper), but each calls
    `setsid` and leads its own group; one forked a moment ago may not have yet, so the oldest
    candidate is taken: the fork server starts before any child it forks."""
    candidates = []
    with contextlib.suppress(psutil.Error, ProcessLookupError):
        group = os.getpgid(host_pid)
        for child in psutil.Process(host_pid).children():
            with contextlib.suppress(psutil.Error, ProcessLookupError):
                if child.status() != psutil.STATUS_ZOMBIE and os.getpgid(child.pid) == group:
                    candidates.append((child.create_time(), child.pid))
    return min(candidates)[1] if candidates else None


def alive(pid: int) -> bool:
    """Whether `pid` runs: a zombie takes signals without a word, and its host's rows in the
    database may still name it (a host cut off cannot write that it reaped it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants now (empty if it is gone)."""
    try:
        return [pid, *(child.pid for child in psutil.Process(pid).children(recursive=True))]
    except psutil.Error:
        return []


#: How forks are refused: a cgroup v1 pids group over the host's whole tree (as root), or a
#: low RLIMIT_NPROC on its fork server (not as root: root's forks ignore the limit).
RefusalMethod = Literal["pids cgroup", "RLIMIT_NPROC"]


@cache
def pids_hierarchy() -> Path | None:
    """The cgroup v1 pids hierarchy, if it is mounted read-write and we may make groups in it."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 4 or fields[2] != "cgroup":
                continue
            if {"pids", "rw"} <= set(fields[3].split(",")):
                probe = Path(fields[1]) / f"storyshelf-chaos-probe-{os.getpid()}"
                with contextlib.suppress(OSError):
                    probe.mkdir()
                    probe.rmdir()
                    return Path(fields[1])
    return None


def forks_refusal_method() -> RefusalMethod | None:
    if pids_hierarchy() is not None:
        return "pids cgroup"
    if os.geteuid() != 0:
        return "RLIMIT_NPROC"
    return None


def pids_cgroup_of(pid: int) -> Path:
    """The pids group `pid` is in, as a folder of the hierarchy."""
    root = pids_hierarchy()
    assert root is not None
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _number, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return root / path.lstrip("/")
    return root


def move_tree(pid: int, group: Path) -> int:
    """Move `pid` and every descendant into `group`, again until none is left outside (a
    process forked meanwhile may have been born in the old group); how many were moved."""
    moved: set[int] = set()
    while new := [process for process in process_tree(pid) if process not in moved]:
        for process in new:
            with contextlib.suppress(ProcessLookupError):
                (group / "cgroup.procs").write_text(str(process))
            moved.add(process)
    return len(moved)


def release_group(group: Path, origin: Path) -> str | None:
    """Move what is left in `group` back to `origin` and remove it; what went wrong, if anything."""
    deadline = time.monotonic() + 5
    while True:
        try:
            for process in (group / "cgroup.procs").read_text().split():
                with contextlib.suppress(ProcessLookupError):
                    (origin / "cgroup.procs").write_text(process)
            group.rmdir()
            return None
        except FileNotFoundError:
            return None
        except OSError as error:
            if time.monotonic() > deadline:
                return f"cgroup {group} not removed: {error}"
            time.sleep(0.1)


def limit_nproc(fork_server: int) -> tuple[str, Callable[[], str]]:
    """Lower the fork server's soft RLIMIT_NPROC to the number of tasks its user runs now, so
    its next fork fails with EAGAIN; the hard limit stays, so the soft one can be raised back."""
    uid = os.getuid()
    tasks = sum(
        process.info["num_threads"] or 0
        for process in psutil.process_iter(["uids", "num_threads"])
        if process.info["uids"] is not None and process.info["uids"].real == uid
    )
    soft, hard = resource.prlimit(fork_server, resource.RLIMIT_NPROC)
    low = tasks if hard == resource.RLIM_INFINITY else min(tasks, hard)
    resource.prlimit(fork_server, resource.RLIMIT_NPROC, (low, hard))

    def restore() -> str:
        with contextlib.suppress(ProcessLookupError):
            resource.prlimit(fork_server, resource.RLIMIT_NPROC, (soft, hard))
        return f"RLIMIT_NPROC of fork server {fork_server} back to {soft}"

    return f"fork server {fork_server}: RLIMIT_NPROC {low} ({tasks} tasks of uid {uid})", restore


def block_folder(folder: Path, away: Path) -> int:
    """Rename `folder` to `away` and put a regular file where it was: writing under it then fails
    with ENOTDIR, for root too (permissions would not stop root). A host may make the folder
    again between the two steps; that one is moved away as well. How many entries went away."""
    block = folder.with_name(f".{folder.name}.block")
    block.write_bytes(b"")
    while True:
        if folder.is_dir():
            if away.is_dir():
                merge_folder(folder, away)
            else:
                folder.rename(away)
        try:
            block.rename(folder)  # fails if a host has just made the folder again
            return len(list(away.iterdir())) if away.is_dir() else 0
        except IsADirectoryError:
            continue


def merge_folder(source: Path, target: Path) -> int:
    """Move `source`'s entries into `target` where `target` has none of that name (the one in
    `target` is the newer), then remove `source`; how many moved."""
    moved = 0
    for entry in source.iterdir():
        if not (target / entry.name).exists():
            entry.rename(target / entry.name)
            moved += 1
    shutil.rmtree(source)
    return moved


def remove_folder(folder: Path) -> int:
    """Remove `folder` and everything in it, while processes may write there (what fails to go,
    made meanwhile, stays); how many files it held."""
    files = sum(len(names) for _directory, _folders, names in os.walk(folder))
    shutil.rmtree(folder, ignore_errors=True)
    return files


def unblock_folder(folder: Path, away: Path) -> str:
    """Take the file away and put the folder back, merged with whatever a host wrote into a
    folder it made meanwhile."""
    folder.unlink()
    if not away.is_dir():
        return f"{folder.name} free again (it did not exist before)"
    try:
        away.rename(folder)  # replaces an empty folder a host may have made meanwhile
        return f"{folder.name} back"
    except OSError:
        return f"{folder.name} back, {merge_folder(away, folder)} entries merged into a new one"


@dataclass(frozen=True)
class SoakSettings:
    hosts: int
    seed: int
    host_options: list[str]
    settle_seconds: float
    work: Path
    faults: frozenset[FaultName]
    forks_refusal: RefusalMethod | None
    clock_library: Path | None
    #: The bucket every run's prefix is in (`s3://name`); None: the artifacts are in folders.
    bucket: str | None = None
    #: The clock shift stops the shifted host's timed waits (`shift_stops_timed_waits`): its
    #: children's hangs are the tool's, not judged.
    shift_stops_waits: bool = False
    #: How hosts in network namespaces reach the services; None: they share the soak's
    #: network (`--no-partitions`).
    routes: Routes | None = None

    def site(self, folder: Path) -> Site:
        """Where the run kept under `folder` keeps its artifacts and runs its hosts."""
        return Site.make(folder, self.bucket, self.hosts)


@dataclass
class RoundReport:
    number: int
    faults: list[Fault]
    jobs: Counter[str]
    retries: int
    crashes_survived: int
    seconds: float
    broken: dict[str, list[str]]
    #: Attempts that ended because the bucket did not answer (None: no bucket).
    store_retries: int | None = None
    #: Children the shifted host killed as hung while it could not beat (not judged).
    unjudged_hangs: int = 0
    #: The partitions: how long each lasted, the leases other hosts took from cut hosts, the
    #: results the triggers saw written (each checked against its writer's lease), and how
    #: soon each judged cut host said it was unhealthy.
    cut_seconds: list[float] = field(default_factory=list)
    leases_taken: int = 0
    writes_checked: int = 0
    unhealthy_after: list[float] = field(default_factory=list)


@dataclass
class Round:
    """One database, one artifacts folder (or bucket prefix), the hosts on them and the faults
    they took."""

    number: int
    url: str
    site: Site
    settings: SoakSettings
    server: TemporaryPostgres
    workload: Workload
    schedule: random.Random
    targets: random.Random
    started: float
    #: The wall-clock shift of the round's shifted host (and of whichever host replaces it).
    clock: ClockShift | None
    #: The soak's object store, when the artifacts are in its bucket.
    object_store: TemporaryObjectStore | None = None
    engine: Engine = field(init=False)
    hosts: list[HostRun] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    cancelled: set[str] = field(default_factory=set)
    #: Every process a host started, as (pid, start time): none may outlive the soak.
    descendants: set[tuple[int, float]] = field(default_factory=set)
    outages: list[Outage] = field(default_factory=list)
    #: The pids groups made this round and the group their processes came from.
    cgroups: list[tuple[Path, Path]] = field(default_factory=list)
    #: Writes of the soak's own that failed for a view (a cancel whose report could not be made).
    view_errors: list[str] = field(default_factory=list)
    #: What the round could not clean up.
    leftovers: list[str] = field(default_factory=list)
    #: The partitions so far, and how many hosts the round has started (each a name of its own).
    cuts: list[Cut] = field(default_factory=list)
    started_hosts: int = 0

    def __post_init__(self) -> None:
        self.engine = connect(self.url)

    # -- hosts

    def live_hosts(self) -> list[HostRun]:
        return [host for host in self.hosts if host.ended_by is None]

    def reachable_hosts(self) -> list[HostRun]:
        """The live hosts not cut off: a host killed or stopped while cut would be replaced by
        one that cannot reach its database to start."""
        routes = self.settings.routes
        return [
            host
            for host in self.live_hosts()
            if routes is None or host.slot is None or not routes.network.is_cut(host.slot)
        ]

    def add_host(
        self,
        clock: ClockShift | None = None,
        machine: Machine | None = None,
        slot: Slot | None = None,
    ) -> None:
        self.started_hosts += 1
        placement = Placement(
            machine,
            slot,
            f"{SOAK_NAME}-{self.number}-{self.started_hosts}",
            METRICS_PORT + self.started_hosts if slot is not None else None,
        )
        host = start_host(
            self.url, self.site, self.settings.host_options, clock, placement, self.settings.routes
        )
        self.hosts.append(host)
        if clock is not None:
            print(f"  host {host.pid} runs with its clock shifted {clock.seconds:+d} s", flush=True)

    def replace(self, host: HostRun) -> None:
        """A host in place of `host`, on the same clock, machine and network slot: the round
        keeps one shifted host, and each machine one host."""
        self.add_host(host.clock, host.machine, host.slot)

    def watch(self) -> None:
        """Note the hosts' descendants, CPU time and exit codes; a host that died unasked is
        replaced."""
        for host in list(self.hosts):
            if host.exit_code is None and host.process.poll() is not None:
                host.exit_code = host.process.returncode
                if host.ended_by is None:
                    host.ended_by = "died"
                    last = host.log_tail(1)
                    print(
                        f"  host {host.pid} died unasked ({exit_status(host.exit_code)}): "
                        f"{last[0] if last else 'empty log'}",
                        flush=True,
                    )
                    self.replace(host)
            if host.exit_code is not None:
                continue
            host.sample_cpu()
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
        """Faults at random until `deadline` or until every job has ended; then every outage
        still on is ended."""
        next_at = time.monotonic() + self.schedule.uniform(*FAULT_GAP_SECONDS)
        chosen = {f: w for f, w in FAULT_WEIGHTS.items() if f in self.settings.faults}
        while time.monotonic() < deadline and self.open_jobs():
            self.watch()
            self.end_outages(time.monotonic())
            self.ask_cut_hosts()
            if chosen and time.monotonic() >= next_at:
                fault: FaultType = self.schedule.choices(list(chosen), list(chosen.values()))[0]
                hold = self.schedule.uniform(*OUTAGE_SECONDS)
                gap = self.schedule.uniform(*FAULT_GAP_SECONDS)
                hit = self.inject_one(fault, hold)
                self.injected(fault, hit)
                next_at = time.monotonic() + (gap if hit is not None else MISS_GAP_SECONDS)
            time.sleep(0.1)
        self.end_outages(math.inf)

    def injected(self, fault: FaultType, hit: Hit | None) -> None:
        if hit is None:
            return  # nothing to hit right now (no child busy, no open build)
        at = self.now()
        self.faults.append(Fault(at, fault, *hit))
        print(f"  [{at:8.2f} s] {fault:<19} {hit[0]} jobs={list(hit[1])}", flush=True)

    def now(self) -> float:
        return round(time.monotonic() - self.started, 2)

    def inject_one(self, fault: FaultType, hold: float) -> Hit | None:
        """Inject `fault`; the lasting ones (forks refused, reports unwritable) for `hold` s."""
        if fault.startswith("child "):
            return self.signal_child(signal.Signals[fault.removeprefix("child ")])
        if fault.startswith("fork server "):
            return self.signal_fork_server(signal.Signals[fault.removeprefix("fork server ")])
        if fault == "browser SIGKILL":
            return self.kill_browser()
        if fault == "forks refused":
            return self.refuse_forks(hold)
        if fault == "reports unwritable":
            return self.block_reports(hold)
        if fault == "host SIGKILL":
            return self.kill_host()
        if fault == "host SIGTERM":
            return self.stop_host()
        if fault == "postgres restart":
            running = self.running_jobs()
            self.server.restart()
            return "server", tuple(running)
        if fault == "object store restarted":
            return self.restart_object_store()
        if fault == "cache deleted":
            return self.delete_cache()
        if fault == "partition":
            return self.partition()
        return self.cancel_a_build()

    def running_jobs(self, **where: Any) -> list[int]:
        def read(conn: Connection) -> list[int]:
            query = select(jobs.c.id).where(jobs.c.status == "running")
            for column, value in where.items():
                query = query.where(jobs.c[column] == value)
            return sorted(conn.execute(query).scalars())

        return retrying(self.engine, read)

    def signal_child(self, sig: signal.Signals) -> Hit | None:
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
        if not alive(pid):
            return None  # dead, its host not yet able to say so (a cut host's rows lag)
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

    def kill_browser(self) -> Hit | None:
        """SIGKILL the Chromium of a child capturing a Storybook: the child must launch another
        and go on; only the story it was rendering may fail.

        The kill is charged to every job the database has on that child: a child holds the
        jobs sent ahead to it as well as the one it runs, and only the child knows which is
        which."""

        def read(conn: Connection) -> dict[int, list[int]]:
            rows = conn.execute(
                select(jobs.c.id, jobs.c.child_pid, jobs.c.data).where(
                    jobs.c.status == "running",
                    jobs.c.kind == "capture",
                    jobs.c.child_pid.is_not(None),
                )
            ).all()
            held: dict[int, list[int]] = defaultdict(list)
            for row in rows:
                held[row.child_pid].append(row.id)
            capturing = {row.child_pid for row in rows if "storybook" in row.data}
            return {pid: sorted(ids) for pid, ids in held.items() if pid in capturing}

        busy = retrying(self.engine, read)
        if not busy:
            return None
        child = self.targets.choice(sorted(busy))
        with contextlib.suppress(psutil.Error):
            for process in psutil.Process(child).children():
                if process.name().startswith("chrom"):
                    process.kill()
                    return f"browser {process.pid} of child {child}", tuple(busy[child])
        return None

    def pick_host(self) -> HostRun | None:
        live = self.reachable_hosts()
        return self.targets.choice(live) if live else None

    def signal_fork_server(self, sig: signal.Signals) -> Hit | None:
        """Kill a host's fork server: the host must start another and go on spawning."""
        servers = [
            (host, server)
            for host in self.live_hosts()
            if host.started and (server := fork_server_of(host.pid)) is not None
        ]
        if not servers:
            return None
        host, server = self.targets.choice(servers)
        try:
            os.kill(server, sig)
        except ProcessLookupError:
            return None
        return f"fork server {server} of host {host.pid}", ()

    def refuse_forks(self, hold: float) -> Hit | None:
        """Make every fork of one host's tree fail with EAGAIN for `hold` s."""
        hosts = [host for host in self.live_hosts() if host.started]
        if self.settings.forks_refusal is None or not hosts:
            return None
        host = self.targets.choice(hosts)
        if self.settings.forks_refusal == "pids cgroup":
            limited = self.limit_pids(host)
        else:
            server = fork_server_of(host.pid)
            if server is None:
                return None
            try:
                limited = limit_nproc(server)
            except ProcessLookupError:
                return None
        what, restore = limited
        ends_at = time.monotonic() + hold
        self.outages.append(Outage(f"forks refused on host {host.pid}", ends_at, restore))
        return f"host {host.pid}: {what} for {hold:.1f} s", self.jobs_held_by(host)

    def limit_pids(self, host: HostRun) -> tuple[str, Callable[[], str]]:
        """Move the host's whole tree into a new pids group whose `pids.max` is the number of
        tasks in it now: no fork of the host, its fork server or its children succeeds (threads
        count too, so none of them starts a thread either). Raised to `max` when the outage ends;
        the group itself is removed at the end of the round, when its processes have exited."""
        root = pids_hierarchy()
        assert root is not None
        origin = pids_cgroup_of(host.pid)
        group = root / f"storyshelf-chaos-{os.getpid()}-{self.number}-{len(self.faults)}"
        group.mkdir()
        self.cgroups.append((group, origin))
        moved = move_tree(host.pid, group)
        tasks = (group / "pids.current").read_text().strip()
        (group / "pids.max").write_text(tasks)
        move_tree(host.pid, group)  # what forked before the limit took hold

        def restore() -> str:
            with contextlib.suppress(FileNotFoundError):
                (group / "pids.max").write_text("max")
            return f"pids.max of {group.name} back to max"

        return f"{moved} processes in {group.name}, pids.max {tasks}", restore

    def block_reports(self, hold: float) -> Hit | None:
        """Make the reports folder unwritable for `hold` s: a regular file in its place."""
        artifacts = self.site.folder
        if artifacts is None or any(o.what == "reports unwritable" for o in self.outages):
            return None
        folder = artifacts / REPORTS_FOLDER
        away = artifacts / f"{REPORTS_FOLDER}.away-{len(self.faults)}"
        moved = block_folder(folder, away)

        def restore() -> str:
            return unblock_folder(folder, away)

        self.outages.append(Outage("reports unwritable", time.monotonic() + hold, restore))
        running = tuple(self.running_jobs())
        return f"{REPORTS_FOLDER}/ ({moved} reports) a file for {hold:.1f} s", running

    def restart_object_store(self) -> Hit | None:
        """Kill the object store and start it again (its objects kept): a job that meets it
        down is retried by the queue, never counted a crash, and its results are the calm
        run's. The jobs running then are named; others claimed meanwhile may meet it too."""
        if self.object_store is None:
            return None
        running = tuple(self.running_jobs())
        began = time.monotonic()
        self.object_store.restart()
        return f"object store, back in {time.monotonic() - began:.1f} s", running

    def delete_cache(self) -> Hit | None:
        """Remove the cache folder of a host holding jobs, scratch and all, while its children
        read from it (as a person or a disk cleaner might): a child must fetch again what it
        finds gone, and no snapshot may fail for it."""
        holding = [
            (host, held)
            for host in self.live_hosts()
            if host.machine is not None and host.started and (held := self.jobs_held_by(host))
        ]
        if not holding:
            return None
        host, held = self.targets.choice(holding)
        assert host.machine is not None
        files = remove_folder(host.machine.cache)
        return f"cache of host {host.pid} ({files} files)", held

    def partition(self) -> Hit | None:
        """Cut a host whose children hold jobs from PostgreSQL and the bucket for 10-90 s (one
        host at a time): its leases run out and other hosts take its jobs while its children
        still work on them; let back, it must record none of them. Its `/healthz` is asked
        meanwhile (`ask_cut_hosts`)."""
        routes = self.settings.routes
        if routes is None or routes.network.cut_slots:
            return None
        holding = [
            (host, held)
            for host in self.reachable_hosts()
            if host.slot is not None and host.started and (held := self.jobs_held_by(host))
        ]
        if not holding:
            return None
        host, held = self.targets.choice(holding)
        slot, port = host.slot, host.metrics_port
        assert slot is not None and port is not None
        hold = self.schedule.uniform(*PARTITION_SECONDS)
        since = retrying(
            self.engine, lambda conn: conn.execute(text("SELECT clock_timestamp()")).scalar_one()
        )
        routes.network.cut(slot)
        cut = Cut(host, time.monotonic(), since, Watch(host.pid, port))
        self.cuts.append(cut)

        def restore() -> str:
            routes.network.heal(slot)
            cut.ended = time.monotonic()
            cut.survived = host.ended_by is None and host.process.poll() is None
            return f"host {host.pid} let back after {cut.seconds:.1f} s"

        self.outages.append(Outage(f"host {host.pid} cut off", cut.began + hold, restore))
        return f"host {host.pid} cut from the services for {hold:.1f} s", held

    def ask_cut_hosts(self) -> None:
        """Ask each cut host's `/healthz` about once a second, from its own namespace."""
        routes = self.settings.routes
        now = time.monotonic()
        for cut in self.cuts:
            if cut.ended is not None or now - cut.polled < HEALTH_POLL_SECONDS:
                continue
            cut.polled = now
            slot = cut.host.slot
            assert routes is not None and slot is not None
            cut.watch.answers.append(
                ask(slot.namespace, routes.network.services, cut.watch.port, now - cut.began)
            )

    def end_outages(self, now: float) -> None:
        """Give back what the outages due by `now` took away."""
        for outage in [outage for outage in self.outages if outage.ends_at <= now]:
            self.outages.remove(outage)
            print(f"  [{self.now():8.2f} s] ended: {outage.what}: {outage.restore()}", flush=True)

    def release_cgroups(self) -> None:
        for group, origin in self.cgroups:
            if (problem := release_group(group, origin)) is not None:
                self.leftovers.append(problem)
        self.cgroups.clear()

    def kill_host(self) -> Hit | None:
        host = self.pick_host()
        if host is None:
            return None
        self.watch()
        held = self.jobs_held_by(host)
        host.process.kill()
        host.ended_by = "sigkill"
        host.exit_code = host.process.wait()
        self.replace(host)
        return f"host {host.pid}", held

    def stop_host(self) -> Hit | None:
        started = [host for host in self.reachable_hosts() if host.started]
        if not started:
            return None
        host = self.targets.choice(started)
        held = self.jobs_held_by(host)
        host.process.send_signal(signal.SIGTERM)
        host.ended_by = "sigterm"
        self.replace(host)
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

    def cancel_a_build(self) -> Hit | None:
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
        try:
            retrying(self.engine, lambda conn: cancel_build(conn, build_id))
        except OSError as error:  # the build's report could not be written: a view failed a write
            self.view_errors.append(f"cancel of build {build_id} failed: {error!r}")
            return f"build {build_id} (refused: {error!r})", tuple(running)
        self.cancelled.add(commit)
        return f"build {build_id}", tuple(running)

    # -- ending

    def kill_hosts(self) -> None:
        """Leave nothing running or limited: the soak was interrupted or failed itself."""
        for host in self.hosts:
            if host.process.poll() is None:
                host.process.kill()
                host.process.wait()
        with contextlib.suppress(OSError):
            self.end_outages(math.inf)
        self.release_cgroups()

    def finish(self) -> None:
        """Let the hosts end every job (bounded), then SIGTERM them and wait for their exit;
        then remove the round's pids groups, empty by now."""
        self.end_outages(math.inf)
        deadline = time.monotonic() + self.settings.settle_seconds
        while self.open_jobs() and time.monotonic() < deadline:
            self.watch()
            time.sleep(0.5)
        self.watch()
        for host in self.live_hosts():
            host.wait_started(timeout=30)
            host.stopped_after_start = host.started
            host.process.send_signal(signal.SIGTERM)
            host.ended_by = "sigterm"
        for host in self.hosts:
            try:
                host.exit_code = host.process.wait(timeout=STOP_TIMEOUT_SECONDS)
            except subprocess.TimeoutExpired:
                host.stop_timed_out = True
                host.process.send_signal(STACK_DUMP_SIGNAL)  # its threads, to the end of its log
                time.sleep(STACK_DUMP_SECONDS)
                host.process.kill()
                host.exit_code = host.process.wait()
        self.release_cgroups()
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
    #: Ended builds without a published report, and why; and those `build ID` could not show.
    reports_missing: list[str]
    #: Each build's commit, by its id.
    commits: dict[int, str] = field(default_factory=dict)
    #: What the round's triggers logged: every lease change and result write.
    ledger: fencing.Ledger = field(default_factory=lambda: fencing.Ledger([], []))


FINISHED_BUILD_STATES = ("passed", "changed", "failed", "cancelled")


#: `build ID`'s exit statuses for a build that ended (it says its verdict by its status).
ENDED_VERDICTS = {BuildExit.PASSED, BuildExit.CHANGED, BuildExit.FAILED}


def look_at_builds(soak_round: Round, build_ids: list[int]) -> list[str]:
    """Check that each of `build_ids` (ended) has its report published: its `report_url`
    recorded and its page stored, in the hosts' own store (the folder, or the bucket: its
    endpoint and credentials are in the soak's environment). Then `build ID` must say each
    build's verdict (`build_verdict`)."""
    store = soak_round.site.store()
    urls = retrying(
        soak_round.engine,
        lambda conn: dict(
            conn.execute(select(builds.c.id, builds.c.report_url).where(builds.c.id.in_(build_ids)))
            .tuples()
            .all()
        ),
    )
    missing = []
    for build_id in build_ids:
        url = urls.get(build_id)
        key = url.removeprefix(f"{soak_round.site.location}/") if url else None
        if key is None or not store.exists(key):
            missing.append(f"build {build_id}: no published report ({url or 'none recorded'})")
    for build_id in build_ids:
        code, last = build_verdict(soak_round, build_id)
        if code not in ENDED_VERDICTS:
            missing.append(f"build {build_id}: `build {build_id}` exited {code}: {last}")
    return missing


def build_verdict(soak_round: Round, build_id: int) -> tuple[int, str]:
    """`python -m supervisor build ID`'s exit status and the last line it wrote to stderr.

    The command's own entry point (its parser, its reading, its verdict) runs in the soak's
    process: a process per build cost a second of CPU each, some 40 s of a one-minute soak's
    round on two cores. The soak's logging is set up again after it, as the command sets its
    own."""
    errors = io.StringIO()
    command = [
        "build", str(build_id), "--log-level", "warning",
        "--database-url", soak_round.url, "--artifacts", soak_round.site.location,
    ]  # fmt: skip
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errors):
            code = supervisor_command(command)
    finally:
        configure_logging("warning")
    last = errors.getvalue().strip().splitlines()[-1:] or ["no output"]
    return code, last[0]


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
            reports_missing=[],
            commits={
                row.id: row.commit for row in conn.execute(select(builds.c.id, builds.c.commit))
            },
        )

    evidence = retrying(soak_round.engine, read)
    evidence.ledger = retrying(soak_round.engine, fencing.read)
    finished = retrying(
        soak_round.engine,
        lambda conn: sorted(
            conn.execute(
                select(builds.c.id).where(builds.c.status.in_(FINISHED_BUILD_STATES))
            ).scalars()
        ),
    )
    evidence.reports_missing = look_at_builds(soak_round, finished)
    return evidence


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
        if result.status not in FINISHED_BUILD_STATES
    ]


def reports_published(evidence: Evidence) -> list[str]:
    """The report is a view, made by its build's `publish` job after the build's end commits:
    a reports folder that could not be written for a while touches no other job (the soak's
    cancels included), and every ended build has its report published in the end."""
    artifacts = evidence.round.site.folder
    # A folder's errors name the report's path; a bucket's, its key.
    named = str(artifacts / REPORTS_FOLDER) if artifacts is not None else f"{REPORTS_FOLDER}/"
    jobs_hit = {
        int(event["job_id"]): f"{event['event']}: {event['error']}"
        for event in evidence.events
        if event.get("job_id") is not None
        and event.get("kind") != "publish"
        and named in str(event.get("error", ""))
    }
    return (
        [f"job {job_id} {what}" for job_id, what in sorted(jobs_hit.items())]
        + evidence.round.view_errors
        + evidence.reports_missing
    )


def results_recorded_once(evidence: Evidence) -> list[str]:
    """A completed shard has exactly its job's snapshots; any other shard has none."""
    broken = [f"build {b}: snapshot {n!r} recorded twice" for b, n in evidence.duplicate_snapshots]
    for job in evidence.jobs:
        if job["shard_id"] is None:
            continue  # a Storybook's plan: its shards' jobs are checked like any other
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
    """Every recorded snapshot of a build not cancelled is what the calm run found (byte for
    byte, for a Storybook's: its captures settle by hash); a build whose jobs all completed has
    the calm run's verdict, counts and shards (a Storybook's plan included: one that failed its
    build for the host's trouble records no snapshot to compare). The one exception: a browser
    killed under a child fails the story it was rendering, so a build may have as many extra
    failed stories as its browsers were killed."""
    kills = _browser_kills_by_build(evidence)
    job_states: dict[str, set[str]] = defaultdict(set)
    for job in evidence.jobs:
        if job["build_id"] is not None:
            job_states[evidence.commits[job["build_id"]]].add(job["status"])
    broken = []
    for commit, result in evidence.results.items():
        if commit in evidence.round.cancelled:
            continue
        calm = evidence.calm[commit]
        excused = kills[commit]
        for name, (status, pixels, index) in sorted(result.snapshots.items()):
            if (status, pixels, index) == calm.snapshots.get(name):
                continue
            if status == "failed" and excused > 0:
                excused -= 1
                continue
            why = f": {result.errors[name][:300]}" if name in result.errors else ""
            broken.append(
                f"build {commit} {name}: {status}/{pixels} (calm: {calm.snapshots.get(name)}){why}"
            )
        if kills[commit] or job_states[commit] != {"completed"}:
            continue  # its verdict may differ by the stories the kills failed, or a failed job
        if (result.status, result.counts, result.shards) != (calm.status, calm.counts, calm.shards):
            broken.append(
                f"build {commit}: {result.status} {result.counts}, {len(result.shards)} shards "
                f"(calm: {calm.status} {calm.counts}, {len(calm.shards)} shards)"
            )
    return broken


def _browser_kills_by_build(evidence: Evidence) -> Counter[str]:
    """How many times a browser was killed under each build's jobs, by the build's commit."""
    build_of_job = {job["id"]: job["build_id"] for job in evidence.jobs}
    kills: Counter[str] = Counter()
    for fault in evidence.round.faults:
        if fault.type == "browser SIGKILL":
            for job_id in fault.job_ids:
                kills[evidence.commits[build_of_job[job_id]]] += 1
    return kills


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
    for job_id in unjudged_hangs(evidence):
        injected[job_id]["child SIGSTOP"] += 1  # the tool's hang: see `shift_stops_timed_waits`
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


def unjudged_hangs(evidence: Evidence) -> list[int]:
    """The jobs whose child the shifted host killed as hung, once per kill, where the clock
    shift stops its timed waits: its children could not beat (`shift_stops_timed_waits`)."""
    if not evidence.round.settings.shift_stops_waits:
        return []
    return [
        int(event["job_id"])
        for host in evidence.round.hosts
        if host.clock is not None
        for event in host.events()
        if event.get("event") == "killing child"
        and event.get("job_id") is not None
        and HUNG_CAUSE.fullmatch(str(event.get("reason", "")))
    ]


def _fault_of(cause: str) -> str:
    if HUNG_CAUSE.fullmatch(cause):
        return "child SIGSTOP"
    return CRASH_FAULTS.get(cause, f"unexplained cause {cause!r}")


def nothing_left_behind(evidence: Evidence) -> list[str]:
    """No scratch file (in the artifacts folder, or in any machine's cache), no surviving
    process a host started, no pids group of the soak's."""
    broken = [
        f"scratch left: {where}{path.name}"
        for where, folder in evidence.round.site.scratch_folders()
        for path in sorted(folder.glob("*"))
    ]
    deadline = time.monotonic() + 10
    while survivors := _survivors(evidence.round.descendants):
        if time.monotonic() > deadline:
            broken += [f"process {pid} survived ({state})" for pid, state in survivors]
            break
        time.sleep(0.2)
    return broken + evidence.round.leftovers


def nothing_recorded_without_a_lease(evidence: Evidence) -> list[str]:
    """DESIGN section 3's fence, read from the database's own log of the round: every result
    a host wrote was written under a lease it held (`fencing.unfenced_writes`), and none by a
    cut host for a job another host took from it after the cut."""
    names = {host.name: host.pid for host in evidence.round.hosts}
    broken = fencing.unfenced_writes(evidence.ledger, names, SOAK_NAME)
    for cut in evidence.round.cuts:
        host = cut.host
        broken += fencing.written_after_taken(evidence.ledger, host.pid, host.name, cut.since)
    return broken


def judged_cuts(soak_round: Round) -> list[Cut]:
    """The cuts long enough for the host to notice (`HEALTH_BOUND_SECONDS`), whose host lived
    through them."""
    return [
        cut
        for cut in soak_round.cuts
        if cut.ended is not None and cut.survived and cut.seconds >= HEALTH_BOUND_SECONDS
    ]


def cut_hosts_say_unhealthy(evidence: Evidence) -> list[str]:
    """A host that cannot reach its database cannot work, and its `/healthz` must say so (503
    `unhealthy`) within `HEALTH_BOUND_SECONDS` of the cut."""
    broken = []
    for cut in judged_cuts(evidence.round):
        first = cut.watch.first_unhealthy()
        if first is not None and first <= HEALTH_BOUND_SECONDS:
            continue
        said = "never said unhealthy" if first is None else f"said unhealthy after {first:.0f} s"
        answers = ", ".join(
            f"{a.at:.0f} s: {a.status or 'no answer'} {a.state}" for a in cut.watch.answers[-6:]
        )
        broken.append(f"host {cut.host.pid}, cut for {cut.seconds:.0f} s: {said} ({answers})")
    return broken


def exit_status(code: int) -> str:
    return f"killed by {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"


def expected_exits(host: HostRun) -> frozenset[int]:
    """The exit codes that mean `host` ended only because it was told to: 0 after SIGTERM (or
    death by it, if it came before the host had set its handlers), death by SIGKILL after
    SIGKILL; a host that ended unasked has none."""
    if host.ended_by == "sigkill":
        return frozenset({-signal.SIGKILL})
    if host.ended_by == "sigterm":
        return frozenset({0} if host.stopped_after_start else {0, -signal.SIGTERM})
    return frozenset()


def hosts_exit_only_when_told(evidence: Evidence) -> list[str]:
    """DESIGN section 3: a host survives the faults of the host itself and exits only when
    told to; each other exit is named with the end of its log, where its reason is."""
    broken = []
    for host in evidence.round.hosts:
        assert host.exit_code is not None
        told = "unasked" if host.ended_by in (None, "died") else f"after {host.ended_by.upper()}"
        if host.stop_timed_out:
            problem = f"did not exit within {STOP_TIMEOUT_SECONDS:.0f} s of SIGTERM"
        elif host.exit_code not in expected_exits(host):
            problem = f"{exit_status(host.exit_code)} {told}"
        else:
            continue
        broken.append(f"host {host.pid} {problem} (log {host.log_path}), its last lines:")
        broken += [f"  | {line}" for line in host.log_tail()]
    return broken


#: A shifted host may spend this many times the busiest other host's CPU rate, plus this many
#: CPU seconds per second, before it counts as spinning (a host 30 s ahead once spent 0.7 s/s;
#: the others' median is no yardstick: a host whose forks are refused does almost nothing,
#: and the shifted host then does its share of the work).
CPU_RATE_FACTOR, CPU_RATE_SLACK = 3.0, 0.1
#: ... and, since a host that ends more jobs spends more, this many times the busiest other
#: host's CPU seconds per job it finished, plus these seconds a job (a shifted host that ended
#: 77 jobs in its 8 s of life spent 0.16 s/s against the others' 0.03, at 17 ms a job against
#: their 36: busy, not spinning).
CPU_PER_JOB_SLACK = 0.05
#: Hosts watched for less than this are too short-lived to compare.
MIN_CPU_OBSERVED_SECONDS = 5.0
#: The shift seen in a host's log may differ from the one asked for by this much.
SHIFT_TOLERANCE_SECONDS = 10.0


def shifted_clock_changes_nothing(evidence: Evidence) -> list[str]:
    """A host whose wall clock is off decides nothing by it (every due, expired and backoff
    decision is the database's): it does not spin, spending no more CPU than the busiest of
    the others, by the second or, when it did more of the work, by the job it finished. Its log shows the shift took effect: its last event's time minus the log file's
    modification time (the kernel's clock); a host killed before it logged anything shows
    nothing, and is not judged by it."""
    broken = []
    rates = {host.pid: host.cpu_rate() for host in evidence.round.hosts}
    jobs = {host.pid: host.jobs_finished() for host in evidence.round.hosts}

    def per_job(pid: int, rate: tuple[float, float]) -> float:
        return rate[0] * rate[1] / max(1, jobs[pid])

    others = [
        (rate[0], per_job(host.pid, rate))
        for host in evidence.round.hosts
        if host.clock is None
        and (rate := rates[host.pid]) is not None
        and rate[1] >= MIN_CPU_OBSERVED_SECONDS
    ]
    usual = max(rate for rate, _per_job in others) if others else None
    usual_per_job = max(cost for _rate, cost in others) if others else None
    for host in evidence.round.hosts:
        if host.clock is None:
            continue
        seen = _log_clock_offset(host)
        if seen is not None and abs(seen - host.clock.seconds) > SHIFT_TOLERANCE_SECONDS:
            broken.append(f"host {host.pid}: asked {host.clock.seconds:+d} s, its log shows {seen}")
        rate = rates[host.pid]
        if rate is None or usual is None or usual_per_job is None:
            continue
        if rate[1] < MIN_CPU_OBSERVED_SECONDS:
            continue
        cost = per_job(host.pid, rate)
        if rate[0] > max(CPU_RATE_FACTOR * usual, usual + CPU_RATE_SLACK) and cost > max(
            CPU_RATE_FACTOR * usual_per_job, usual_per_job + CPU_PER_JOB_SLACK
        ):
            broken.append(
                f"host {host.pid} ({host.clock.seconds:+d} s) spent {rate[0]:.2f} CPU s/s over "
                f"{rate[1]:.0f} s, {cost * 1000:.0f} ms for each of its {jobs[host.pid]} jobs; "
                f"the busiest other host {usual:.2f} s/s, {usual_per_job * 1000:.0f} ms a job"
            )
    return broken


def _log_clock_offset(host: HostRun) -> float | None:
    last = None
    for event in host.events():
        last = event.get("timestamp", last)
    if last is None:
        return None
    stamped = datetime.fromisoformat(str(last)).timestamp()
    return round(stamped - host.log_path.stat().st_mtime, 1)


def _survivors(processes: set[tuple[int, float]]) -> list[tuple[int, str]]:
    """The noted processes still alive, each with what it is: a survivor must be traceable to
    what started it (its command, parent and process group)."""
    alive: list[tuple[int, str]] = []
    for pid, started in sorted(processes):
        with contextlib.suppress(psutil.Error):
            process = psutil.Process(pid)
            if process.create_time() == started:
                command = " ".join(process.cmdline())[:160] or process.name()
                alive.append(
                    (
                        pid,
                        f"{process.status()}, parent {process.ppid()}, "
                        f"group {os.getpgid(pid)}: {command}",
                    )
                )
    return alive


INVARIANTS: dict[str, Check] = {
    "every job ended exactly once, no lease held": every_job_ended_once,
    "every build ended": every_build_ended,
    "results recorded exactly once per completed shard": results_recorded_once,
    "results equal the calm run's": results_equal_calm_run,
    "damaged images fail only their snapshot": damaged_images_fail_only_their_snapshot,
    "failures explained by injected faults": failures_explained,
    "every ended build has its report published": reports_published,
    "hosts exit only when told to: 0 after SIGTERM, or by the SIGKILL sent": (
        hosts_exit_only_when_told
    ),
    "a host with a shifted clock does not spin": shifted_clock_changes_nothing,
    "no scratch, no orphan, no pids group left": nothing_left_behind,
    "a host records nothing without its lease, none after a cut took it": (
        nothing_recorded_without_a_lease
    ),
    "a cut-off host's /healthz says unhealthy": cut_hosts_say_unhealthy,
}


def check(evidence: Evidence) -> dict[str, list[str]]:
    return {name: found for name, invariant in INVARIANTS.items() if (found := invariant(evidence))}


# -- the run ---------------------------------------------------------------------------------


def calm_reference(
    server: TemporaryPostgres, workload: Workload, settings: SoakSettings
) -> dict[str, BuildResult]:
    """The workload run with one host and no faults: what every chaotic run must agree with
    (each repeated build is captured once, `Workload.distinct_builds`)."""
    url = create_database(server, "calm")
    site = settings.site(settings.work / "calm")
    prepare(url, site, workload, settings.host_options, workload.distinct_builds())
    run_to_end(url, site, settings.host_options)
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
    for build in workload.builds:
        if build.same_as is not None:
            results[build.commit] = results[build.same_as]
    return results


def run_round(
    number: int,
    server: TemporaryPostgres,
    workload: Workload,
    settings: SoakSettings,
    calm: dict[str, BuildResult],
    deadline: float,
    object_store: TemporaryObjectStore | None = None,
) -> RoundReport:
    started = time.monotonic()
    url = create_database(server, f"chaos_{number}")
    engine = connect(url)
    retrying(engine, fencing.install)
    engine.dispose()
    site = settings.site(settings.work / f"round-{number}")
    prepare(url, site, workload, settings.host_options)
    clock = None
    if "shifted clock" in settings.faults and settings.clock_library is not None:
        sign = random.Random(f"{settings.seed}/{number}/clock").choice((1, -1))
        clock = ClockShift(sign * CLOCK_SHIFT_SECONDS, settings.clock_library)
    soak_round = Round(
        number,
        url,
        site,
        settings,
        server,
        workload,
        schedule=random.Random(f"{settings.seed}/{number}/schedule"),
        targets=random.Random(f"{settings.seed}/{number}/targets"),
        started=started,
        clock=clock,
        object_store=object_store,
    )
    try:
        slots = settings.routes.network.slots if settings.routes is not None else ()
        for index in range(settings.hosts):
            slot = slots[index] if slots else None
            soak_round.add_host(clock if index == 0 else None, site.machine(index), slot)
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
        store_retries(evidence) if settings.bucket is not None else None,
        len(unjudged_hangs(evidence)),
        [round(cut.seconds, 1) for cut in soak_round.cuts],
        sum(
            len(fencing.taken_from(evidence.ledger, cut.host.pid, cut.host.name, cut.since))
            for cut in soak_round.cuts
        ),
        sum(1 for write in evidence.ledger.writes if write.writer != SOAK_NAME),
        [
            first
            for cut in judged_cuts(soak_round)
            if (first := cut.watch.first_unhealthy()) is not None
        ],
    )


#: How a job's error reads when its bucket did not answer (`ipc.artifacts.s3`).
STORE_DOWN = re.compile(r"the artifact store (did not answer|failed)")


def store_retries(evidence: Evidence) -> int:
    """Attempts that ended because the bucket did not answer: the hosts' events for a job that
    failed, retried or not, with the store's words."""
    return sum(
        1
        for event in evidence.events
        if event.get("event") in ("job failed; retrying", "job failed on its last attempt")
        and STORE_DOWN.search(str(event.get("error", "")))
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
    ]
    if any(report.store_retries is not None for report in reports):
        retried = sum(report.store_retries or 0 for report in reports)
        lines.append(f"attempts ended by the object store not answering: {retried}")
    cuts = [seconds for report in reports for seconds in report.cut_seconds]
    if cuts:
        unhealthy = [after for report in reports for after in report.unhealthy_after]
        lines.append(
            f"partitions: {len(cuts)}, {sum(cuts):.0f} s cut off in all (the longest "
            f"{max(cuts):.0f} s); leases taken from cut hosts: "
            f"{sum(r.leases_taken for r in reports)}; result writes checked against their "
            f"writer's lease: {sum(r.writes_checked for r in reports)}"
        )
        if unhealthy:
            lines.append(
                f"/healthz unhealthy {min(unhealthy):.0f}-{max(unhealthy):.0f} s into the "
                f"{len(unhealthy)} cut(s) of at least {HEALTH_BOUND_SECONDS:.0f} s"
            )
    if unjudged := sum(report.unjudged_hangs for report in reports):
        lines.append(f"hangs on the shifted host not judged (its timed waits stopped): {unjudged}")
    lines += ["invariants:"]
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
    parser.add_argument("--stall-seconds", type=float, default=6.0)
    parser.add_argument(
        "--settle-seconds",
        type=float,
        default=240.0,
        help="after the faults, how long the hosts may take to end every job",
    )
    parser.add_argument("--work", type=Path, help="keep databases' artifacts and logs here")
    parser.add_argument(
        "--store",
        choices=get_args(StoreKind),
        default="folder",
        help="where the artifacts live: one folder every host shares (default), or a bucket on "
        "a SeaweedFS the soak starts, the hosts then sharing nothing but it and PostgreSQL",
    )
    parser.add_argument(
        "--faults",
        type=fault_names,
        help="the faults to inject, separated by commas (default: all those of the store; "
        f"{', '.join(sorted(BUCKET_FAULTS))} need --store s3, "
        f"{', '.join(sorted(FOLDER_FAULTS))} a folder): " + ", ".join(ALL_FAULTS),
    )
    parser.add_argument(
        "--no-partitions",
        action="store_true",
        help="run the hosts in the soak's own network, without latency or partitions (which "
        "need root: each host in a network namespace of its own)",
    )
    return parser.parse_args(argv)


def fault_names(value: str) -> frozenset[FaultName]:
    names = {name.strip() for name in value.split(",") if name.strip()}
    unknown = sorted(names - set(ALL_FAULTS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown fault(s) {unknown}; known: {list(ALL_FAULTS)}")
    return frozenset(name for name in ALL_FAULTS if name in names)


def wanted_faults(
    store: StoreKind, asked: frozenset[FaultName] | None, partitions: bool = True
) -> frozenset[FaultName]:
    """The faults `--faults` asked for; by default every fault, but for a folder not the
    bucket's (which it could not inject), and none of the network's with `--no-partitions`. A
    bucket's default keeps the folder's, which `available_faults` then drops with the line it
    gives every fault that cannot be injected."""
    if asked is not None:
        return asked
    wanted = frozenset(ALL_FAULTS) if partitions else frozenset(ALL_FAULTS) - NETWORK_FAULTS
    return wanted - BUCKET_FAULTS if store == "folder" else wanted


def available_faults(
    wanted: frozenset[FaultName], store: StoreKind = "folder", partitions_off: bool = False
) -> tuple[frozenset[FaultName], int]:
    """`wanted` less the faults this machine, or this store, cannot inject, each dropped with
    one line; and a non-zero status if a dropped one is required (libfaketime under CI=true)."""
    faults = set(wanted)
    unfit = FOLDER_FAULTS if store == "s3" else BUCKET_FAULTS
    if partitions_off and faults & NETWORK_FAULTS:
        print("partition: skipped (--no-partitions: the hosts share the soak's network)")
        faults -= NETWORK_FAULTS
    for fault in sorted(faults & unfit):
        where = "the artifacts are in a bucket" if store == "s3" else "there is no bucket"
        print(f"{fault}: skipped ({where}: --store {store})")
        faults.discard(fault)
    if "forks refused" in faults and forks_refusal_method() is None:
        print("forks refused: skipped (no writable pids cgroup; RLIMIT_NPROC does not bind root)")
        faults.discard("forks refused")
    if "shifted clock" in faults and find_libfaketime() is None:
        missing = "no libfaketime (apt-get install faketime)"
        if os.environ.get("CI") == "true":
            print(f"shifted clock: required in CI, and {missing}", file=sys.stderr)
            return frozenset(faults), 1
        print(f"shifted clock: skipped, every host on the real clock: {missing}")
        faults.discard("shifted clock")
    return frozenset(faults), 0


#: The exit status of a soak that was to partition its hosts on a machine that cannot.
NO_NAMESPACES = 2


def build_network(network: Network, cleanup: contextlib.ExitStack) -> None:
    """Make the soak's namespaces (removing those a killed soak left) and move the soak into
    the services' one, before any server starts there; removed when `cleanup` closes."""
    for stale in namespaces.remove_stale():
        print(f"removed network namespace {stale}, left by a soak that is gone")
    cleanup.callback(_remove_network, network)
    network.build()
    print(
        f"network: {len(network.slots)} host namespaces behind {network.services}, "
        f"{LATENCY_MS:g} ms each way; cuts by {network.method}",
        flush=True,
    )


def _remove_network(network: Network) -> None:
    for problem in network.remove():
        print(f"network namespace not removed: {problem}", file=sys.stderr)


def start_object_store() -> TemporaryObjectStore:
    """The soak's SeaweedFS with its bucket; its endpoint and credentials go in the soak's
    environment, for its own uploads and checks and for every process it starts (hosts,
    `build ID`)."""
    object_store = TemporaryObjectStore(BUCKET).start()
    os.environ.update(object_store.environment())
    print(f"artifacts: s3://{BUCKET}/<run> on SeaweedFS at {object_store.endpoint}", flush=True)
    return object_store


def run_rounds(
    server: TemporaryPostgres,
    object_store: TemporaryObjectStore | None,
    workload: Workload,
    settings: SoakSettings,
    minutes: float,
    began: float,
) -> list[RoundReport]:
    """The calm run, then rounds until `minutes` have passed (at least one)."""
    calm = calm_reference(server, workload, settings)
    print(f"calm run done in {time.monotonic() - began:.0f} s", flush=True)
    deadline = time.monotonic() + minutes * 60
    reports: list[RoundReport] = []
    while not reports or deadline - time.monotonic() > MIN_ROUND_SECONDS:
        number = len(reports) + 1
        print(f"round {number}:", flush=True)
        reports.append(run_round(number, server, workload, settings, calm, deadline, object_store))
    return reports


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
    faults, status = available_faults(
        wanted_faults(args.store, args.faults, not args.no_partitions),
        args.store,
        args.no_partitions,
    )
    if status:
        return status
    network = None
    if not args.no_partitions:
        why = namespaces.unavailable(os.geteuid())
        if why is not None:
            print(
                f"scripts/chaos: {why}; the hosts' partitions need it "
                "(--no-partitions runs the soak without them)",
                file=sys.stderr,
            )
            return NO_NAMESPACES
        network = Network(args.hosts, namespaces.cut_method(), os.getpid())
    if args.store == "s3":
        try:
            find_weed()
        except ObjectStoreNotFound as error:
            print(f"scripts/chaos --store s3: {error}", file=sys.stderr)
            return 1
    work = args.work or Path(tempfile.mkdtemp(prefix="storyshelf-chaos-"))
    clock_library = find_libfaketime() if "shifted clock" in faults else None
    waits_stop = clock_library is not None and shift_stops_timed_waits(clock_library)
    if waits_stop:
        print(
            f"shifted clock: {clock_library} stops Python's timed waits (wolfcw/libfaketime#390):"
            " the shifted host's children cannot beat, so the hangs it finds are not judged"
        )
    settings = SoakSettings(
        args.hosts,
        args.seed,
        options,
        args.settle_seconds,
        work,
        faults,
        forks_refusal_method() if "forks refused" in faults else None,
        clock_library,
        f"s3://{BUCKET}" if args.store == "s3" else None,
        waits_stop,
    )
    print(f"chaos soak: seed {args.seed}, work folder {work}", flush=True)
    print(f"faults: {', '.join(sorted(faults)) or 'none'}", flush=True)
    if settings.forks_refusal is not None:
        print(f"forks refused by {settings.forks_refusal}", flush=True)
    workload = make_workload(
        work / "uploads",
        builds=args.builds,
        snapshots=args.snapshots,
        shards=args.shards,
        seed=args.seed,
    )
    os.environ["PGAPPNAME"] = SOAK_NAME
    with contextlib.ExitStack() as servers:
        if network is not None:
            build_network(network, servers)
        server = TemporaryPostgres().start()
        servers.callback(server.stop)
        object_store = None
        if settings.bucket is not None:
            object_store = start_object_store()
            servers.callback(object_store.stop)
        if network is not None:
            routes = start_routes(network, server, object_store)
            servers.callback(routes.stop)
            settings = replace(settings, routes=routes)
        reports = run_rounds(server, object_store, workload, settings, args.minutes, began)
    print(summarize(reports, time.monotonic() - began), flush=True)
    broken = sorted({name for report in reports for name in report.broken})
    if broken:
        print("invariants broken: " + "; ".join(broken), file=sys.stderr)
        return 1
    return 0
