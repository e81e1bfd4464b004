"""The server's own pages: the recent builds of every project and branch, and the page of a
build whose report is not published yet.

Plain HTML with a little inline style and no script: a list to find a build and open its
report, which is where the review happens. Every name (project, branch, commit, error) comes
from an upload or a CI job, so every one is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from html import escape

from sqlalchemy import Connection, Engine
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from supervisor.builds import view
from supervisor.db.connection import transaction
from supervisor.db.tables import SNAPSHOT_STATES
from supervisor.serve.auth import TOKEN_VARIABLE, ReviewApi
from supervisor.serve.context import serving

#: The newest builds the list reads, of all projects: one indexed read, however many builds
#: the database holds.
RECENT_BUILDS = 500
#: The builds shown per branch, newest first.
PER_BRANCH = 10
#: How often the page of a build without a report looks again, in seconds.
RELOAD_SECONDS = 5
#: The snapshot states a build counts, in the list's column order.
STATUSES = SNAPSHOT_STATES

STYLE = """
:root { color-scheme: light dark; --line: #d1d9e0; --muted: #59636e; --accent: #0969da; }
@media (prefers-color-scheme: dark) { :root { --line: #3d444d; --muted: #9198a1; --accent: #4493f8; } }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0 auto;
  padding: 0 24px 48px; max-width: 1200px; }
a { color: var(--accent); }
h1 { font-size: 20px; } h2 { font-size: 17px; margin-top: 28px; }
h3 { font-size: 14px; margin: 16px 0 4px; overflow-wrap: anywhere; }
.meta, .empty { color: var(--muted); }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { text-align: left; padding: 3px 10px 3px 0; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { color: var(--muted); font-weight: normal; font-size: 12px; }
.n { text-align: right; font-variant-numeric: tabular-nums; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
"""


@dataclass(frozen=True)
class BuildRow:
    """One line of the list."""

    id: int
    project: str
    branch: str
    commit: str | None
    status: str
    review: str | None
    counts: dict[str, int]
    created_at: datetime


async def builds_page(request: Request) -> HTMLResponse:
    """`GET /`: the recent builds, by project and branch."""
    settings = serving(request)
    rows = await run_in_threadpool(_recent, settings.engine)
    return HTMLResponse(
        render_builds(rows, settings.token.api), headers={"Cache-Control": "no-store"}
    )


def _recent(engine: Engine) -> list[BuildRow]:
    with transaction(engine) as conn:
        return recent_builds(conn)


def recent_builds(conn: Connection, limit: int = RECENT_BUILDS) -> list[BuildRow]:
    """The `limit` newest builds of all projects, newest first."""
    return [
        BuildRow(
            id=row["id"],
            project=row["project"],
            branch=row["branch"],
            commit=row["commit"],
            status=row["status"],
            review=row["review"],
            counts={state: row[state] for state in STATUSES},
            created_at=row["created_at"],
        )
        for row in view.recent_builds(conn, limit)
    ]


def render_builds(rows: Iterable[BuildRow], api: ReviewApi) -> str:
    """The list: a section per project (by name), a table per branch (the most recently built
    first), up to `PER_BRANCH` builds each."""
    grouped: dict[str, dict[str, list[BuildRow]]] = {}
    for row in rows:
        branch = grouped.setdefault(row.project, {}).setdefault(row.branch, [])
        if len(branch) < PER_BRANCH:
            branch.append(row)
    sections = [
        f"<section><h2>{escape(project)}</h2>"
        + "".join(_branch(branch, shown) for branch, shown in grouped[project].items())
        + "</section>"
        for project in sorted(grouped)
    ]
    body = "".join(sections) or '<p class="empty">No builds yet.</p>'
    return _page("Storyshelf builds", f"<h1>Storyshelf builds</h1>{_review_note(api)}{body}")


def _review_note(api: ReviewApi) -> str:
    if api == "writable":
        return (
            '<p class="meta">Review in each report: Accept and Reject ask for your name and'
            " the review token once per tab.</p>"
        )
    return (
        f'<p class="meta review-api">Read-only: this server was started without'
        f" <code>{TOKEN_VARIABLE}</code>; each report shows the <code>review</code> command to"
        " run instead.</p>"
    )


def _branch(branch: str, rows: list[BuildRow]) -> str:
    header = "".join(
        f'<th class="n">{name}</th>' if name in STATUSES else f"<th>{name}</th>"
        for name in ("build", "commit", "status", "review", *STATUSES, "created (UTC)", "")
    )
    lines = "".join(_line(row) for row in rows)
    return f"<h3>{escape(branch)}</h3><table><tr>{header}</tr>{lines}</table>"


def _line(row: BuildRow) -> str:
    counts = "".join(f'<td class="n">{row.counts[status]}</td>' for status in STATUSES)
    commit = f"<code>{escape(row.commit[:12])}</code>" if row.commit else "-"
    return (
        f'<tr data-build="{row.id}"><td><a href="/builds/{row.id}/report">{row.id}</a></td>'
        f"<td>{commit}</td><td>{escape(row.status)}</td><td>{escape(row.review or '-')}</td>"
        f"{counts}<td>{row.created_at:%Y-%m-%d %H:%M:%S}</td>"
        f'<td><a href="/builds/{row.id}/report">report</a>'
        f' · <a href="/api/builds/{row.id}">json</a></td></tr>'
    )


def no_report_page(build_id: int, project: str, status: str) -> str:
    """A build without a published report: still capturing, or its report on the way; the page
    reloads itself until the report is there (then `/builds/<id>/report` sends it on)."""
    if status in ("pending", "capturing"):
        why = f"is {escape(status)}: its report is published when it ends"
    else:
        why = f"ended {escape(status)}: its report is being published"
    return _page(
        f"Build {build_id}: no report yet",
        f"<h1>Build {build_id} of {escape(project)}</h1><p>Build {build_id} {why}."
        f' This page looks again every {RELOAD_SECONDS} s.</p><p><a href="/">All builds</a></p>',
        refresh=RELOAD_SECONDS,
    )


def _page(title: str, body: str, *, refresh: int | None = None) -> str:
    again = f'<meta http-equiv="refresh" content="{refresh}">' if refresh else ""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"{again}<title>{escape(title)}</title><style>{STYLE}</style></head>"
        f"<body>{body}</body></html>\n"
    )
