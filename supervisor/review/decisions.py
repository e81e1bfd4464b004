"""Recording a review: a person accepts or rejects snapshots of an ended build.

`review` and `serve`'s review API both call `review_build` inside a transaction, which does
the whole of it there: a row of `reviews` per snapshot decided (every decision is kept; the
latest per snapshot is its state), the baselines that follow from it (an acceptance makes the
snapshot its branch's baseline, or the project's on the baseline branch; a rejection takes an
earlier acceptance back), the build's review state (`supervisor.review.state`), a `publish` of
its report so that the report shows the decision, and a `build.reviewed` notification per
webhook. The build's row is locked first, so two reviewers at once are recorded one after the
other: both decisions are in the history and the later one is the state.

A review is refused, with one line and nothing written, for a build that has not ended or was
cancelled, and for a snapshot that is not in the build, failed (there is no image to accept),
or is unchanged (there is nothing to decide).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import structlog
from sqlalchemy import Connection, RowMapping, insert, select, update

from supervisor.builds import baselines
from supervisor.builds.ended import queue_publish
from supervisor.builds.notify import REVIEWED_EVENT, queue_notifications
from supervisor.db.tables import (
    Decision,
    ReviewState,
    builds,
    projects,
    reviews,
    snapshots,
)
from supervisor.review.state import REVIEWABLE, review_state

log = structlog.get_logger(__name__)

#: The longest reviewer name and comment kept, in characters.
MAX_BY, MAX_COMMENT = 200, 4000


class ReviewRefused(Exception):
    """A review that cannot be taken; its text is the one line that says why."""


class NoSuchBuild(ReviewRefused):
    """The build to review does not exist."""


@dataclass(frozen=True)
class ReviewOutcome:
    """What one review recorded."""

    build_id: int
    decision: Decision
    #: The snapshots decided, by name.
    names: tuple[str, ...]
    #: The build's review state after it.
    state: ReviewState | None


def review_build(
    conn: Connection,
    build_id: int,
    decision: Decision,
    names: Sequence[str] | None,
    by: str,
    comment: str | None = None,
) -> ReviewOutcome:
    """Record `decision` by `by` on the snapshots `names` of build `build_id` (None: every
    changed and new one); `ReviewRefused` with nothing written when it cannot be taken."""
    by, comment = _check_person(by, comment)
    build = _lock(conn, build_id)
    chosen = _chosen(conn, build, names)
    ids = [snapshot_id for snapshot_id, _name in chosen]
    decided = conn.execute(
        insert(reviews).returning(reviews.c.id, sort_by_parameter_order=True),
        [
            {"build_id": build_id, "snapshot_id": snapshot_id, "decision": decision, "by": by,
             "comment": comment}
            for snapshot_id in ids
        ],
    ).scalars().all()  # fmt: skip
    branch = None if build["branch"] == build["baseline_branch"] else build["branch"]
    if decision == "accepted":
        baselines.adopt(conn, build["project_id"], branch, build_id, ids)
    else:
        baselines.withdraw(conn, build["project_id"], branch, ids)
    state = review_state(conn, build_id)
    conn.execute(update(builds).where(builds.c.id == build_id).values(review=state))
    queue_publish(conn, build_id)
    queue_notifications(conn, build_id, REVIEWED_EVENT, list(decided))
    names_decided = tuple(name for _id, name in chosen)
    log.info(
        "build reviewed",
        build_id=build_id,
        decision=decision,
        snapshots=len(names_decided),
        by=by,
        review=state,
    )
    return ReviewOutcome(build_id, decision, names_decided, state)


def _check_person(by: str, comment: str | None) -> tuple[str, str | None]:
    by = by.strip()
    if not by or len(by) > MAX_BY or not by.isprintable():
        raise ReviewRefused(
            f"a review needs the reviewer's name: printable, 1 to {MAX_BY} characters"
        )
    if comment is not None and len(comment) > MAX_COMMENT:
        raise ReviewRefused(f"a review's comment is at most {MAX_COMMENT} characters")
    return by, comment or None


def _lock(conn: Connection, build_id: int) -> RowMapping:
    """The build's row, locked for the rest of the transaction (as `reduce_build` locks it)."""
    build = (
        conn.execute(
            select(
                builds.c.id,
                builds.c.status,
                builds.c.branch,
                builds.c.project_id,
                projects.c.baseline_branch,
            )
            .join(projects, projects.c.id == builds.c.project_id)
            .where(builds.c.id == build_id)
            .with_for_update(key_share=True, of=builds)
        )
        .mappings()
        .one_or_none()
    )
    if build is None:
        raise NoSuchBuild(f"no build with id {build_id}")
    if build["status"] in ("pending", "capturing"):
        raise ReviewRefused(
            f"build {build_id} is still {build['status']}: review it once it has ended"
        )
    if build["status"] == "cancelled":
        raise ReviewRefused(f"build {build_id} was cancelled: there is nothing to review")
    return build


def _chosen(
    conn: Connection, build: RowMapping, names: Sequence[str] | None
) -> list[tuple[int, str]]:
    """(id, name) of the snapshots to decide on, in name order."""
    build_id = build["id"]
    if names is None:
        rows = conn.execute(
            select(snapshots.c.id, snapshots.c.name)
            .where(snapshots.c.build_id == build_id, snapshots.c.status.in_(REVIEWABLE))
            .order_by(snapshots.c.name)
        ).all()
        if not rows:
            raise ReviewRefused(f"build {build_id} has no changed or new snapshot to review")
        return [(row.id, row.name) for row in rows]
    wanted = sorted(set(names))
    if not wanted:
        raise ReviewRefused("name at least one snapshot, or none to review them all")
    found = {
        row.name: row
        for start in range(0, len(wanted), baselines.NAMES_PER_LOOKUP)
        for row in conn.execute(
            select(snapshots.c.id, snapshots.c.name, snapshots.c.status).where(
                snapshots.c.build_id == build_id,
                snapshots.c.name.in_(wanted[start : start + baselines.NAMES_PER_LOOKUP]),
            )
        )
    }
    for name in wanted:
        row = found.get(name)
        if row is None:
            raise ReviewRefused(f"build {build_id} has no snapshot named {name!r}")
        if row.status == "failed":
            raise ReviewRefused(f"snapshot {name!r} failed: it has no image to accept or reject")
        if row.status not in REVIEWABLE:
            raise ReviewRefused(f"snapshot {name!r} is {row.status}: there is nothing to review")
    return [(found[name].id, name) for name in wanted]
