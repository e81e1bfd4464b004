"""The report's part in review: the build's review state, each snapshot's decision, and how to
decide.

The page is static: opened from disk, or served by any web server or bucket, it cannot record
a decision, so under each changed or new snapshot, and for the whole build, it shows the
`review` command to run (names shell-quoted, then HTML-escaped). Served by `serve`, `report.js`
asks the server's API whether it takes decisions, and if so shows the Accept and Reject buttons
rendered here hidden, asks for the reviewer's name and token in the form rendered here, and
redraws the badges from the server's answer. The badges carry the state as the page was
published; the served page replaces them with the server's.
"""

from __future__ import annotations

import shlex
from html import escape
from typing import Literal

from ipc.build_view import BuildView

#: How the commands shown name the program (`storyshelf`, the same as `python -m supervisor`).
PROGRAM = "storyshelf"
#: The snapshots a review decides on: the others have nothing to accept (`unchanged`) or no
#: image to accept (`failed`).
REVIEWABLE = ("changed", "new")
#: What stands for the reviewer in the commands shown.
REVIEWER = "<you>"

Verb = Literal["accept", "reject"]


def takes_review(view: BuildView, counts: dict[str, int]) -> bool:
    """Whether the build can be reviewed: it has ended, was not cancelled, and has changed or
    new snapshots (`counts` by status)."""
    return (
        view.ended
        and view.status != "cancelled"
        and any(counts.get(status, 0) for status in REVIEWABLE)
    )


def review_command(build_id: int, verb: Verb, name: str | None = None) -> str:
    """The command that records `verb` on snapshot `name` of the build (None: on every changed
    and new one), as a shell takes it."""
    snapshot = f" --snapshot {shlex.quote(name)}" if name is not None else ""
    return f"{PROGRAM} review {build_id} --{verb}{snapshot} --by {REVIEWER}"


def commands(build_id: int, name: str | None = None) -> str:
    """The accept and reject commands, ready for the page."""
    lines = "".join(
        f"<code>{escape(review_command(build_id, verb, name))}</code>"
        for verb in ("accept", "reject")
    )
    return f'<div class="review-commands">{lines}</div>'


def state_badge(review: str | None) -> str:
    """The build's review state, in the header: empty and hidden until it has one."""
    return _badge("review-state", review, f"review {review}" if review else "")


def decision_badge(review: str | None) -> str:
    """A snapshot's latest decision, beside its status: empty and hidden until someone
    decides."""
    return _badge("decision", review, review or "")


def _badge(kind: str, value: str | None, text: str) -> str:
    """A badge `report.js` redraws, found by its `data-<kind>` (the value, or empty)."""
    shown = escape(value or "")
    hidden = "" if value else " hidden"
    return f'<span class="badge {kind} {shown}" data-{kind}="{shown}"{hidden}>{escape(text)}</span>'


def build_review(view: BuildView) -> str:
    """The header's review section: the commands for the whole build, the Accept all button
    and the reviewer's form for a served page, and where messages are said."""
    return (
        '<section class="review-build" aria-label="review">'
        "<p>Review these changes: accept them as the baselines of this branch's next builds,"
        ' or reject them.<span class="review-commands"> From the command line:</span></p>'
        f"{commands(view.id)}"
        '<p class="review-read-only" hidden>This server is read-only (started without'
        " <code>STORYSHELF_REVIEW_TOKEN</code>): run the commands shown instead.</p>"
        '<div class="review-actions" hidden><button type="button" class="accept-all">'
        "Accept all changed and new</button></div>"
        f"{_reviewer_form()}"
        '<p class="review-message" role="status" aria-live="polite" hidden></p>'
        "</section>"
    )


def snapshot_review(build_id: int, name: str) -> str:
    """Under a changed or new snapshot: its commands, and its buttons for a served page."""
    return (
        f'<div class="review-snapshot">{commands(build_id, name)}'
        '<div class="review-buttons" role="group" aria-label="review this snapshot" hidden>'
        '<button type="button" data-decide="accept">Accept</button>'
        '<button type="button" data-decide="reject">Reject</button></div></div>'
    )


def _reviewer_form() -> str:
    """Who decides, asked once per tab at the first decision (kept in sessionStorage)."""
    return (
        '<form class="reviewer" hidden><p>Who is reviewing? Asked once: kept in this tab'
        " only.</p>"
        '<label>Your name <input name="by" autocomplete="username" required maxlength="200">'
        "</label>"
        '<label>Review token <input name="token" type="password"'
        ' autocomplete="current-password" required></label>'
        '<button type="submit">Continue</button> <button type="button" class="cancel">'
        "Cancel</button></form>"
    )
