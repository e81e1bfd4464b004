"""Hosts that share only the database and the artifacts: real processes, real shards.

Two hosts on one build must split its shards and end it once; a host killed in the middle of a
shard must leave it to another host once its lease runs out, with the results recorded once.
Each test runs on a shared folder and on a bucket; on a bucket each host has its own working
folder and cache, as hosts on separate machines do.
"""

from __future__ import annotations

import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from ipc.artifacts.store import ArtifactStore
from supervisor.builds.uploads import QueuedBuild, enqueue_build, store_images
from supervisor.commands.demo_images import write_demo_images
from supervisor.db.connection import transaction
from supervisor.db.tables import capture_shards, snapshots
from tests.hosts import (
    FAST,
    HostProcess,
    StartHost,
    build_ended,
    build_row,
    ended,
    hosts,
    job,
    running_child,
)

#: Copies of the eight demo stories per build: enough work that a shard takes a while.
COPIES = 4
#: The demo branch changes four of the eight stories and adds one (see tests/unit/test_demo_images.py).
CHANGED_PER_COPY, NEW_PER_COPY = 4, 1


@pytest.fixture
def start_host(database_url: str, store: ArtifactStore, tmp_path: Path) -> Iterator[StartHost]:
    yield from hosts(database_url, store.location, tmp_path)


def screenshots(folder: Path, variant: str) -> Path:
    """The demo stories of `variant`, `COPIES` times under different names."""
    drawn = folder / "drawn"
    write_demo_images(drawn, "baseline" if variant == "baseline" else "branch")
    for copy in range(COPIES):
        shutil.copytree(drawn, folder / "stories" / f"copy{copy}")
    return folder / "stories"


def upload(
    engine: Engine, store: ArtifactStore, folder: Path, branch: str, shards: int
) -> QueuedBuild:
    images = store_images(store, folder)
    with transaction(engine) as conn:
        return enqueue_build(conn, project="p", branch=branch, images=images, shards=shards)


def accepted_baseline(
    engine: Engine, store: ArtifactStore, tmp_path: Path, start_host: StartHost
) -> None:
    """The `main` build, captured and accepted, so that the branch has baselines to diff."""
    queued = upload(engine, store, screenshots(tmp_path / "main", "baseline"), "main", 1)
    assert start_host(*FAST, "--drain").wait(60) == 0
    assert build_row(engine, queued.build_id)["status"] == "passed"


def assert_recorded_once(engine: Engine, store: ArtifactStore, queued: QueuedBuild) -> None:
    """Every shard completed with its own snapshots, each name once, the verdict right, and
    every image and diff they name in the store."""
    row = build_row(engine, queued.build_id)
    assert (row["status"], row["new"], row["changed"], row["failed"]) == (
        "changed",
        NEW_PER_COPY * COPIES,
        CHANGED_PER_COPY * COPIES,
        0,
    )
    assert row["new"] + row["unchanged"] + row["changed"] == queued.snapshot_count
    with engine.connect() as conn:
        shards = conn.execute(
            select(capture_shards.c.status).where(capture_shards.c.build_id == queued.build_id)
        ).scalars()
        rows = conn.execute(
            select(snapshots.c.name, snapshots.c.image_path, snapshots.c.diff_path).where(
                snapshots.c.build_id == queued.build_id
            )
        ).all()
        assert set(shards) == {"completed"}
    recorded = [row.name for row in rows]
    assert len(recorded) == len(set(recorded)) == queued.snapshot_count
    diffs = {row.diff_path for row in rows if row.diff_path}
    assert len(diffs) == CHANGED_PER_COPY * COPIES
    stored = {row.image_path for row in rows} | diffs
    assert set(store.written(stored)) == stored


def completed_by(host: HostProcess, job_ids: tuple[int, ...]) -> set[int]:
    return {
        event["job_id"]
        for event in host.events("job finished", outcome="completed")
        if event["job_id"] in job_ids
    }


#: Each test on a shared folder with either database, and on a bucket with PostgreSQL: hosts on
#: different machines share a PostgreSQL server, never a SQLite file.
ON_EACH_STORE = pytest.mark.parametrize(
    ("database_url", "store"),
    [("postgresql", "folder"), ("sqlite", "folder"), ("postgresql", "s3")],
    indirect=True,
)


@ON_EACH_STORE
def test_two_hosts_split_a_builds_shards_and_end_it_once(
    engine: Engine, store: ArtifactStore, tmp_path: Path, start_host: StartHost
) -> None:
    accepted_baseline(engine, store, tmp_path, start_host)
    # A shard of demo images takes a few hundredths of a second, the whole build a few tenths:
    # hosts that poll at FAST's pace could each find it all taken by the other (SQLite has no
    # NOTIFY to wake them), so these poll often enough that both see the build while it lasts.
    first = start_host(*FAST, "--concurrency", "1", "--poll-seconds", "0.02")
    second = start_host(*FAST, "--concurrency", "1", "--poll-seconds", "0.02")
    for host in (first, second):
        host.wait_for_event("image engine loaded")
    queued = upload(engine, store, screenshots(tmp_path / "branch", "branch"), "feature", 8)
    build_ended(engine, queued.build_id)
    assert first.stop() == 0 and second.stop() == 0
    assert_recorded_once(engine, store, queued)
    split = [completed_by(host, queued.job_ids) for host in (first, second)]
    assert all(split), f"one host took every shard: {split}"
    assert split[0] | split[1] == set(queued.job_ids) and not split[0] & split[1]
    finished = [
        event
        for host in (first, second)
        for event in host.events("build finished", build_id=queued.build_id)
    ]
    assert len(finished) == 1


@ON_EACH_STORE
def test_a_shard_of_a_host_killed_mid_job_is_finished_by_another_after_its_lease(
    engine: Engine, store: ArtifactStore, tmp_path: Path, start_host: StartHost
) -> None:
    accepted_baseline(engine, store, tmp_path, start_host)
    short_lease = (*FAST, "--concurrency", "1", "--lease-seconds", "2", "--stall-seconds", "1.2")
    doomed = start_host(*short_lease)
    doomed.wait_for_event("image engine loaded")
    queued = upload(engine, store, screenshots(tmp_path / "branch", "branch"), "feature", 1)
    (job_id,) = queued.job_ids
    running_child(doomed, job_id)
    doomed.signal(signal.SIGKILL)
    doomed.wait()
    assert job(engine, job_id)["status"] == "running", "the shard ended before the kill"
    rescuer = start_host(*short_lease)
    row = ended(engine, job_id, timeout=60)
    assert (row["status"], row["attempt"], row["crashes"]) == ("completed", 2, 0)
    assert rescuer.stop() == 0
    assert completed_by(rescuer, queued.job_ids) == {job_id}
    assert not completed_by(doomed, queued.job_ids)
    assert_recorded_once(engine, store, queued)
    assert len(rescuer.events("build finished", build_id=queued.build_id)) == 1
