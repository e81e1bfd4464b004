"""Writing a build's report, once the build's end has committed.

The report is a view of results already recorded, never part of recording them: the host
writes it after the transaction that ended the build (`publish_report`), and a report that
cannot be written (a reports folder that is not writable, a full disk) is logged and left for
later, while the build and its jobs end as they would have. `build ID` writes it when it is
missing (`with_report`).
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import structlog
from sqlalchemy import Engine, update
from sqlalchemy.exc import SQLAlchemyError

from supervisor.builds.report.paths import report_path
from supervisor.builds.report.render import Listing, report_parts
from supervisor.builds.view import BuildView, baseline_builds, load_build, report_snapshots
from supervisor.db.connection import DatabaseUnavailable, transaction
from supervisor.db.tables import builds

log = structlog.get_logger(__name__)


def publish_report(engine: Engine, build_id: int, artifacts: Path) -> str | None:
    """Write build `build_id`'s report if the build has ended, and record where it is.

    Returns its path relative to `artifacts`; None when the build has not ended (or does not
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
            relative = _write(view, listing, artifacts)
        with transaction(engine) as conn:
            conn.execute(update(builds).where(builds.c.id == build_id).values(report_path=relative))
    except (OSError, SQLAlchemyError, DatabaseUnavailable) as error:
        log.error("cannot write the report", build_id=build_id, error=str(error))
        return None
    seconds = round(time.monotonic() - started, 3)
    log.info("report written", build_id=build_id, path=relative, seconds=seconds)
    return relative


def with_report(engine: Engine, view: BuildView, artifacts: Path) -> BuildView:
    """`view`, with its report written first if the build ended and the file is not there
    (never written, or removed since)."""
    if not view.ended or (view.report_path and (artifacts / view.report_path).is_file()):
        return view
    return replace(view, report_path=publish_report(engine, view.id, artifacts))


def _write(view: BuildView, listing: Listing, artifacts: Path) -> str:
    """Write `view`'s report atomically (a temporary file renamed over it), so that a reader
    never opens half a page, and piece by piece as its snapshots are read, so that the host
    holds a few hundred of them at a time, whatever the build's size; returns its path
    relative to `artifacts`."""
    relative = report_path(view.id)
    target = artifacts / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".report-", suffix=".html")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.writelines(report_parts(view, listing))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return relative
