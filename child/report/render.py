"""The report page of a build: one self-contained HTML file, made for review.

It opens from disk in any browser with no server and nothing fetched: its style (`report.css`)
and script (`report.js`), kept beside this module so that each can be read and edited as what
it is, are inlined into the page, and its images are relative links into its own folder
(`ipc.publish`).
What needs a look comes first: changed snapshots, then failed, new and unchanged, each status a
group that the filter shows alone. The header says what the build is and how it ended, and its
review state; the toolbar under it stays in view with the filter and the keys. A build that
takes review shows how to review it (`child.report.review`): the commands to run, or, served by
`serve`, buttons that its script shows once the server's API says it takes decisions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from html import escape
from importlib import resources

from child.report.paths import report_link
from child.report.review import build_review, state_badge, takes_review
from child.report.snapshot import snapshot_section
from ipc.build_view import REPORT_ORDER, BuildView, SnapshotView, spoken_duration

#: The order groups appear in: what needs a look first.
STATUS_ORDER = REPORT_ORDER
KEYS = (
    "<kbd>j</kbd> or <kbd>&rarr;</kbd> next snapshot, <kbd>k</kbd> or <kbd>&larr;</kbd> previous"
    " (among those the filter shows); <kbd>o</kbd> overlay, <kbd>b</kbd> blink (of the current"
    " one); click an image to zoom, <kbd>Esc</kbd> or a click closes it"
)
#: The review keys, listed once the server says it takes decisions (`report.js`).
REVIEW_KEYS = "<kbd>a</kbd> accept, <kbd>x</kbd> reject (the current one)"


@cache
def asset(name: str) -> str:
    """A file of this package (`report.css`, `report.js`), read once per process."""
    return resources.files("child.report").joinpath(name).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Listing:
    """What the page lists, apart from the build's own facts: its snapshots in report order
    (`STATUS_ORDER`, then by name), how many of each status, and the builds their baselines
    came from. An iterator of snapshots lets a build of any size be written a few at a time."""

    snapshots: Iterable[SnapshotView]
    counts: Mapping[str, int]
    baseline_builds: tuple[int, ...]
    #: The last snapshots in report order, counted but not shown (a build too large for one
    #: job's listing: `ipc.publish.LISTING_BYTES`).
    unlisted: int = 0

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def render_report(view: BuildView) -> str:
    """The report page of `view`, with links relative to the reports folder."""
    ordered = sorted(view.snapshots, key=lambda s: (STATUS_ORDER.index(s.status), s.name))
    counts = Counter(s.status for s in ordered)
    return "".join(report_parts(view, Listing(ordered, counts, view.baseline_builds)))


def report_parts(view: BuildView, listing: Listing) -> Iterator[str]:
    """The report page of `view` listing `listing`, in pieces to write one after another."""
    title = f"Build {view.id}: {view.project} @ {view.branch}"
    reviewed = takes_review(view, dict(listing.counts))
    yield "\n".join(
        [
            "<!doctype html>",
            '<html lang="en"><head><meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{escape(title)}</title><style>{asset('report.css')}</style></head>",
            f'<body data-build="{view.id}">',
            _header(view, title, listing, reviewed=reviewed),
            _toolbar(listing, len(view.unstable), reviewed=reviewed),
            "<main>",
        ]
    )
    yield from _groups(listing, view.id if reviewed else None)
    yield "\n".join(
        [
            "",
            _unlisted(listing.unlisted),
            "</main>",
            '<dialog class="zoom" aria-label="zoomed image"><div class="zoom-frame">'
            '<img alt=""></div><p class="zoom-caption"></p></dialog>',
            f"<script>{asset('report.js')}</script>",
            "</body></html>",
        ]
    )


def _header(view: BuildView, title: str, listing: Listing, *, reviewed: bool) -> str:
    """What the build is and how it ended; its review state, and how to review it when it
    takes review (`child.report.review`)."""
    status = escape(view.status)
    facts = [
        ("project", escape(view.project)),
        ("branch", escape(view.branch)),
        ("commit", f"<code>{escape(view.commit)}</code>" if view.commit else "-"),
        ("source", escape(view.source)),
        ("snapshots", _counts(listing)),
        ("created", f"{_time(view.created_at)} UTC"),
        *_started(view),
        ("finished", _finished(view)),
        ("baselines", _baselines(listing.baseline_builds)),
    ]
    rows = "".join(f"<div><dt>{name}</dt><dd>{value}</dd></div>" for name, value in facts)
    review = build_review(view) if reviewed else ""
    return (
        f'<header><h1><span class="badge {status}">{status}</span>{state_badge(view.review)}'
        f" {escape(title)}</h1>"
        f'<dl class="build">{rows}</dl>{_problems(view)}{_unstable(view)}{review}</header>'
    )


def _unstable(view: BuildView) -> str:
    """The snapshots whose shots never settled, apart: their pixels may be flake, not change."""
    if not view.unstable:
        return ""
    counted = (
        "their changes fail the gate" if view.unstable_fails else "shown, not failing the gate"
    )
    names = "".join(f"<li><code>{escape(name)}</code></li>" for name in view.unstable)
    return (
        f'<section class="unstable-list"><h2>unstable ({len(view.unstable)})</h2>'
        f"<p>These stories never gave two equal screenshots in a row; the last is kept, and"
        f" {counted}.</p><ul>{names}</ul></section>"
    )


def _counts(listing: Listing) -> str:
    counts = ", ".join(f"{listing.counts.get(status, 0)} {status}" for status in STATUS_ORDER)
    return f"{listing.total} ({counts})"


def _time(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S}"


def _started(view: BuildView) -> list[tuple[str, str]]:
    """When work began, with the queue's wait apart (the hosts' load, not the build's); no row
    for a build that has not begun, never did, or began before that was recorded."""
    waited = view.queued_seconds
    if view.started_at is None or waited is None:
        return []
    return [
        ("started", f"{_time(view.started_at)} UTC (waited {spoken_duration(waited)} in the queue)")
    ]


def _finished(view: BuildView) -> str:
    if view.finished_at is None:
        return "-"
    took = view.took_seconds
    return f"{_time(view.finished_at)} UTC" + (
        "" if took is None else f" (took {spoken_duration(took)})"
    )


def _baselines(builds: tuple[int, ...]) -> str:
    """The builds the baselines came from, each a link to its report beside this one."""
    if not builds:
        return "none: every snapshot is new"
    links = ", ".join(
        f'<a href="{report_link(build_id)}">build {build_id}</a>' for build_id in builds
    )
    return f"from {links}"


def _problems(view: BuildView) -> str:
    """The build's error, the baselines it has no snapshot for, and the stories it left out."""
    parts = [f'<p class="error">{escape(view.error)}</p>'] if view.error else []
    if view.removed:
        names = "".join(f"<li><code>{escape(name)}</code></li>" for name in view.removed)
        parts.append(
            f"<details><summary>{len(view.removed)} removed since the baselines"
            f" (a story deleted or renamed)</summary><ul>{names}</ul></details>"
        )
    if view.skipped:
        stories = "".join(
            f"<li><code>{escape(s['story_id'])}</code>: {escape(s['reason'])}</li>"
            for s in view.skipped
        )
        parts.append(
            f"<details><summary>{len(view.skipped)} {_plural(len(view.skipped), 'story', 'stories')}"
            " left out</summary>"
            f"<ul>{stories}</ul></details>"
        )
    return "".join(parts)


def _plural(count: int, one: str, many: str) -> str:
    return one if count == 1 else many


def _toolbar(listing: Listing, unstable: int, *, reviewed: bool) -> str:
    """The filter by status (and the unstable snapshots, when there are some), with counts,
    and the keys: in view while the page scrolls. The review keys are listed hidden, for
    `report.js` to show when the server takes decisions."""
    choices = [("all", listing.total)] + [(s, listing.counts.get(s, 0)) for s in STATUS_ORDER]
    if unstable:
        choices.append(("unstable", unstable))
    buttons = "".join(
        f'<button type="button" data-show="{status}" aria-pressed="{str(status == "all").lower()}">'
        f"{status} ({count})</button>"
        for status, count in choices
    )
    review_keys = f'<span class="review-keys" hidden>; {REVIEW_KEYS}</span>' if reviewed else ""
    return (
        f'<div class="toolbar"><nav aria-label="filter by status">{buttons}</nav>'
        f'<p class="keys">Keys: {KEYS}{review_keys}</p></div>'
    )


def _groups(listing: Listing, review_of: int | None) -> Iterator[str]:
    """A group per status present, in `STATUS_ORDER` (as the snapshots come); the unchanged
    group can load all its images at once. `review_of`: the build's id when it takes review."""
    status = None
    for index, snapshot in enumerate(listing.snapshots):
        if snapshot.status != status:
            if status is not None:
                yield "</div>"
            status = snapshot.status
            yield _group_heading(status, listing.counts.get(status, 0))
        yield snapshot_section(snapshot, f"s{index}", review_of)
    if status is not None:
        yield "</div>"


def _unlisted(count: int) -> str:
    """What a build too large to list whole leaves out: always the end of the report order."""
    if not count:
        return ""
    return (
        f'<p class="unlisted">{count} more {_plural(count, "snapshot", "snapshots")} not listed:'
        " the report lists a build's first snapshots in this order, up to its size limit;"
        " <code>python -m supervisor build ID</code> lists them all.</p>"
    )


def _group_heading(status: str, count: int) -> str:
    more = (
        ' <button type="button" class="show-all">show all images</button>'
        if status == "unchanged"
        else ""
    )
    return (
        f'\n<div class="group" data-group="{status}">'
        f'<h2>{status} <span class="meta">({count})</span>{more}</h2>'
    )
