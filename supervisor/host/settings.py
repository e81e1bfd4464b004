"""Settings of the host: command-line options with `STORYSHELF_*` environment fallbacks.

Every tunable carries its unit in its name and its reason beside it. The defaults run the host
with nothing else installed: a SQLite file and an artifacts folder under `./.storyshelf/`.
Settings that cannot work together are named by `HostSettings.problems()`, and `run` refuses
them before it starts anything.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ipc.artifacts.location import DEFAULT_CACHE_DIR, DEFAULT_CACHE_MIB
from supervisor.host.cadence import CANCEL_CHECK_SECONDS, Cadence
from supervisor.metrics.address import AddressError, parse_address

DEFAULT_HOME = Path(".storyshelf")
#: The embedded default: a SQLite file of this host's own, which commands migrate by themselves.
EMBEDDED_DATABASE_URL = f"sqlite:///{DEFAULT_HOME / 'storyshelf.db'}"
DEFAULT_ARTIFACTS = DEFAULT_HOME / "artifacts"
#: The longest stall a lease leaves room for, as a share of the lease: progress renews the lease
#: at most every quarter lease, so a child that falls silent may leave only three quarters of
#: it; the hung child must be killed before that runs out, or another host could take the job
#: while it still runs here. Two thirds leaves a twelfth of the lease (5 s of the default 60 s)
#: for the loop to notice the stall (it sleeps at most 1 s) and record the crash.
STALL_SHARE_OF_LEASE = 2 / 3


def default_database_url() -> str:
    """`STORYSHELF_DATABASE_URL`, else the embedded default."""
    return os.environ.get("STORYSHELF_DATABASE_URL") or EMBEDDED_DATABASE_URL


def default_artifacts() -> str:
    """`STORYSHELF_ARTIFACTS`, else `./.storyshelf/artifacts`."""
    return os.environ.get("STORYSHELF_ARTIFACTS") or str(DEFAULT_ARTIFACTS)


@dataclass(frozen=True)
class HostSettings:
    """What `python -m supervisor run` is tuned by."""

    database_url: str = field(default_factory=default_database_url)
    #: Where builds are stored: a folder, or `s3://bucket/prefix` (`ipc.artifacts.location`).
    artifacts: str = field(default_factory=default_artifacts)
    #: This host's cache of a bucket's files, which its children read through, and its bound.
    cache_dir: Path = DEFAULT_CACHE_DIR
    cache_mib: int = DEFAULT_CACHE_MIB
    #: Children to run at once; None sizes it from the CPUs and memory we may use.
    concurrency: int | None = None
    #: How long a claimed job is ours without a renewal.
    lease_seconds: float = 60.0
    #: A child that reports no progress for this long is hung: killed, and the job counts a crash.
    #: At most `STALL_SHARE_OF_LEASE` of the lease, so a hung child is stopped before another
    #: host could take its job.
    stall_seconds: float = 40.0
    #: Crashes of one job before it is failed with `fail_crashed_capture`.
    max_crashes: int = 3
    #: Retry delay after the first failure, doubled per attempt up to `backoff_max_seconds`.
    backoff_base_seconds: float = 2.0
    backoff_max_seconds: float = 300.0
    #: On SIGTERM, how long running jobs may finish before they are released (inside the 30 s a
    #: container platform usually grants between SIGTERM and SIGKILL).
    drain_seconds: float = 25.0
    #: A child is replaced after this many jobs (with jitter), to bound what native code leaks.
    max_jobs_per_child: int = 500
    #: Resident memory above which a child is recycled after its job.
    soft_rss_bytes: int = 1536 * 2**20
    #: Resident memory above which a child is killed at once (a crash, reason "memory limit").
    hard_rss_bytes: int = 3072 * 2**20
    #: The browser children drive for Storybook builds (`--chromium`); None: Debian's
    #: headless shell, else its Chromium (`ipc.storybook.DEFAULT_CHROMIUMS`). The host starts no browser: its
    #: children get the path in their environment.
    chromium: str | None = None
    #: Memory budget per child used to size concurrency.
    child_memory_bytes: int = 700 * 2**20
    #: Children that die faster than this without completing a job make spawning back off.
    restart_limit: int = 5
    restart_window_seconds: float = 30.0
    #: Exit when the queue is empty (`run --drain`), for tests, demos and batch runs.
    exit_when_idle: bool = False
    cadence: Cadence = field(default_factory=Cadence)
    #: How often running jobs' rows are read for a cancel (at once on NOTIFY).
    cancel_check_seconds: float = CANCEL_CHECK_SECONDS
    #: Host identity written to `locked_by`; unique per process.
    host_id: str = ""
    #: Where `/metrics` and `/healthz` are served (`HOST:PORT`, port 0 picks one); None: not
    #: served (`supervisor.metrics.server`).
    metrics_address: str | None = None

    def problems(self) -> list[str]:
        """Why these settings cannot work, in the words of `run`'s options; empty when they can.

        Checked at start, so that a host never runs with a lease that lapses under a live child
        or a pool that cannot hold a child; each problem names the option that fixes it.
        """
        found = [
            f"{flag} must be more than 0, not {value:g}"
            for flag, value in (
                ("--lease-seconds", self.lease_seconds),
                ("--stall-seconds", self.stall_seconds),
                ("--backoff-base-seconds", self.backoff_base_seconds),
                ("--soft-rss-mib", self.soft_rss_bytes / 2**20),
                ("--hard-rss-mib", self.hard_rss_bytes / 2**20),
                ("--poll-seconds", self.cadence.idle_seconds),
            )
            if not value > 0
        ]
        found += [
            f"{flag} must be 1 or more, not {value}"
            for flag, value in (
                ("--cache-mib", self.cache_mib),
                ("--concurrency", self.concurrency),
                ("--max-crashes", self.max_crashes),
                ("--max-jobs-per-child", self.max_jobs_per_child),
            )
            if value is not None and value < 1
        ]
        if self.chromium is not None and not _executable(self.chromium):
            found.append(f"--chromium {self.chromium}: no executable there")
        if self.metrics_address is not None:
            try:
                parse_address(self.metrics_address)
            except AddressError as error:
                found.append(f"--metrics-address {error}")
        if self.drain_seconds < 0:
            found.append(f"--drain-seconds must be 0 or more, not {self.drain_seconds:g}")
        longest_stall = self.lease_seconds * STALL_SHARE_OF_LEASE
        if self.lease_seconds > 0 and self.stall_seconds > longest_stall:
            found.append(
                f"--stall-seconds {self.stall_seconds:g} leaves no room to renew the lease: with "
                f"--lease-seconds {self.lease_seconds:g} it must be at most {longest_stall:g} "
                "(two thirds of the lease)"
            )
        return found


def _executable(path: str) -> bool:
    """Whether `path` names a program (a path, or a name looked up on PATH) that can be run."""
    return shutil.which(path) is not None
