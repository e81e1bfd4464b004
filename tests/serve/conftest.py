"""Fixtures of the `serve` tests: real builds with changes, made by a real host, and real servers.

Builds are made as CI makes them: the demo's screenshots uploaded (`store_images`,
`enqueue_build`) and captured by `python -m supervisor run --drain`, which also publishes each
report. A `main` build first, accepted as it ends, then branch builds of the demo's branch
variant (four stories changed, one new), several at once so that one host run makes them all:
each test that records a decision takes a build of its own (`Reviewable.take`), and a test that
is refused checks that its build is as it was.

Servers are `python -m supervisor serve` on a free loopback port, on the same database and
store, with and without a review token.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from ipc.artifacts.location import open_store
from supervisor.builds.uploads import enqueue_build, store_images
from supervisor.commands.demo_images import write_demo_images
from supervisor.db.connection import connect, transaction
from supervisor.db.migrate import upgrade
from supervisor.db.tables import branch_baselines, builds, reviews
from tests.conftest import _truncate_all
from tests.hosts import FAST, ROOT, HostProcess, wait_for

PROJECT = "web"
TOKEN = "s3cret-review-token"
#: Branch builds made per module: one per test that records a decision, and one to refuse.
BRANCH_BUILDS = 5
#: The demo branch changes four of the eight stories and adds one.
CHANGED, NEW = 4, 1


def demo_folder(root: Path, variant: str) -> Path:
    """The demo's screenshots of `variant` (`baseline` or `branch`), written once under `root`."""
    folder = root / f"demo-{variant}"
    if not folder.exists():
        write_demo_images(folder, "baseline" if variant == "baseline" else "branch")
    return folder


def enqueue(database_url: str, artifacts: str, folder: Path, branch: str) -> int:
    """An upload of `folder` as a build of `branch`; its id."""
    engine = connect(database_url)
    try:
        images = store_images(open_store(artifacts), folder)
        with transaction(engine) as conn:
            return enqueue_build(conn, project=PROJECT, branch=branch, images=images).build_id
    finally:
        engine.dispose()


def drain(database_url: str, artifacts: str, workdir: Path) -> None:
    """A host run until the queue is empty: every queued build captured, every report published."""
    host = HostProcess(database_url, artifacts, *FAST, "--drain", workdir=workdir)
    try:
        assert host.wait(90) == 0, host.log_tail()
    finally:
        if host.process.poll() is None:
            host.process.kill()
            host.process.wait(10)


@dataclass
class Reviewable:
    """A database with an accepted `main` build and untouched branch builds with changes."""

    database_url: str
    artifacts: str
    workdir: Path
    main_id: int
    branch_builds: list[int]
    taken: set[int] = field(default_factory=set)

    def take(self) -> int:
        """A branch build no test has taken yet."""
        for build_id in self.branch_builds:
            if build_id not in self.taken:
                self.taken.add(build_id)
                return build_id
        raise AssertionError(f"more than {BRANCH_BUILDS} tests took a branch build")

    def engine(self) -> Engine:
        return connect(self.database_url)

    def branch_of(self, build_id: int) -> str:
        return f"feature-{self.branch_builds.index(build_id)}"


def make_reviewable(database_url: str, artifacts: str, workdir: Path) -> Reviewable:
    """The `main` build captured and accepted, then `BRANCH_BUILDS` branch builds captured."""
    workdir.mkdir(parents=True, exist_ok=True)
    main_id = enqueue(database_url, artifacts, demo_folder(workdir, "baseline"), "main")
    drain(database_url, artifacts, workdir)
    branch = demo_folder(workdir, "branch")
    ids = [
        enqueue(database_url, artifacts, branch, f"feature-{index}")
        for index in range(BRANCH_BUILDS)
    ]
    drain(database_url, artifacts, workdir)
    engine = connect(database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(builds.c.id, builds.c.status, builds.c.report_url).where(
                    builds.c.id.in_([main_id, *ids])
                )
            ).all()
    finally:
        engine.dispose()
    statuses = {row.id: (row.status, row.report_url is not None) for row in rows}
    assert statuses[main_id] == ("passed", True)
    assert all(statuses[build_id] == ("changed", True) for build_id in ids), statuses
    return Reviewable(database_url, artifacts, workdir, main_id, ids)


def fresh_database(request: pytest.FixtureRequest, kind: str, folder: Path) -> str:
    """A migrated, empty database of `kind` for a module (as `database_url` makes one per test)."""
    if kind == "sqlite":
        url = f"sqlite:///{folder / 'storyshelf.db'}"
        engine = connect(url)
        upgrade(engine)
    else:
        url = request.getfixturevalue("postgres_url")
        engine = connect(url)
        _truncate_all(engine)
    engine.dispose()
    return url


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def reviewable(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Reviewable:
    """Builds to review, on PostgreSQL and on SQLite, with a folder store."""
    folder = tmp_path_factory.mktemp(f"reviewable-{request.param}")
    url = fresh_database(request, request.param, folder)
    return make_reviewable(url, str(folder / "artifacts"), folder)


@dataclass
class Served:
    """One `python -m supervisor serve`."""

    process: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def serve(
    database_url: str,
    artifacts: str,
    workdir: Path,
    *options: str,
    token: str | None = TOKEN,
    environment: dict[str, str] | None = None,
) -> Served:
    """`serve` on a free loopback port, once it says where it listens."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(environment or {})}
    env.pop("STORYSHELF_REVIEW_TOKEN", None)
    if token is not None:
        env["STORYSHELF_REVIEW_TOKEN"] = token
    stamp = f"{os.getpid()}-{len(list(workdir.glob('serve-*.out')))}"
    out, log_path = workdir / f"serve-{stamp}.out", workdir / f"serve-{stamp}.log"
    command = [
        sys.executable, "-m", "supervisor", "serve", "--address", "127.0.0.1:0",
        "--database-url", database_url, "--artifacts", artifacts, "--log-level", "debug",
        *options,
    ]  # fmt: skip
    with out.open("wb") as stdout, log_path.open("wb") as stderr:
        process = subprocess.Popen(command, stdout=stdout, stderr=stderr, env=env, cwd=workdir)

    def listening() -> str | None:
        if process.poll() is not None:
            raise AssertionError(f"serve exited {process.returncode}: {log_path.read_text()}")
        found = re.search(r"serving (http://\S+?)/ ", out.read_text())
        return found.group(1) if found else None

    return Served(process, wait_for(listening, 30), log_path)


def stop(served: Served) -> None:
    if served.process.poll() is None:
        served.process.terminate()
        try:
            served.process.wait(10)
        except subprocess.TimeoutExpired:
            served.process.kill()
            served.process.wait(10)


@pytest.fixture(scope="module")
def servers(reviewable: Reviewable) -> Iterator[Callable[..., Served]]:
    """Starts servers on the module's builds; each stopped at the module's end."""
    started: list[Served] = []

    def start(*options: str, token: str | None = TOKEN) -> Served:
        served = serve(
            reviewable.database_url, reviewable.artifacts, reviewable.workdir, *options, token=token
        )
        started.append(served)
        return served

    yield start
    for served in started:
        stop(served)


@pytest.fixture(scope="module")
def writable(servers: Callable[..., Served]) -> Served:
    """The module's server with a review token."""
    return servers()


@pytest.fixture(scope="module")
def read_only(servers: Callable[..., Served]) -> Served:
    """The module's server without one."""
    return servers(token=None)


def review_facts(database_url: str, build_id: int) -> dict[str, Any]:
    """What a review changes: the build's review state, its decisions, the branch baselines."""
    engine = connect(database_url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                select(builds.c.review, builds.c.project_id, builds.c.branch).where(
                    builds.c.id == build_id
                )
            ).one()
            decisions = conn.execute(
                select(func.count()).select_from(reviews).where(reviews.c.build_id == build_id)
            ).scalar_one()
            adopted = conn.execute(
                select(func.count())
                .select_from(branch_baselines)
                .where(
                    branch_baselines.c.project_id == row.project_id,
                    branch_baselines.c.branch == row.branch,
                )
            ).scalar_one()
    finally:
        engine.dispose()
    return {"review": row.review, "decisions": decisions, "branch_baselines": adopted}
