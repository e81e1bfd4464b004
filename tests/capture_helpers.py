"""Helpers for the capture tests: upload a folder as a build, and run its jobs in-process.

`run_jobs` plays the host's part of DESIGN section 3 without children: claim, the kind's
`prepare` in a transaction, the child's handler in this process, then ack and `record` in one
transaction (nothing recorded when the ack finds the job no longer ours), until no job is due:
a build's end queues its `publish` job, which writes its report.
"""

from __future__ import annotations

import sys
from collections.abc import Collection
from pathlib import Path
from typing import Any

import structlog
from sqlalchemy import Engine

from child.worker.handlers import registered_handlers
from ipc.artifacts.location import open_store
from ipc.artifacts.store import ArtifactStore
from supervisor.builds import uploads
from supervisor.builds.registry import registered_kinds
from supervisor.commands import main as cli
from supervisor.commands.demo_images import Canvas
from supervisor.db import queue
from supervisor.db.connection import transaction

LEASE_SECONDS = 60.0

#: Where a test's artifacts are: a store, or a folder (the embedded default's store).
Artifacts = ArtifactStore | Path


def as_store(artifacts: Artifacts) -> ArtifactStore:
    return open_store(artifacts) if isinstance(artifacts, Path) else artifacts


def upload(
    engine: Engine,
    artifacts: Artifacts,
    folder: Path,
    *,
    project: str = "web",
    branch: str = "main",
    shards: int = 1,
) -> uploads.QueuedBuild:
    images = uploads.store_images(as_store(artifacts), folder)
    with transaction(engine) as conn:
        return uploads.enqueue_build(
            conn, project=project, branch=branch, images=images, shards=shards
        )


def claim(engine: Engine, limit: int = 100, host: str = "test-host") -> list[queue.Job]:
    with transaction(engine) as conn:
        return queue.claim(conn, host, limit, LEASE_SECONDS)


def prepare(engine: Engine, job: queue.Job, artifacts: Artifacts) -> dict[str, Any]:
    kind = registered_kinds()[job.kind]
    if kind.prepare is None:
        return dict(job.data)
    with transaction(engine) as conn:
        return kind.prepare(conn, job, as_store(artifacts))


def settle(engine: Engine, job: queue.Job, result: Any) -> bool:
    """Ack and record in one transaction, as the host does; False (and nothing written) when
    lost."""
    record = registered_kinds()[job.kind].record
    with engine.connect() as conn, conn.begin() as tx:
        if not queue.ack(conn, job.lease):
            tx.rollback()
            return False
        if record is not None:
            record(conn, job, result)
    return True


def run_jobs(engine: Engine, artifacts: Artifacts, kinds: Collection[str] | None = None) -> None:
    """Claim every due job and run it to its end, one after another, until none is due;
    `kinds`: only jobs of these kinds (the others are given back)."""
    handlers = registered_handlers()
    while jobs := claim(engine):
        others = [job for job in jobs if kinds is not None and job.kind not in kinds]
        if others:
            with transaction(engine) as conn:
                queue.release_all(conn, [job.lease for job in others])
            if len(others) == len(jobs):
                return
        for job in jobs:
            if job in others:
                continue
            payload = prepare(engine, job, artifacts)
            result = handlers[job.kind](payload, lambda _progress: None)
            assert settle(engine, job, result)


def run_build(
    engine: Engine, artifacts: Artifacts, folder: Path, **options: Any
) -> uploads.QueuedBuild:
    queued = upload(engine, artifacts, folder, **options)
    run_jobs(engine, artifacts)
    return queued


def write_png(
    path: Path,
    *,
    size: tuple[int, int] = (48, 32),
    marks: tuple[tuple[int, int, int, int], ...] = (),
    colour: tuple[int, int, int] = (37, 99, 235),
) -> Path:
    """A small PNG: a white page with filled rectangles `marks` (x, y, width, height)."""
    canvas = Canvas(size[0], size[1], (255, 255, 255))
    for x, y, width, height in marks:
        canvas.rect(x, y, width, height, colour)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(canvas.png())
    return path


def run_cli(argv: list[str]) -> int:
    """`python -m supervisor ARGV` in-process.

    The command points structlog at this test's captured stderr, which is closed once the test
    ends; afterwards logs go to the real stderr again so later tests can still log.
    """
    try:
        return cli.main(argv)
    finally:
        structlog.configure(logger_factory=structlog.PrintLoggerFactory(sys.__stderr__))


def screens(folder: Path, **stories: tuple[tuple[int, int, int, int], ...]) -> Path:
    """A folder of screenshots, one PNG per story named by its keyword, with those marks."""
    for name, marks in stories.items():
        write_png(folder / f"{name}.png", marks=marks)
    return folder
