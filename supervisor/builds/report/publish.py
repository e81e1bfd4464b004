"""Writing a build's report, once the build's end has committed.

The report is a view of results already recorded, never part of recording them: the host
writes it after the transaction that ended the build (`publish_report`), into the artifact store
beside the images it links to, and a report that cannot be written (a reports folder that is not
writable, a full disk, a bucket that does not answer) is logged and left for later, while the build and its jobs end as they would have. `build ID` writes it when it is
missing (`with_report`).
"""

from __future__ import annotations

import time
from dataclasses import replace

import structlog
from sqlalchemy import Engine, update
from sqlalchemy.exc import SQLAlchemyError

from ipc.artifacts.store import ArtifactStore, StoreError
from supervisor.builds.report.paths import report_path
from supervisor.builds.report.render import Listing, report_parts
from supervisor.builds.view import BuildView, baseline_builds, load_build, report_snapshots
from supervisor.db.connection import DatabaseUnavailable, transaction
from supervisor.db.tables import builds

log = structlog.get_logger(__name__)


def publish_report(engine: Engine, build_id: int, store: ArtifactStore) -> str | None:
    """Write build `build_id`'s report if the build has ended, and record where it is.

    Returns its key in `store`; None when the build has not ended (or does not
    exist) or when the report cannot be written. It never raises for an I/O error, the
    database's included: it runs after the build's end committed, so there is nothing left to
    undo, and the error is logged with the build's id for the next `build ID` to mend.
    """
    started = time.monotonic()
    try:
        with engine.connect() as conn:
            view = load_build(conn, build_id, with_snapshots=False)
            if view is None or not view.ended:
                return None
            listing = Listing(
                report_snapshots(conn, build_id), view.counts, baseline_builds(conn, build_id)
            )
            relative = _write(view, listing, store)
        with transaction(engine) as conn:
            conn.execute(update(builds).where(builds.c.id == build_id).values(report_path=relative))
    except (OSError, StoreError, SQLAlchemyError, DatabaseUnavailable) as error:
        log.error("cannot write the report", build_id=build_id, error=str(error))
        return None
    seconds = round(time.monotonic() - started, 3)
    log.info("report written", build_id=build_id, path=relative, seconds=seconds)
    return relative


def with_report(engine: Engine, view: BuildView, store: ArtifactStore) -> BuildView:
    """`view`, with its report written first if the build ended and the report is not there
    (never written, or removed since)."""
    if not view.ended or (view.report_path and _stored(store, view.report_path)):
        return view
    return replace(view, report_path=publish_report(engine, view.id, store))


def _stored(store: ArtifactStore, key: str) -> bool:
    """Whether `key` is stored; a store that cannot say is asked to take the report again."""
    try:
        return store.exists(key)
    except (OSError, StoreError):
        return False


def _write(view: BuildView, listing: Listing, store: ArtifactStore) -> str:
    """Write `view`'s report whole or not at all (`ArtifactStore.writer`), so that a reader
    never opens half a page, and piece by piece as its snapshots are read, so that the host
    holds a few hundred of them at a time, whatever the build's size; returns its key."""
    key = report_path(view.id)
    with store.writer(key) as out:
        for part in report_parts(view, listing):
            out.write(part.encode())
    return key
