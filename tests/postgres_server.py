"""A throwaway PostgreSQL server for tests, benchmarks and the chaos soak.

initdb and pg_ctl in a temporary folder, on a free loopback port, removed at the end. PostgreSQL
refuses to run as root, so as root the server runs as the `postgres` user (through `runuser`) in
a folder that user owns; as anyone else it runs as that user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tests.required import unavailable

#: Durability is not what these servers are for; these make them start and write fast.
FAST_SETTINGS = (
    "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
    "-c max_connections=300 -c shared_buffers=128MB"
)


class PostgresNotFound(RuntimeError):
    """initdb / pg_ctl are not installed."""


def find_bindir() -> Path:
    """The folder holding initdb and pg_ctl: on PATH, or Debian's versioned folder."""
    found = shutil.which("initdb")
    if found and shutil.which("pg_ctl"):
        return Path(os.path.realpath(found)).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    raise PostgresNotFound("initdb and pg_ctl were not found (install PostgreSQL's server package)")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class TemporaryPostgres:
    """Start with `start()`, stop and remove with `stop()`; `url` is a SQLAlchemy URL."""

    def __init__(self) -> None:
        self.bindir = find_bindir()
        self.port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="storyshelf-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self._as_postgres = os.geteuid() == 0
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self.url = f"postgresql+psycopg://storyshelf@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            command = ["runuser", "-u", "postgres", "--", *command]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{args[0]} failed: {result.stdout}{result.stderr}{log[-2000:]}")

    def start(self) -> TemporaryPostgres:
        self._run(
            "initdb",
            "-D",
            str(self.data),
            "-U",
            "storyshelf",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        self._pg_ctl("start")
        return self

    def _pg_ctl(self, action: str, *extra: str) -> None:
        options = f"-p {self.port} -h 127.0.0.1 -k {self.root} {FAST_SETTINGS}"
        self._run(
            "pg_ctl", action, "-D", str(self.data), "-l", str(self.log), "-w", "-o", options, *extra
        )

    def restart(self) -> None:
        """Restart the server (fast shutdown: every connection is dropped)."""
        self._pg_ctl("restart", "-m", "fast")

    def stop_server(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "stop", "-D", str(self.data), "-m", mode, "-w")

    def start_server(self) -> None:
        self._pg_ctl("start")

    def stop(self) -> None:
        """Stop the server and remove its folder."""
        with contextlib.suppress(RuntimeError):
            self.stop_server("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


def own_postgres_server() -> Iterator[TemporaryPostgres]:
    """A started server for a fixture to yield, stopped after; without PostgreSQL's binaries
    the tests that need it are skipped, or fail under `CI=true`."""
    try:
        server = TemporaryPostgres().start()
    except PostgresNotFound as error:
        unavailable("PostgreSQL", error)
    try:
        yield server
    finally:
        server.stop()
