"""Retention (`python -m supervisor prune`): delete what no baseline, build or job still needs.

Three steps, in this order, each its own function:

1. `prune_jobs`: finished jobs (completed, failed, cancelled) that ended before the cutoff, a
   bounded batch per transaction. `jobs` is the table every host claims from, so it is kept
   small, and no delete holds its locks for long while hosts claim.
2. `prune_builds`: builds that ended before the cutoff and that nothing which stays compares
   with (DESIGN section 4: a project's baseline, or a snapshot that the frozen baselines or the
   snapshots of a build that stays point at), with their rows and, in the store, their diffs and
   report. A build that has not ended, or that still has a queued or running job, is never
   touched, whatever its age.
3. `sweep_files`: mark every `images/` and `storybooks/` key that a remaining build or open job
   names (a Storybook's manifest is read through the store for its files), then delete what is
   unmarked and older than the grace period. An upload stores its files before its build row
   exists (`supervisor.builds.uploads`, `supervisor.builds.storybooks`), so an unmarked file
   younger than the grace period may belong to an upload in progress and is never deleted.

The cutoff is the database's clock, never a host's (DESIGN section 3: time that decides anything
shared), read once so that the three steps, and a dry run, agree on it. A dry run counts what
the same prune would delete and changes nothing.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from graphlib import CycleError, TopologicalSorter
from typing import Any, Literal

import structlog
from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    delete,
    func,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.exc import IntegrityError

from ipc.artifacts.keys import DIFFS_PREFIX, IMAGES_PREFIX, REPORTS_PREFIX
from ipc.artifacts.store import ArtifactMissing, ArtifactStore, StoredObject
from ipc.publish import latest_pointer, pointed_build, report_folder
from ipc.storybook import MANIFEST_VERSION, STORYBOOKS_PREFIX, file_key
from supervisor.builds.reduce import OPEN_BUILD_STATES
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import (
    UtcDateTime,
    baselines,
    branch_baselines,
    build_baselines,
    builds,
    capture_attempts,
    capture_shards,
    jobs,
    projects,
    reviews,
    snapshots,
)

log = structlog.get_logger(__name__)

#: Finished jobs deleted per transaction: a claim waits at most that long behind one (200,000
#: jobs took 0.8 s on SQLite and 2.2 s on PostgreSQL, 4 and 11 ms a batch, none over 80 ms).
JOBS_PER_BATCH = 1_000
#: Builds deleted per transaction, with all their rows: a build holds up to some thousands of
#: snapshots, so a batch stays within tens of thousands of rows.
BUILDS_PER_BATCH = 20
#: Snapshot rows read per transaction while marking: a million snapshots are read in short
#: transactions rather than one that holds SQLite's lock, or PostgreSQL's oldest snapshot, long.
MARK_PAGE_ROWS = 10_000
#: Keys per `ArtifactStore.delete` call (S3 takes at most 1,000 per request).
KEYS_PER_DELETE = 1_000
#: The prefixes the sweep deletes unmarked files from. Diffs and reports go with their builds.
SWEPT_PREFIXES = (f"{IMAGES_PREFIX}/", f"{STORYBOOKS_PREFIX}/")
#: How far before the mark began a build may have been created and still be read again just
#: before the sweep deletes: a build row is stamped when its transaction starts, which may be
#: before the mark began although it commits after. Seconds; an upload's transaction takes less.
RECHECK_SLACK_SECONDS = 600
#: What `prune` keeps by default.
DEFAULT_KEEP_DAYS = 30
DEFAULT_GRACE_HOURS = 24

#: Why a build that ended before the cutoff stays.
KeptBecause = Literal[
    # It, or one of its snapshots, is a project's baseline now: later builds compare with it.
    "baseline",
    # A build that stays compares with one of its snapshots (its frozen baselines, or a
    # snapshot's `baseline_id`): that build's results and report show it.
    "compared",
]
#: What the sweep made of a file under `SWEPT_PREFIXES`.
FileVerdict = Literal[
    # A remaining build or an open job names it.
    "referenced",
    # Named by nothing, but written within the grace period: maybe an upload in progress.
    "young",
    # Under `storybooks/` while some manifest could not be read: nothing there is deleted.
    "unsure",
    # Named by nothing and older than the grace period: deleted (or, in a dry run, would be).
    "deleted",
]


@dataclass(frozen=True)
class Retention:
    """What to keep: rows ended within `keep_days`, files written within `grace_hours`."""

    keep_days: int = DEFAULT_KEEP_DAYS
    grace_hours: float = DEFAULT_GRACE_HOURS
    dry_run: bool = False


@dataclass(frozen=True)
class Pruned:
    """What one prune deleted, or in a dry run would delete: rows, and stored files."""

    jobs: int
    builds: int
    files: int
    bytes: int
    dry_run: bool

    def describe(self) -> str:
        counts = f"{self.jobs:,} jobs, {self.builds:,} builds, {self.files:,} files"
        if self.dry_run:
            return f"would delete {counts} ({_size(self.bytes)}); nothing changed (--dry-run)"
        return f"deleted {counts} ({_size(self.bytes)} freed)"

    def as_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "jobs": self.jobs,
            "builds": self.builds,
            "files": self.files,
            "bytes": self.bytes,
        }


@dataclass(frozen=True)
class ReportKeys:
    """Where a build's published report is: its folder, and its branch's pointer."""

    folder: str
    pointer: str


@dataclass(frozen=True)
class BuildPlan:
    """The builds to delete, in waves: every build that compares with a build of a wave is
    in an earlier wave, so that deleting wave by wave never breaks a foreign key."""

    waves: tuple[tuple[int, ...], ...]
    #: Builds past the cutoff that stay, by why.
    kept: Mapping[int, KeptBecause]
    #: Each doomed build's report folder (`ipc.publish.report_folder`) and its branch's
    #: `latest` pointer (`ipc.publish.latest_pointer`), which goes with it if it points at it.
    reports: Mapping[int, ReportKeys]

    @property
    def doomed(self) -> frozenset[int]:
        return frozenset(build for wave in self.waves for build in wave)


@dataclass(frozen=True)
class BuildsPruned:
    """What `prune_builds` deleted (or would): the builds, the jobs step 1 left them (those
    that finished after the cutoff), and their stored diffs and reports."""

    builds: frozenset[int]
    jobs: int
    files: int
    bytes: int


@dataclass(frozen=True)
class FilesSwept:
    """What `sweep_files` made of every file under `SWEPT_PREFIXES`, and the bytes deleted."""

    verdicts: Mapping[FileVerdict, int]
    bytes: int


@dataclass
class Marks:
    """The keys that stay, and whether every manifest could be read."""

    keys: set[str]
    #: A manifest that is there but cannot be read (another version's?): its files are
    #: unknown, so nothing under `storybooks/` is deleted this time.
    unsure: bool = False


def prune(
    engine: Engine,
    store: ArtifactStore,
    retention: Retention,
    clock: Callable[[], float] = time.time,
) -> Pruned:
    """Run the three steps (see the module) and say what went, or would go."""
    cutoff = database_cutoff(engine, retention.keep_days)
    jobs_pruned = prune_jobs(engine, cutoff, dry_run=retention.dry_run)
    pruned = prune_builds(engine, store, cutoff, dry_run=retention.dry_run)
    swept = sweep_files(
        engine,
        store,
        grace_seconds=retention.grace_hours * 3600,
        # Stored files carry the store's clock (the file system's, the bucket's), not the
        # database's: the host's is the nearest we have, and a skew of minutes is nothing
        # against a grace of hours. Read before the mark and the listing, so that it can only
        # make a file look younger than it is.
        now=clock(),
        gone=pruned.builds if retention.dry_run else frozenset(),
        dry_run=retention.dry_run,
    )
    return Pruned(
        jobs=jobs_pruned + pruned.jobs,
        builds=len(pruned.builds),
        files=pruned.files + swept.verdicts.get("deleted", 0),
        bytes=pruned.bytes + swept.bytes,
        dry_run=retention.dry_run,
    )


def database_cutoff(engine: Engine, keep_days: int) -> datetime:
    """`keep_days` before now by the database's clock: hosts' clocks may disagree with it and
    with each other, and whatever decides shared things (DESIGN section 3) reads the database's."""
    return database_now(engine) - timedelta(days=keep_days)


def database_now(engine: Engine) -> datetime:
    """The database's clock (PostgreSQL's transaction time, SQLite's `CURRENT_TIMESTAMP`)."""
    with transaction(engine) as conn:
        now: datetime = conn.execute(select(type_coerce(func.now(), UtcDateTime()))).scalar_one()
    return now


# Step 1: finished jobs.


def prune_jobs(engine: Engine, cutoff: datetime, *, dry_run: bool) -> int:
    """Delete the jobs that finished before `cutoff`, batch by batch; how many went (or would).

    Each batch is its own transaction (`queue.delete_finished`), so hosts claiming meanwhile
    wait at most for one batch; batches follow the primary key, so the last one costs what the
    first did. A queued or running job is never touched.
    """
    if dry_run:
        with transaction(engine) as conn:
            statement = select(func.count()).select_from(jobs).where(_finished_before(cutoff))
            return int(conn.execute(statement).scalar_one())
    deleted, after = 0, 0
    while True:
        with transaction(engine) as conn:
            ids = queue.delete_finished(conn, cutoff, after, JOBS_PER_BATCH)
        if not ids:
            break
        deleted, after = deleted + len(ids), max(ids)
    log.info("jobs pruned", jobs=deleted, before=cutoff.isoformat())
    return deleted


def _finished_before(cutoff: datetime) -> ColumnElement[bool]:
    """The jobs `queue.delete_finished` deletes."""
    return and_(jobs.c.status.in_(queue.FINISHED_STATES), jobs.c.finished_at < cutoff)


# Step 2: builds nothing compares with.


def prune_builds(
    engine: Engine, store: ArtifactStore, cutoff: datetime, *, dry_run: bool
) -> BuildsPruned:
    """Delete the builds `plan_builds` finds, wave by wave, a batch per transaction.

    A batch's stored diffs and report go first, then its rows: a store that fails stops the
    prune with the rows still there, for the next prune to find again (nothing else would ever
    find those files once their build's row is gone; and SQLite gives a deleted newest build's
    id to the next build, whose diffs and report would land beside the old ones).
    """
    with transaction(engine) as conn:
        plan = plan_builds(conn, cutoff)
    if plan.kept:
        reasons = {str(reason): count for reason, count in Counter(plan.kept.values()).items()}
        log.info("builds kept", **reasons)
    if not plan.waves:
        return BuildsPruned(frozenset(), 0, 0, 0)
    gone: set[int] = set()
    jobs_deleted = files = size = 0
    for batch in _batches(plan.waves):
        keys = _build_files(store, batch, plan.reports)
        if dry_run:
            with transaction(engine) as conn:
                jobs_deleted += _jobs_left(conn, batch, cutoff)
        else:
            store.delete(list(keys))
            deleted = _delete_rows(engine, batch)
            if deleted is None:
                break
            jobs_deleted += deleted
        gone.update(batch)
        files, size = files + len(keys), size + sum(keys.values())
    if not dry_run:
        log.info("builds pruned", builds=len(gone), jobs=jobs_deleted, files=files, bytes=size)
    return BuildsPruned(frozenset(gone), jobs_deleted, files, size)


def plan_builds(conn: Connection, cutoff: datetime) -> BuildPlan:
    """Which builds past the cutoff go, and in which order (see `BuildPlan`).

    A build past the cutoff stays when it or one of its snapshots is a baseline, and then so
    does every build it compares with, and every build those compare with: the kept set is
    closed over the comparisons, so no build that stays ever points at a deleted snapshot.
    """
    candidates = _past_cutoff(conn, cutoff)
    comparisons = _comparisons(conn, set(candidates))
    protected: dict[int, KeptBecause] = dict.fromkeys(
        set(candidates) & _baseline_builds(conn), "baseline"
    )
    while True:
        kept = _kept(set(candidates), protected, comparisons)
        doomed = set(candidates) - kept.keys()
        try:
            waves = _waves(doomed, comparisons)
        except CycleError as error:
            # Builds that compare with each other cannot come from ended builds' baselines;
            # whatever made them, they stay, and so does what they compare with.
            protected.update(dict.fromkeys(error.args[1], "compared"))
            continue
        reports = {build: candidates[build] for build in doomed}
        return BuildPlan(waves, kept, reports)


def _ended_before(cutoff: datetime) -> ColumnElement[bool]:
    """Builds that ended before `cutoff` and have no job still queued or running (a build's
    end may still queue work for it; a host running a job of it must find its rows)."""
    open_job = (
        select(jobs.c.id)
        .where(jobs.c.build_id == builds.c.id, jobs.c.status.in_(("queued", "running")))
        .exists()
    )
    return and_(
        builds.c.status.not_in(OPEN_BUILD_STATES),
        builds.c.finished_at < cutoff,
        ~open_job,
    )


def _past_cutoff(conn: Connection, cutoff: datetime) -> dict[int, ReportKeys]:
    """The builds that ended before `cutoff` with no open job, and where their reports are."""
    rows = conn.execute(
        select(builds.c.id, builds.c.branch, projects.c.name)
        .join(projects, projects.c.id == builds.c.project_id)
        .where(_ended_before(cutoff))
    )
    return {
        row.id: ReportKeys(report_folder(row.name, row.id), latest_pointer(row.name, row.branch))
        for row in rows
    }


def _baseline_builds(conn: Connection) -> set[int]:
    """The builds the project's and the branches' baselines point at, by their `build_id` or
    through their snapshots."""
    found: set[int] = set()
    for table in (baselines, branch_baselines):
        direct = select(table.c.build_id)
        through = select(snapshots.c.build_id).join(table, table.c.snapshot_id == snapshots.c.id)
        found.update(conn.execute(direct.union(through)).scalars())
    return found


def _comparisons(conn: Connection, candidates: set[int]) -> set[tuple[int, int]]:
    """(comparing build, compared build) for every build that points at another's snapshot,
    by its frozen baselines or by a snapshot's `baseline_id`; the compared among `candidates`."""
    compared = snapshots.alias("compared")
    by_snapshot = (
        select(snapshots.c.build_id, compared.c.build_id)
        .join(compared, compared.c.id == snapshots.c.baseline_id)
        .where(snapshots.c.build_id != compared.c.build_id)
    )
    by_frozen = (
        select(build_baselines.c.build_id, snapshots.c.build_id)
        .join(snapshots, snapshots.c.id == build_baselines.c.snapshot_id)
        .where(build_baselines.c.build_id != snapshots.c.build_id)
    )
    rows = conn.execute(by_snapshot.union(by_frozen))
    return {(row[0], row[1]) for row in rows if row[1] in candidates}


def _kept(
    candidates: set[int],
    protected: Mapping[int, KeptBecause],
    comparisons: set[tuple[int, int]],
) -> dict[int, KeptBecause]:
    """Each candidate that stays, and why: the protected ones, and every candidate a build
    that stays compares with, followed through (a kept build's own comparisons keep more)."""
    compares_with: dict[int, set[int]] = {}
    for comparing, compared in comparisons:
        compares_with.setdefault(comparing, set()).add(compared)
    kept = dict(protected)
    staying = [build for build in compares_with if build not in candidates or build in kept]
    while staying:
        for compared in compares_with.get(staying.pop(), ()):
            if compared not in kept:
                kept[compared] = "compared"
                staying.append(compared)
    return kept


def _waves(doomed: set[int], comparisons: set[tuple[int, int]]) -> tuple[tuple[int, ...], ...]:
    """`doomed` in waves, each build after every doomed build that compares with it
    (`CycleError` when some compare with each other). Newest first within a wave."""
    sorter: TopologicalSorter[int] = TopologicalSorter()
    for build in doomed:
        sorter.add(build)
    for comparing, compared in comparisons:
        if comparing in doomed and compared in doomed:
            sorter.add(compared, comparing)
    sorter.prepare()
    waves = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready(), reverse=True)
        waves.append(tuple(ready))
        sorter.done(*ready)
    return tuple(waves)


def _batches(waves: Sequence[Sequence[int]]) -> Iterator[list[int]]:
    """The waves cut into batches of at most `BUILDS_PER_BATCH`, in order."""
    for wave in waves:
        for start in range(0, len(wave), BUILDS_PER_BATCH):
            yield list(wave[start : start + BUILDS_PER_BATCH])


def _build_files(
    store: ArtifactStore, batch: Sequence[int], reports: Mapping[int, ReportKeys]
) -> dict[str, int]:
    """The stored files of `batch`'s builds, with their sizes: every diff under
    `diffs/<id>/`, every file of the report's folder, the branch's `latest` pointer when it
    points at one of them (a newer build of the branch would have pointed it on: this one was
    the newest to publish, and a pointer to a deleted report is a broken link), and the single
    page reports had before they were published as folders (`reports/build-<id>.html`,
    counted without its size: a store says when a key was written, not how big it is, without
    listing its whole folder)."""
    found: dict[str, int] = {}
    for build in batch:
        for prefix in (f"{DIFFS_PREFIX}/{build}/", f"{reports[build].folder}/"):
            found.update((item.key, item.size) for item in store.listing(prefix))
    pointers = {reports[build].pointer for build in batch}
    for pointer in sorted(store.written(pointers)):
        page = store.read_bytes(pointer)
        if pointed_build(page) in batch:
            found[pointer] = len(page)
    legacy = [f"{REPORTS_PREFIX}/build-{build}.html" for build in batch]
    found.update(dict.fromkeys(store.written(legacy), 0))
    return found


def _delete_rows(engine: Engine, batch: Sequence[int]) -> int | None:
    """Delete `batch`'s builds with their rows, in one transaction; the jobs deleted with them.

    No foreign key cascades and neither database defers their checks (PostgreSQL checks a NO
    ACTION key at the end of each statement, SQLite an immediate one likewise), so each table's
    rows go before the rows they point at: jobs (at shards and builds), reviews and frozen
    baselines (at snapshots), snapshots (at shards, builds and, by `baseline_id`, each other: those of one
    batch go in one statement), shards and attempts, then the builds. None, with nothing
    deleted, when a row that stays turns out to point at one of them: the plan is stale (a
    build was created or changed since), so this prune deletes no more builds and the next
    one plans again. The batch's diffs and report, deleted just before, stay deleted: a report
    is written again when asked for (`build ID`), a diff is not.
    """
    try:
        with transaction(engine) as conn:
            deleted = conn.execute(delete(jobs).where(jobs.c.build_id.in_(batch))).rowcount
            for table in (reviews, build_baselines, snapshots, capture_shards, capture_attempts):
                conn.execute(delete(table).where(table.c.build_id.in_(batch)))
            conn.execute(delete(builds).where(builds.c.id.in_(batch)))
    except IntegrityError as error:
        log.warning("builds kept: still referenced", build_ids=list(batch), error=str(error.orig))
        return None
    return int(deleted)


def _jobs_left(conn: Connection, batch: Sequence[int], cutoff: datetime) -> int:
    """How many jobs of `batch`'s builds step 1 leaves (finished after `cutoff`): those that
    go with their builds, for a dry run to count as the real prune does."""
    left = or_(
        jobs.c.finished_at.is_(None),
        jobs.c.finished_at >= cutoff,
        jobs.c.status.not_in(queue.FINISHED_STATES),
    )
    statement = select(func.count()).select_from(jobs).where(jobs.c.build_id.in_(batch), left)
    return int(conn.execute(statement).scalar_one())


# Step 3: stored files that nothing names.


def sweep_files(
    engine: Engine,
    store: ArtifactStore,
    *,
    grace_seconds: float,
    now: float,
    gone: Collection[int] = frozenset(),
    dry_run: bool,
) -> FilesSwept:
    """Delete the files under `SWEPT_PREFIXES` that nothing names and that were written more
    than `grace_seconds` before `now` (the host's clock, see `prune`).

    Marks first, then one pass over the listing keeps only the unmarked old files, so memory
    holds the marks and the garbage, not the listing. Just before deleting, the builds created
    since the mark began and the open jobs are read again, and what they name is spared: an
    upload reuses a file it finds stored (however old) without writing it again, so a build
    committed meanwhile may name a file this sweep found unnamed. `gone`: builds to treat as
    deleted (a dry run's step 2).
    """
    mark_started = database_now(engine)
    verdicts, doomed = _unnamed_and_old(store, mark(engine, store, gone), now - grace_seconds)
    if doomed:
        since = mark_started - timedelta(seconds=RECHECK_SLACK_SECONDS)
        recent = _recent_marks(engine, store, since, gone)
        spared = [key for key in doomed if _named(key, recent)]
        for key in spared:
            del doomed[key]
        verdicts["deleted"] -= len(spared)
        verdicts["referenced"] += len(spared)
    if not dry_run:
        keys = sorted(doomed)
        for start in range(0, len(keys), KEYS_PER_DELETE):
            store.delete(keys[start : start + KEYS_PER_DELETE])
    swept = FilesSwept(dict(verdicts), sum(doomed.values()))
    counts = {str(verdict): count for verdict, count in verdicts.items()}
    log.info("files swept", dry_run=dry_run, bytes=swept.bytes, **counts)
    return swept


def _unnamed_and_old(
    store: ArtifactStore, marks: Marks, written_before: float
) -> tuple[Counter[FileVerdict], dict[str, int]]:
    """One pass over the listing: every file's verdict counted, and the files to delete with
    their sizes (only those are held, however long the listing)."""
    verdicts: Counter[FileVerdict] = Counter()
    doomed: dict[str, int] = {}
    for item in _listing(store):
        verdict = _verdict(item.key, item.modified, marks, written_before)
        verdicts[verdict] += 1
        if verdict == "deleted":
            doomed[item.key] = item.size
    return verdicts, doomed


def _listing(store: ArtifactStore) -> Iterator[StoredObject]:
    """Every stored file under `SWEPT_PREFIXES`, read once."""
    for prefix in SWEPT_PREFIXES:
        yield from store.listing(prefix)


def _verdict(key: str, modified: float, marks: Marks, written_before: float) -> FileVerdict:
    """What the sweep makes of the file `key`, last written at `modified`."""
    if key in marks.keys:
        return "referenced"
    if _named(key, marks):
        return "unsure"
    if modified >= written_before:
        return "young"
    return "deleted"


def _named(key: str, marks: Marks) -> bool:
    """Whether `key` stays by `marks`: marked, or under `storybooks/` while unsure."""
    return key in marks.keys or (marks.unsure and key.startswith(f"{STORYBOOKS_PREFIX}/"))


def mark(engine: Engine, store: ArtifactStore, gone: Collection[int] = frozenset()) -> Marks:
    """Every key a remaining build or open job names: its snapshots' images and diffs, its
    Storybook's manifest and every file the manifest lists, and any stored key in an open
    job's data (an upload's capture jobs name its images before any snapshot row does).
    Builds in `gone` are left out."""
    marks = Marks(_snapshot_keys(engine, gone))
    with transaction(engine) as conn:
        manifests = _manifests(conn, builds.c.id.not_in(gone) if gone else None)
        marks.keys.update(_open_job_keys(conn))
    _mark_manifests(store, manifests, marks)
    return marks


def _snapshot_keys(engine: Engine, gone: Collection[int]) -> set[str]:
    """The images and diffs of every snapshot of a build not in `gone`, a page per transaction."""
    keys: set[str] = set()
    after = 0
    while True:
        with transaction(engine) as conn:
            rows = conn.execute(
                select(
                    snapshots.c.id,
                    snapshots.c.build_id,
                    snapshots.c.image_path,
                    snapshots.c.diff_path,
                )
                .where(snapshots.c.id > after)
                .order_by(snapshots.c.id)
                .limit(MARK_PAGE_ROWS)
            ).all()
        if not rows:
            return keys
        for row in rows:
            if row.build_id not in gone:
                keys.update(key for key in (row.image_path, row.diff_path) if key)
        after = rows[-1].id


def _manifests(conn: Connection, which: ColumnElement[bool] | None) -> set[str]:
    """The manifest keys of the Storybook builds `which` selects (all when None)."""
    statement = select(builds.c.storybook).where(builds.c.storybook.is_not(None))
    if which is not None:
        statement = statement.where(which)
    return {ref["manifest"] for ref in conn.execute(statement).scalars() if ref}


def _open_job_keys(conn: Connection) -> set[str]:
    """Every stored key in the data of a queued or running job."""
    rows = conn.execute(select(jobs.c.data).where(jobs.c.status.in_(("queued", "running"))))
    return {key for data in rows.scalars() for key in _keys_in(data)}


def _keys_in(document: Any) -> Iterator[str]:
    """The strings in a JSON document that name a key under `SWEPT_PREFIXES`."""
    if isinstance(document, str):
        if document.startswith(SWEPT_PREFIXES):
            yield document
    elif isinstance(document, dict):
        for value in document.values():
            yield from _keys_in(value)
    elif isinstance(document, list):
        for value in document:
            yield from _keys_in(value)


def _mark_manifests(store: ArtifactStore, manifests: Collection[str], marks: Marks) -> None:
    """Mark each manifest and the files it lists, each manifest read once however many builds
    share it. A missing one names nothing left to keep; one that cannot be read leaves
    `storybooks/` unswept (`Marks.unsure`)."""
    for key in manifests:
        marks.keys.add(key)
        try:
            listed = _manifest_files(store.read_bytes(key))
        except (ArtifactMissing, FileNotFoundError):
            log.warning("manifest missing", key=key)
        except ValueError as error:
            log.warning("manifest unreadable: storybooks not swept", key=key, error=str(error))
            marks.unsure = True
        else:
            marks.keys.update(listed)


def _manifest_files(document: bytes) -> set[str]:
    """The keys of the files a manifest (`ipc.storybook.manifest_document`) lists;
    `ValueError` for anything else (a document nested past Python's recursion limit too)."""
    try:
        manifest = json.loads(document)
    except RecursionError:
        raise ValueError("nested too deep to be a manifest") from None
    if not isinstance(manifest, dict) or manifest.get("version") != MANIFEST_VERSION:
        raise ValueError(f"not a version {MANIFEST_VERSION} manifest")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise ValueError("no files listed")
    return {file_key(path, digest) for path, digest in files.items()}


def _recent_marks(
    engine: Engine, store: ArtifactStore, since: datetime, gone: Collection[int]
) -> Marks:
    """What builds created since `since` (but those in `gone`), and the open jobs, name now
    (see `sweep_files`)."""
    recent = select(builds.c.id).where(builds.c.created_at >= since)
    if gone:
        recent = recent.where(builds.c.id.not_in(gone))
    marks = Marks(set())
    with transaction(engine) as conn:
        rows = conn.execute(
            select(snapshots.c.image_path, snapshots.c.diff_path).where(
                snapshots.c.build_id.in_(recent.scalar_subquery())
            )
        )
        marks.keys.update(key for row in rows for key in row if key)
        manifests = _manifests(conn, builds.c.id.in_(recent.scalar_subquery()))
        marks.keys.update(_open_job_keys(conn))
    _mark_manifests(store, manifests, marks)
    return marks


def _size(count: int) -> str:
    """`count` bytes for a person: 812 B, 4.2 KiB, 1.3 GiB."""
    size, unit = float(count), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{count} B" if unit == "B" else f"{size:.1f} {unit}"
