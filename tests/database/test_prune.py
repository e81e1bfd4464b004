"""The promises of `supervisor.builds.prune` and `python -m supervisor prune`, on PostgreSQL and
SQLite: what is old and unneeded goes, with its rows and files; what a baseline, a build that
stays, an open job or an upload in progress needs stays; a dry run changes nothing.

Rows are made old by moving their times back by the database's clock; files by moving back
their modification times.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, update

from child.capture import shard as capture
from ipc.artifacts.folder import FolderStore
from ipc.publish import latest_pointer, report_index
from supervisor.builds import prune as prune_module
from supervisor.builds import uploads
from supervisor.builds.prune import Pruned, Retention, database_now, prune
from supervisor.builds.storybooks import enqueue_storybook, store_files
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import (
    baselines,
    build_baselines,
    builds,
    capture_attempts,
    capture_shards,
    jobs,
    metadata,
    snapshots,
)
from tests.capture_helpers import (
    claim,
    prepare,
    run_build,
    run_cli,
    run_jobs,
    screens,
    settle,
    upload,
    write_png,
)

#: Tables that hold a build's rows, each with the column naming the build.
BUILD_TABLES = (
    (jobs, jobs.c.build_id),
    (snapshots, snapshots.c.build_id),
    (capture_shards, capture_shards.c.build_id),
    (capture_attempts, capture_attempts.c.build_id),
    (build_baselines, build_baselines.c.build_id),
    (builds, builds.c.id),
)
DAY = 86_400.0


@pytest.fixture
def store(artifacts: Path) -> FolderStore:
    return FolderStore(artifacts)


def age_build(engine: Engine, build_id: int, days: float) -> None:
    """Move build `build_id` and its jobs `days` back: created then, and ended then if ended."""
    past = database_now(engine) - timedelta(days=days)
    with transaction(engine) as conn:
        conn.execute(update(builds).where(builds.c.id == build_id).values(created_at=past))
        conn.execute(
            update(builds)
            .where(builds.c.id == build_id, builds.c.finished_at.is_not(None))
            .values(finished_at=past)
        )
        conn.execute(update(jobs).where(jobs.c.build_id == build_id).values(created_at=past))
        conn.execute(
            update(jobs)
            .where(jobs.c.build_id == build_id, jobs.c.finished_at.is_not(None))
            .values(finished_at=past)
        )


def age_files(store: FolderStore, keys: Any, days: float) -> None:
    moment = time.time() - days * DAY
    for key in keys:
        os.utime(store.path(key), (moment, moment))


def stored(store: FolderStore, prefix: str = "") -> set[str]:
    return {item.key for item in store.listing(prefix)}


def rows_of(engine: Engine, build_id: int) -> dict[str, int]:
    with engine.connect() as conn:
        return {
            table.name: conn.execute(
                select(func.count()).select_from(table).where(column == build_id)
            ).scalar_one()
            for table, column in BUILD_TABLES
        }


def everything(engine: Engine, store: FolderStore) -> tuple[dict[str, int], set[str]]:
    """Every table's row count and every stored key: what a dry run must leave as it was."""
    with engine.connect() as conn:
        counts = {
            table.name: conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in metadata.sorted_tables
        }
    return counts, stored(store)


def images_of(engine: Engine, build_id: int) -> set[str]:
    with engine.connect() as conn:
        rows = conn.execute(select(snapshots.c.image_path).where(snapshots.c.build_id == build_id))
        return {path for path in rows.scalars() if path}


def status_of(engine: Engine, build_id: int) -> str | None:
    with engine.connect() as conn:
        found: str | None = conn.execute(
            select(builds.c.status).where(builds.c.id == build_id)
        ).scalar_one_or_none()
        return found


def prune_with(engine: Engine, store: FolderStore, **retention: Any) -> Pruned:
    return prune(engine, store, Retention(**retention))


def finished_job(engine: Engine, days: float, outcome: str = "ack") -> int:
    """A job without a build, claimed and ended `days` ago (acked, failed or cancelled)."""
    with transaction(engine) as conn:
        job_id = queue.enqueue(conn, "noop", {})
    (job,) = claim(engine, limit=1)
    past = database_now(engine) - timedelta(days=days)
    with transaction(engine) as conn:
        ended = {
            "ack": lambda: queue.ack(conn, job.lease),
            "fail": lambda: queue.fail(conn, job.lease, "broken"),
            "cancel": lambda: queue.cancel(conn, job.lease),
        }[outcome]()
        assert ended
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(finished_at=past))
    return job_id


def job_ids(engine: Engine) -> set[int]:
    with engine.connect() as conn:
        return set(conn.execute(select(jobs.c.id)).scalars())


# Step 1: jobs.


def test_old_finished_jobs_go_in_batches_young_and_open_ones_stay(
    engine: Engine, store: FolderStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(prune_module, "JOBS_PER_BATCH", 2)
    old = [finished_job(engine, 40, outcome) for outcome in ("ack", "fail", "cancel", "ack", "ack")]
    young = finished_job(engine, 3)
    with transaction(engine) as conn:
        running = queue.enqueue(conn, "noop", {})
    (claimed,) = claim(engine, limit=1)
    assert claimed.id == running
    long_ago = database_now(engine) - timedelta(days=400)
    with transaction(engine) as conn:
        queued = queue.enqueue(conn, "noop", {})
        conn.execute(
            update(jobs).where(jobs.c.id.in_((running, queued))).values(created_at=long_ago)
        )

    pruned = prune_with(engine, store, keep_days=30)

    assert pruned.jobs == len(old)
    assert job_ids(engine) == {young, running, queued}


def test_keep_days_zero_takes_every_finished_job_and_no_open_one(
    engine: Engine, store: FolderStore
) -> None:
    finished_job(engine, 0.01)
    with transaction(engine) as conn:
        queued = queue.enqueue(conn, "noop", {})

    assert prune_with(engine, store, keep_days=0).jobs == 1
    assert job_ids(engine) == {queued}


# Step 2: builds.


def test_an_old_ended_build_no_baseline_needs_goes_with_its_rows_diffs_report_and_pointer(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", a=(), b=()))
    branch = run_build(
        engine, store, screens(tmp_path / "branch", a=((2, 2, 6, 6),), b=()), branch="feature"
    )
    assert status_of(engine, branch.build_id) == "changed"
    diffs = stored(store, f"diffs/{branch.build_id}/")
    assert len(diffs) == 1
    assert store.exists(report_index("web", branch.build_id))
    report_files = stored(store, f"reports/web/{branch.build_id}/")
    assert store.exists(latest_pointer("web", "feature"))
    age_build(engine, main.build_id, 40)
    age_build(engine, branch.build_id, 40)

    pruned = prune_with(engine, store, keep_days=30)

    assert pruned.builds == 1
    assert set(rows_of(engine, branch.build_id).values()) == {0}
    assert stored(store, "diffs/") == set()
    assert stored(store, f"reports/web/{branch.build_id}/") == set()
    assert rows_of(engine, main.build_id)["snapshots"] == 2
    assert store.exists(report_index("web", main.build_id))
    # Its branch's pointer pointed at it alone; main's points at a build that stays.
    assert not store.exists(latest_pointer("web", "feature"))
    assert store.exists(latest_pointer("web", "main"))
    # Its changed image is nobody's now, but was written just now: the grace keeps it.
    assert pruned.files == len(diffs) + len(report_files) + 1  # the diff, the report, the pointer


def test_a_pointer_at_a_newer_build_stays_when_an_older_build_of_its_branch_goes(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    run_build(engine, store, screens(tmp_path / "main", a=()))
    older = run_build(engine, store, screens(tmp_path / "old", a=((1, 1, 2, 2),)), branch="f")
    newer = run_build(engine, store, screens(tmp_path / "new", a=((3, 3, 2, 2),)), branch="f")
    pointer = store.read_bytes(latest_pointer("web", "f"))
    age_build(engine, older.build_id, 40)

    pruned = prune_with(engine, store, keep_days=30)

    assert pruned.builds == 1 and status_of(engine, older.build_id) is None
    assert store.read_bytes(latest_pointer("web", "f")) == pointer
    assert store.exists(report_index("web", newer.build_id))


def test_a_baseline_build_stays_however_old_and_so_do_its_images(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", a=(), b=((1, 1, 3, 3),)))
    age_build(engine, main.build_id, 4000)
    age_files(store, stored(store, "images/"), 4000)

    pruned = prune_with(engine, store, keep_days=0, grace_hours=0)

    assert (pruned.builds, pruned.files) == (0, 0)
    assert rows_of(engine, main.build_id)["snapshots"] == 2
    for key in images_of(engine, main.build_id):
        assert store.read_bytes(key)


def test_an_unfinished_build_stays_whatever_its_age(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    pending = upload(engine, store, screens(tmp_path / "pending", a=((4, 4, 2, 2),)))
    age_build(engine, pending.build_id, 400)
    age_files(store, stored(store, "images/"), 400)
    before = rows_of(engine, pending.build_id)

    pruned = prune_with(engine, store, keep_days=0, grace_hours=0)

    assert (pruned.jobs, pruned.builds, pruned.files) == (0, 0, 0)
    assert rows_of(engine, pending.build_id) == before
    run_jobs(engine, store)
    assert status_of(engine, pending.build_id) == "passed"


def test_an_ended_build_with_a_job_still_open_stays(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    ended = upload(engine, store, screens(tmp_path / "shots", a=()))
    long_ago = database_now(engine) - timedelta(days=90)
    with transaction(engine) as conn:
        conn.execute(
            update(builds)
            .where(builds.c.id == ended.build_id)
            .values(status="failed", finished_at=long_ago)
        )

    assert prune_with(engine, store, keep_days=30).builds == 0
    assert rows_of(engine, ended.build_id)["jobs"] == 1


def _run_one_job(engine: Engine, store: FolderStore) -> None:
    (job,) = claim(engine, limit=1)
    assert settle(engine, job, capture.run(prepare(engine, job, store), lambda _: None))


def test_builds_that_compare_with_each_other_go_in_an_order_the_keys_allow(
    engine: Engine, store: FolderStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`first` was the baseline when `branch` was queued, and was superseded by `second`,
    queued before `first` ended (so `second` compares with nothing): `branch` is the only
    build that points at `first`'s snapshots, and one batch per build must take `branch`
    first, or the foreign key of its snapshots' `baseline_id` stops the delete."""
    monkeypatch.setattr(prune_module, "BUILDS_PER_BATCH", 1)
    first = upload(engine, store, screens(tmp_path / "first", a=(), b=()))
    second = upload(engine, store, screens(tmp_path / "second", a=((1, 1, 2, 2),), b=()))
    _run_one_job(engine, store)
    branch = upload(engine, store, screens(tmp_path / "branch", a=(), b=()), branch="feature")
    run_jobs(engine, store)
    with engine.connect() as conn:
        assert set(conn.execute(select(baselines.c.build_id)).scalars()) == {second.build_id}
    for build in (first, second, branch):
        age_build(engine, build.build_id, 40)

    pruned = prune_with(engine, store, keep_days=30)

    assert pruned.builds == 2
    assert status_of(engine, first.build_id) is None
    assert status_of(engine, branch.build_id) is None
    assert status_of(engine, second.build_id) == "passed"


def test_a_build_that_a_kept_build_compares_with_stays(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    """As above, but `branch` is young: it stays, so `first`, which it compares with, stays."""
    first = upload(engine, store, screens(tmp_path / "first", a=(), b=()))
    second = upload(engine, store, screens(tmp_path / "second", a=((1, 1, 2, 2),), b=()))
    _run_one_job(engine, store)
    upload(engine, store, screens(tmp_path / "branch", a=(), b=()), branch="feature")
    run_jobs(engine, store)
    age_build(engine, first.build_id, 40)
    age_build(engine, second.build_id, 40)
    age_files(store, stored(store, "images/"), 40)

    pruned = prune_with(engine, store, keep_days=30, grace_hours=0)

    assert (pruned.builds, pruned.files) == (0, 0)
    assert rows_of(engine, first.build_id)["snapshots"] == 2
    assert all(store.exists(key) for key in images_of(engine, first.build_id))


def test_a_build_whose_snapshots_a_kept_build_froze_as_baselines_stays(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    """A Storybook build freezes the project's baselines when it is queued (`build_baselines`)."""
    first = upload(engine, store, screens(tmp_path / "first", a=(), b=()))
    second = upload(engine, store, screens(tmp_path / "second", a=((1, 1, 2, 2),), b=()))
    _run_one_job(engine, store)
    storybook = store_files(store, write_storybook(tmp_path / "storybook"))
    with transaction(engine) as conn:
        frozen = enqueue_storybook(
            conn, project="web", branch="feature", storybook=storybook
        ).build_id
    run_jobs_but_plans(engine, store)
    ended = {"status": "cancelled", "finished_at": database_now(engine)}
    with transaction(engine) as conn:  # it ended (its plan never ran); a day ago, below
        conn.execute(update(jobs).where(jobs.c.build_id == frozen).values(ended))
        conn.execute(update(builds).where(builds.c.id == frozen).values(ended))
    age_build(engine, frozen, 1)
    age_build(engine, first.build_id, 40)
    age_build(engine, second.build_id, 40)

    assert prune_with(engine, store, keep_days=30).builds == 0
    assert rows_of(engine, first.build_id)["snapshots"] == 2

    age_build(engine, frozen, 40)
    assert prune_with(engine, store, keep_days=30).builds == 2  # the Storybook build, then first


def write_storybook(folder: Path) -> Path:
    """A folder of files stored as a Storybook build (`store_files` does not look inside)."""
    folder.mkdir(parents=True)
    (folder / "index.json").write_text('{"v": 5, "entries": {}}')
    (folder / "assets").mkdir()
    (folder / "assets" / "main.js").write_text("console.log('stories')")
    return folder


def run_jobs_but_plans(engine: Engine, store: FolderStore) -> None:
    """`run_jobs` but for plans (a plan needs a browser): they are put back."""
    run_jobs(engine, store, kinds=("capture", "publish"))


# Step 3: stored files.


def test_stored_files_go_when_nothing_names_them_and_they_are_older_than_the_grace(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", a=(), b=()))
    storybook = store_files(store, write_storybook(tmp_path / "storybook"))
    with transaction(engine) as conn:
        enqueue_storybook(conn, project="web", branch="feature", storybook=storybook)
    kept = stored(store, "images/") | stored(store, "storybooks/")
    stray_old = write_png(tmp_path / "stray/old.png", marks=((9, 9, 9, 9),))
    write_png(tmp_path / "stray/young.png", marks=((8, 8, 8, 8),))
    stored_old = uploads.store_images(store, stray_old.parent)
    old_key, young_key = (image.image for image in stored_old)
    stray_storybook = store_files(store, write_storybook_variant(tmp_path / "old-storybook"))
    stray_storybook_keys = stored(store, "storybooks/") - kept
    age_files(store, kept | {old_key} | stray_storybook_keys, 10)
    assert stray_storybook.ref["manifest"] in stray_storybook_keys

    pruned = prune_with(engine, store, keep_days=30)

    left = stored(store, "images/") | stored(store, "storybooks/")
    assert left == kept | {young_key}
    assert pruned.files == 1 + len(stray_storybook_keys)
    sizes = stray_old.stat().st_size + sum(
        (tmp_path / "old-storybook" / name).stat().st_size for name in ("index.json", "extra.css")
    )
    assert sizes < pruned.bytes  # and the manifest
    assert rows_of(engine, main.build_id)["snapshots"] == 2


def write_storybook_variant(folder: Path) -> Path:
    """Another build's files, sharing `assets/main.js` with `write_storybook`'s."""
    write_storybook(folder)
    (folder / "index.json").write_text('{"v": 5, "entries": {"other": {}}}')
    (folder / "extra.css").write_text("body { margin: 0 }")
    return folder


def test_an_upload_that_reuses_an_old_unnamed_file_during_the_sweep_keeps_it(
    engine: Engine, store: FolderStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build committed between the sweep's mark and its deletes names a file that looked
    unnamed and old: the sweep reads new builds again before it deletes (and the upload marked
    the file written now besides)."""
    orphan = write_png(tmp_path / "orphan/a.png", marks=((6, 6, 6, 6),))
    (image,) = uploads.store_images(store, orphan.parent)
    age_files(store, [image.image], 10)
    listing = prune_module._listing
    queued: list[uploads.QueuedBuild] = []

    def upload_meanwhile(store: FolderStore) -> Iterator[Any]:
        queued.append(upload(engine, store, screens(tmp_path / "again", a=((6, 6, 6, 6),))))
        yield from listing(store)

    monkeypatch.setattr(prune_module, "_listing", upload_meanwhile)
    pruned = prune_with(engine, store, grace_hours=1)

    assert pruned.files == 0
    assert store.path(image.image).stat().st_mtime > time.time() - 60  # refreshed by the upload
    run_jobs(engine, store)
    assert status_of(engine, queued[0].build_id) == "passed"
    assert images_of(engine, queued[0].build_id) == {image.image}


def test_an_upload_in_progress_that_reuses_an_old_unnamed_file_keeps_it(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    """Its files are stored, its build not queued yet: nothing names the old file it reuses,
    but the upload marked it written now, so the grace period keeps it."""
    orphan = write_png(tmp_path / "orphan/a.png", marks=((6, 6, 6, 6),))
    (image,) = uploads.store_images(store, orphan.parent)
    age_files(store, [image.image], 10)
    again = screens(tmp_path / "again", a=((6, 6, 6, 6),))
    images = uploads.store_images(store, again)
    assert [shot.image for shot in images] == [image.image]

    assert prune_with(engine, store, keep_days=0, grace_hours=2).files == 0
    assert store.exists(image.image)
    with transaction(engine) as conn:
        queued = uploads.enqueue_build(conn, project="web", branch="main", images=images)
    run_jobs(engine, store)
    assert status_of(engine, queued.build_id) == "passed"


def test_a_manifest_that_cannot_be_read_leaves_storybooks_unswept(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    storybook = store_files(store, write_storybook(tmp_path / "storybook"))
    with transaction(engine) as conn:
        enqueue_storybook(conn, project="web", branch="feature", storybook=storybook)
    store.put_bytes(storybook.ref["manifest"], b'{"version": 99, "files": []}')
    stray = store_files(store, write_storybook_variant(tmp_path / "other"))
    everything_there = stored(store, "storybooks/")
    age_files(store, everything_there, 10)

    assert prune_with(engine, store, grace_hours=0).files == 0
    assert stored(store, "storybooks/") == everything_there
    assert stray.ref["manifest"] in everything_there


# A dry run.


def test_a_dry_run_changes_nothing_and_counts_what_the_prune_then_deletes(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", a=(), b=()))
    branch = run_build(
        engine, store, screens(tmp_path / "branch", a=((2, 2, 6, 6),), b=()), branch="feature"
    )
    finished_job(engine, 50)
    age_build(engine, main.build_id, 40)
    age_build(engine, branch.build_id, 40)
    age_files(store, stored(store, "images/"), 3)
    before = everything(engine, store)

    dry = prune_with(engine, store, keep_days=30, dry_run=True)

    assert everything(engine, store) == before
    assert dry.dry_run
    # Five jobs (one on its own, a capture and a publish of each build), the branch build,
    # and its diff, its report's folder (the page, the new and the blank image, the diff), its
    # branch's pointer and its changed image (nobody's once the build is gone, and older than
    # the grace).
    assert (dry.jobs, dry.builds, dry.files) == (5, 1, 7)
    done = prune_with(engine, store, keep_days=30)
    assert (done.jobs, done.builds, done.files, done.bytes) == (
        dry.jobs,
        dry.builds,
        dry.files,
        dry.bytes,
    )
    assert not done.dry_run
    assert everything(engine, store) != before


# Beside the work of hosts and uploads.


def test_prune_beside_a_concurrent_upload_and_a_running_build(
    engine: Engine, store: FolderStore, tmp_path: Path
) -> None:
    """Prune with keep-days 0 while an upload has stored its files but not yet created its
    build, and a build's job is claimed and running. The upload's files, young and named by
    nothing yet, are what the grace period is for (with grace 0 they would go); the running
    build's files, made old, stay because its open job names them; both builds end afterwards
    with every image readable. Only the old branch build goes."""
    main = run_build(engine, store, screens(tmp_path / "main", a=(), b=()))
    old = run_build(engine, store, screens(tmp_path / "old", a=((3, 3, 3, 3),), b=()), branch="old")
    age_build(engine, main.build_id, 40)
    age_build(engine, old.build_id, 40)
    age_files(store, stored(store, "images/"), 40)
    running = upload(
        engine, store, screens(tmp_path / "running", a=((5, 1, 4, 4),), c=()), branch="running"
    )
    (job,) = claim(engine, limit=1)
    assert job.build_id == running.build_id
    age_build(engine, running.build_id, 400)
    running_images = {shot["image"] for shot in job.data["snapshots"]}
    age_files(store, running_images, 40)
    before_upload = stored(store, "images/")
    uploading = UploadInThread(
        engine, store, screens(tmp_path / "uploading", a=((7, 7, 3, 3),), d=((1, 9, 9, 2),))
    )
    with uploading.paused_before_its_transaction() as upload_keys:
        assert len(upload_keys) == 2 and upload_keys.isdisjoint(before_upload)
        without_grace = prune_with(engine, store, keep_days=0, grace_hours=0, dry_run=True)
        with_grace = prune_with(engine, store, keep_days=0, dry_run=True)
        assert without_grace.files - with_grace.files == len(upload_keys)

        pruned = prune_with(engine, store, keep_days=0)

        assert upload_keys <= stored(store, "images/")
        assert running_images <= stored(store, "images/")
    assert pruned.builds == 1
    assert status_of(engine, old.build_id) is None
    assert status_of(engine, main.build_id) == "passed"
    assert rows_of(engine, running.build_id)["jobs"] == 1

    assert settle(engine, job, capture.run(prepare(engine, job, store), lambda _: None))
    run_jobs(engine, store)
    queued = uploading.queued
    assert queued is not None
    for build in (running.build_id, queued.build_id):
        assert status_of(engine, build) in ("passed", "changed")
        assert images_of(engine, build)
        assert all(store.read_bytes(key) for key in images_of(engine, build))


class UploadInThread:
    """`enqueue-build`'s two halves in a thread (files stored, then the build's transaction),
    held between them for as long as the caller's block runs."""

    def __init__(self, engine: Engine, store: FolderStore, folder: Path) -> None:
        self.engine, self.store, self.folder = engine, store, folder
        self.queued: uploads.QueuedBuild | None = None
        self._stored = threading.Event()
        self._go = threading.Event()
        self._keys: set[str] = set()
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            images = uploads.store_images(self.store, self.folder)
            self._keys = {image.image for image in images}
            self._stored.set()
            self._go.wait(60)
            with transaction(self.engine) as conn:
                self.queued = uploads.enqueue_build(
                    conn, project="web", branch="uploading", images=images
                )
        except BaseException as error:
            self._error = error
            self._stored.set()

    def paused_before_its_transaction(self) -> _Paused:
        return _Paused(self)


class _Paused:
    def __init__(self, upload: UploadInThread) -> None:
        self.upload = upload
        self.thread = threading.Thread(target=upload._run)

    def __enter__(self) -> set[str]:
        self.thread.start()
        assert self.upload._stored.wait(60)
        if self.upload._error is not None:
            raise self.upload._error
        return set(self.upload._keys)

    def __exit__(self, *_exc: object) -> None:
        self.upload._go.set()
        self.thread.join(60)
        if self.upload._error is not None:
            raise self.upload._error


# The command.


@pytest.fixture
def argv(database_url: str, artifacts: Path) -> Iterator[list[str]]:
    yield ["prune", "--database-url", database_url, "--artifacts", str(artifacts)]


def test_the_command_prints_one_summary_line(
    engine: Engine,
    store: FolderStore,
    tmp_path: Path,
    argv: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", a=()))
    branch = run_build(engine, store, screens(tmp_path / "b", a=((1, 1, 1, 1),)), branch="x")
    age_build(engine, main.build_id, 40)
    age_build(engine, branch.build_id, 40)
    capsys.readouterr()

    assert run_cli([*argv, "--dry-run"]) == 0
    dry = capsys.readouterr().out
    assert run_cli([*argv, "--json", "--dry-run"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert run_cli(argv) == 0
    done = capsys.readouterr().out

    # The branch build's capture and publish jobs, and its diff, report folder (the page,
    # the new and baseline images and the diff) and branch pointer.
    assert dry.startswith("would delete 4 jobs, 1 builds, 6 files (")
    assert dry.rstrip().endswith("nothing changed (--dry-run)")
    assert counts == {"dry_run": True, "jobs": 4, "builds": 1, "files": 6, "bytes": counts["bytes"]}
    assert counts["bytes"] > 0
    assert done.splitlines() == [done.strip()]
    assert done.startswith("deleted 4 jobs, 1 builds, 6 files (") and "freed)" in done
    assert status_of(engine, branch.build_id) is None


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--keep-days", "-1"], "'-1' is not a whole number from 0"),
        (["--keep-days", "soon"], "(--keep-days or STORYSHELF_KEEP_DAYS)"),
        (["--grace-hours", "1.5"], "(--grace-hours or STORYSHELF_GRACE_HOURS)"),
        (["--keep-days", "99999999"], "up to 36500"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(
    argv: list[str], extra: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        run_cli([*argv, *extra])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and says in err, err


def test_a_database_without_the_schema_is_one_line(
    empty_database_url: str, artifacts: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["prune", "--database-url", empty_database_url, "--artifacts", str(artifacts)]
    assert run_cli(argv) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "storyshelf prune: no Storyshelf schema here: run `storyshelf migrate`"
    ]


def test_an_artifacts_path_that_is_a_file_is_one_line(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_folder = write_png(tmp_path / "file.png")
    assert run_cli([*argv[:-1], str(not_a_folder)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "not a folder" in err, err
