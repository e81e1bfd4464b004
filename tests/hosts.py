"""Running real hosts in tests: `python -m supervisor run` as a subprocess, its JSON log, the jobs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import pytest
from sqlalchemy import Engine, select

from supervisor.db import queue
from supervisor.db.connection import DatabaseUnavailable, transaction
from supervisor.db.tables import builds, jobs, projects

ROOT = Path(__file__).resolve().parent.parent
#: Short leases, stalls and backoffs, so that the tests see every path within seconds.
FAST = (
    "--concurrency", "2", "--lease-seconds", "10", "--stall-seconds", "3",
    "--backoff-base-seconds", "0.1", "--poll-seconds", "0.3", "--drain-seconds", "10",
)  # fmt: skip

T = TypeVar("T")
#: How long a test waits for what a host, a server or a browser will do before it fails: a
#: guard for a machine the suite's parallel workers keep busy, not a promise (each promise's
#: own bound is asserted where it is made).
PATIENCE = 60.0


def wait_for(
    predicate: Callable[[], T | Literal[False] | None],
    timeout: float = PATIENCE,
    interval: float = 0.05,
) -> T:
    """Poll until `predicate` returns something truthy; fail the test after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except DatabaseUnavailable:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {predicate}")
        time.sleep(interval)


class HostProcess:
    """One `python -m supervisor run`, logging JSON to a file."""

    def __init__(
        self,
        database_url: str,
        artifacts: Path | str,
        *options: str,
        plugins: str = "tests.kinds",
        workdir: Path | None = None,
        wrapper: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
    ) -> None:
        """A host on `artifacts` (a folder, or a bucket's `s3://` location), its log and its
        cache in `workdir` (by default the artifacts folder's parent): one of its own, as a
        host on its own machine has. `wrapper` runs it (`setpriv ...`), with `environment`
        over this process's."""
        workdir = workdir or Path(artifacts).parent
        started = time.monotonic_ns()
        self.log_path = workdir / f"host-{started}.log"
        env = {
            **os.environ,
            "STORYSHELF_PLUGINS": plugins,
            "PYTHONPATH": str(ROOT),
            "STORYSHELF_LOG_LEVEL": "debug",
            **(environment or {}),
        }
        command = [
            *wrapper, sys.executable, "-m", "supervisor", "run",
            "--database-url", database_url, "--artifacts", str(artifacts),
            "--cache-dir", str(workdir / f"cache-{started}"), *options,
        ]  # fmt: skip
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT
            )

    @property
    def pid(self) -> int:
        return self.process.pid

    def events(self, name: str | None = None, **fields: Any) -> list[dict[str, Any]]:
        found = []
        for line in self.log_path.read_text().splitlines():
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if (name is None or event.get("event") == name) and all(
                event.get(k) == v for k, v in fields.items()
            ):
                found.append(event)
        return found

    def wait_for_event(self, name: str, timeout: float = PATIENCE, **fields: Any) -> dict[str, Any]:
        return wait_for(lambda: next(iter(self.events(name, **fields)), None), timeout)

    def signal(self, number: signal.Signals) -> None:
        self.process.send_signal(number)

    def wait(self, timeout: float = PATIENCE) -> int:
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"host did not exit; log:\n{self.log_path.read_text()[-4000:]}"
            ) from None

    def stop(self, *, at_once: bool = False) -> int:
        """SIGTERM, then wait for the drain; `at_once`: a second SIGTERM once it drains, which
        gives running jobs back instead of waiting for them."""
        if self.process.poll() is None:
            self.signal(signal.SIGTERM)
            if at_once:
                self.wait_for_event("draining")
                self.signal(signal.SIGTERM)
        return self.wait()

    def log_tail(self) -> str:
        return self.log_path.read_text()[-6000:]


#: Starts a host with these options (the `start_host` fixtures).
StartHost = Callable[..., HostProcess]


def hosts(
    database_url: str, artifacts: Path | str, workdir: Path | None = None
) -> Iterator[Callable[..., HostProcess]]:
    """A factory of hosts that are all killed at the end of the test."""
    started: list[HostProcess] = []

    def start(
        *options: str,
        plugins: str = "tests.kinds",
        wrapper: Sequence[str] = (),
        environment: Mapping[str, str] | None = None,
    ) -> HostProcess:
        host = HostProcess(
            database_url,
            artifacts,
            *options,
            plugins=plugins,
            workdir=workdir,
            wrapper=wrapper,
            environment=environment,
        )
        started.append(host)
        return host

    yield start
    for host in started:
        if host.process.poll() is None:
            host.process.kill()
            host.process.wait(10)


def enqueue(engine: Engine, kind: str, data: dict[str, Any] | None = None, **options: Any) -> int:
    with transaction(engine) as conn:
        return queue.enqueue(conn, kind, data or {}, **options)


def job(engine: Engine, job_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(jobs).where(jobs.c.id == job_id)).one()._mapping)


def make_build(engine: Engine) -> int:
    """A project and a build to hang jobs on (for cancels, which act on builds)."""
    with transaction(engine) as conn:
        project = conn.execute(
            projects.insert().values(name="p").returning(projects.c.id)
        ).scalar_one()
        build: int = conn.execute(
            builds.insert().values(project_id=project, branch="b").returning(builds.c.id)
        ).scalar_one()
    return build


def build_row(engine: Engine, build_id: int) -> dict[str, Any]:
    with engine.connect() as conn:
        return dict(conn.execute(select(builds).where(builds.c.id == build_id)).one()._mapping)


def build_ended(engine: Engine, build_id: int, timeout: float = PATIENCE) -> dict[str, Any]:
    """The build's row once it finished (its verdict given; its report may still be queued)."""
    return wait_for(
        lambda: (row := build_row(engine, build_id))["finished_at"] is not None and row, timeout
    )


def ended(engine: Engine, job_id: int, timeout: float = 30.0) -> dict[str, Any]:
    """The job's row once it reached a final state."""
    return wait_for(
        lambda: (
            (row := job(engine, job_id))["status"] in ("completed", "failed", "cancelled") and row
        ),
        timeout,
    )


def running_child(host: HostProcess, job_id: int, timeout: float = PATIENCE) -> int:
    """The pid of the child running the job, once the child accepted it.

    Not as soon as the job's row names a child: the claim writes the pid before the job is
    sent, and a child killed before it accepts the job costs no crash.
    """
    return int(host.wait_for_event("job accepted", timeout, job_id=job_id)["child_pid"])


#: For a test of the host's own supervision (its children, signals, forks and limits), whose
#: database statements are those the tests on both databases already run: on SQLite only, so
#: that the suite stays within its time.
SUPERVISION_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
