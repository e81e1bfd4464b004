"""Settings of the host: command-line options with `STORYSHELF_*` environment fallbacks.

Every tunable carries its unit in its name and its reason beside it. The defaults run the host
with nothing else installed: a SQLite file and an artifacts folder under `./.storyshelf/`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from supervisor.host.cadence import CANCEL_CHECK_SECONDS, Cadence

DEFAULT_HOME = Path(".storyshelf")


def default_database_url() -> str:
    """`STORYSHELF_DATABASE_URL`, else a SQLite file under `./.storyshelf/`."""
    return (
        os.environ.get("STORYSHELF_DATABASE_URL") or f"sqlite:///{DEFAULT_HOME / 'storyshelf.db'}"
    )


def default_artifacts() -> Path:
    """`STORYSHELF_ARTIFACTS`, else `./.storyshelf/artifacts`."""
    return Path(os.environ.get("STORYSHELF_ARTIFACTS") or DEFAULT_HOME / "artifacts")


@dataclass(frozen=True)
class HostSettings:
    """What `python -m supervisor run` is tuned by."""

    database_url: str = field(default_factory=default_database_url)
    artifacts: Path = field(default_factory=default_artifacts)
    #: Children to run at once; None sizes it from the CPUs and memory we may use.
    concurrency: int | None = None
    #: How long a claimed job is ours without a renewal.
    lease_seconds: float = 60.0
    #: A child that reports no progress for this long is hung: killed, and the job counts a crash.
    #: Shorter than the lease, so a hung child is stopped before another host could take its job.
    stall_seconds: float = 45.0
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
