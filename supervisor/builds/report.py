"""The HTML report of a build, written once the build's end has committed.

The report is a view of results already recorded, never part of recording them: the host
writes it after the transaction that ended the build (`publish_report`), and a report that
cannot be written (a reports folder that is not writable, a full disk) is logged and left for
later, while the build and its jobs end as they would have. `build ID` writes it when it is
missing (`with_report`).

One self-contained file (`reports/build-<id>.html` under the artifacts) that opens from disk in
any browser, with no server and nothing fetched: its CSS and script are inline and its images
are relative links into the artifacts folder beside it. Changed snapshots show baseline, new and
diff side by side; new and failed ones are listed (failed with their error); a filter shows one
status at a time. Every name and message is HTML-escaped: story names come from uploaded paths.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from html import escape
from pathlib import Path
from urllib.parse import quote

import structlog
from sqlalchemy import Engine, update
from sqlalchemy.exc import SQLAlchemyError

from supervisor.builds.view import BuildView, SnapshotView, load_build
from supervisor.db.connection import DatabaseUnavailable, transaction
from supervisor.db.tables import builds

log = structlog.get_logger(__name__)

REPORTS_FOLDER = "reports"
#: The order sections appear in: what needs a look first.
STATUS_ORDER = ("changed", "failed", "new", "unchanged")

STYLE = """
:root { color-scheme: light dark; --line: #8884; --muted: #888; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; padding: 24px; max-width: 1600px; }
header h1 { font-size: 20px; margin: 0 0 4px; }
.meta { color: var(--muted); margin: 0 0 12px; }
.error { color: #c0392b; white-space: pre-wrap; }
nav button { font: inherit; padding: 4px 12px; border: 1px solid var(--line);
  border-radius: 14px; background: none; color: inherit; cursor: pointer; margin-right: 4px; }
nav button[aria-pressed="true"] { background: #2563eb; border-color: #2563eb; color: white; }
.snapshot { border-top: 1px solid var(--line); padding: 12px 0; }
.snapshot h2 { font-size: 15px; margin: 0 0 6px; word-break: break-all; }
.badge { display: inline-block; padding: 1px 8px; border-radius: 10px; font-size: 12px;
  color: white; margin-right: 6px; vertical-align: 1px; }
.badge.changed { background: #d97706; } .badge.failed { background: #c0392b; }
.badge.new { background: #2563eb; } .badge.unchanged { background: #16a34a; }
.badge.passed { background: #16a34a; } .badge.cancelled, .badge.pending,
.badge.capturing { background: #6b7280; }
.sides { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 12px; }
.sides.one { grid-template-columns: minmax(0, 1fr); max-width: 540px; }
figure { margin: 0; }
figcaption { color: var(--muted); font-size: 12px; margin-bottom: 4px; }
figure img { max-width: 100%; border: 1px solid var(--line); display: block; }
.snapshot.unchanged .sides { display: none; }
"""

SCRIPT = """
const buttons = document.querySelectorAll("nav button");
function show(status) {
  for (const button of buttons) button.setAttribute("aria-pressed", button.dataset.show === status);
  for (const item of document.querySelectorAll(".snapshot"))
    item.hidden = status !== "all" && item.dataset.status !== status;
}
for (const button of buttons) button.addEventListener("click", () => show(button.dataset.show));
show("all");
"""


def report_path(build_id: int) -> str:
    """Where build `build_id`'s report lives, relative to the artifacts root."""
    return f"{REPORTS_FOLDER}/build-{build_id}.html"


def publish_report(engine: Engine, build_id: int, artifacts: Path) -> str | None:
    """Write build `build_id`'s report if the build has ended, and record where it is.

    Returns its path relative to `artifacts`; None when the build has not ended (or does not
    exist) or when the report cannot be written. It never raises for an I/O error, the
    database's included: it runs after the build's end committed, so there is nothing left to
    undo, and the error is logged with the build's id for the next `build ID` to mend.
    """
    try:
        with engine.connect() as conn:
            view = load_build(conn, build_id)
        if view is None or not view.ended:
            return None
        relative = _write(view, artifacts)
        with transaction(engine) as conn:
            conn.execute(update(builds).where(builds.c.id == build_id).values(report_path=relative))
    except (OSError, SQLAlchemyError, DatabaseUnavailable) as error:
        log.error("cannot write the report", build_id=build_id, error=str(error))
        return None
    log.info("report written", build_id=build_id, path=relative)
    return relative


def with_report(engine: Engine, view: BuildView, artifacts: Path) -> BuildView:
    """`view`, with its report written first if the build ended and the file is not there
    (never written, or removed since)."""
    if not view.ended or (view.report_path and (artifacts / view.report_path).is_file()):
        return view
    return replace(view, report_path=publish_report(engine, view.id, artifacts))


def _write(view: BuildView, artifacts: Path) -> str:
    """Write `view`'s report atomically; returns its path relative to `artifacts`."""
    relative = report_path(view.id)
    target = artifacts / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".report-", suffix=".html")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(render_report(view))
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return relative


def render_report(view: BuildView) -> str:
    """The report page of `view`, with links relative to the reports folder."""
    title = f"Build {view.id}: {view.project} @ {view.branch}"
    ordered = sorted(view.snapshots, key=lambda s: (STATUS_ORDER.index(s.status), s.name))
    return "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{STYLE}</style></head><body>",
            _header(view, title),
            _filter(view),
            "<main>",
            *(_snapshot(snapshot) for snapshot in ordered),
            "</main>",
            f"<script>{SCRIPT}</script>",
            "</body></html>",
        ]
    )


def _header(view: BuildView, title: str) -> str:
    commit = f" at {escape(view.commit)}" if view.commit else ""
    finished = f", finished {view.finished_at:%Y-%m-%d %H:%M:%S} UTC" if view.finished_at else ""
    error = f'<p class="error">{escape(view.error)}</p>' if view.error else ""
    if view.removed:
        names = ", ".join(f"<code>{escape(name)}</code>" for name in view.removed)
        error += f'<p class="meta">removed since the baselines: {names}</p>'
    if view.skipped:
        names = ", ".join(
            f"<code>{escape(s['story_id'])}</code> ({escape(s['reason'])})" for s in view.skipped
        )
        error += f'<p class="meta">left out: {names}</p>'
    sources = ", ".join(str(build_id) for build_id in view.baseline_builds)
    baselines = f"baselines from build {sources}" if sources else "no baselines"
    return (
        f'<header><h1><span class="badge {escape(view.status)}">{escape(view.status)}</span>'
        f"{escape(title)}</h1>"
        f'<p class="meta">created {view.created_at:%Y-%m-%d %H:%M:%S} UTC{finished}{commit}; '
        f"{baselines}</p>"
        f"{error}</header>"
    )


def _filter(view: BuildView) -> str:
    choices = [("all", len(view.snapshots))] + [(s, view.counts[s]) for s in STATUS_ORDER]
    buttons = "".join(
        f'<button type="button" data-show="{status}">{status} ({count})</button>'
        for status, count in choices
    )
    return f'<nav aria-label="filter by status">{buttons}</nav>'


def _snapshot(snapshot: SnapshotView) -> str:
    status = escape(snapshot.status)
    return (
        f'<section class="snapshot {status}" data-status="{status}">'
        f'<h2><span class="badge {status}">{status}</span>{escape(snapshot.label)}</h2>'
        f"{_story(snapshot)}{_facts(snapshot)}{_pictures(snapshot)}</section>"
    )


def _story(snapshot: SnapshotView) -> str:
    """A Storybook snapshot's story id (what `build ID` names it by), and whether it settled."""
    if snapshot.story_id is None:
        return ""
    unsettled = (
        "; never settled: two shots in a row never agreed, the last is shown"
        if snapshot.settled is False
        else ""
    )
    return f'<p class="meta">story <code>{escape(snapshot.name)}</code>{unsettled}</p>'


def _facts(snapshot: SnapshotView) -> str:
    if snapshot.error:
        return f'<p class="error">{escape(snapshot.error)}</p>'
    facts = []
    if snapshot.width is not None and snapshot.height is not None:
        facts.append(f"{snapshot.width}x{snapshot.height}")
    if snapshot.diff_pixels:
        ratio = (snapshot.diff_ratio or 0.0) * 100
        facts.append(f"{snapshot.diff_pixels} pixels changed ({ratio:.2f} %)")
    if snapshot.metric:
        facts.append(f"metric {escape(snapshot.metric)}")
    if snapshot.baseline_build_id is not None:
        facts.append(f"baseline from build {snapshot.baseline_build_id}")
    return f'<p class="meta">{", ".join(facts)}</p>' if facts else ""


def _pictures(snapshot: SnapshotView) -> str:
    if snapshot.status == "failed":
        return ""
    if snapshot.status == "changed":
        sides = [
            (f"baseline (build {snapshot.baseline_build_id})", snapshot.baseline_image),
            ("new", snapshot.image_path),
            ("diff", snapshot.diff_path),
        ]
        figures = "".join(_figure(label, path, snapshot.name) for label, path in sides if path)
        return f'<div class="sides">{figures}</div>'
    if snapshot.image_path is None:
        return ""
    return f'<div class="sides one">{_figure("new", snapshot.image_path, snapshot.name)}</div>'


def _figure(label: str, path: str, name: str) -> str:
    href = _link(path)
    alt = escape(f"{name} ({label})")
    return (
        f"<figure><figcaption>{label}</figcaption>"
        f'<a href="{href}"><img src="{href}" alt="{alt}" loading="lazy"></a></figure>'
    )


def _link(path: str) -> str:
    """`path` (relative to the artifacts root) as seen from the reports folder, URL-quoted."""
    return escape(quote(f"../{path}"))
