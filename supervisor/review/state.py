"""A build's review state, read from its snapshots' latest decisions (DESIGN section 4).

One rule serves the build's end (`supervisor.builds.reduce`) and every review
(`supervisor.review.decisions`), each of which writes the answer to `builds.review` in its own
transaction, so that `build`, `status`, the report and the served pages read one column:

* `rejected` as soon as any snapshot's latest decision is a rejection: a person said no;
* `accepted` when the build was accepted when it ended (the baseline branch's), or when every
  change that counts for the gate has an acceptance as its latest decision;
* `pending` for a changed build short of that;
* None for a build nobody needs to review (passed or failed, no decision taken).
"""

from __future__ import annotations

from typing import cast

from sqlalchemy import Connection, select

from supervisor.db.tables import Decision, ReviewState, builds, projects, reviews, snapshots

#: The snapshots a review decides on: the others have nothing to accept (`unchanged`) or no
#: image to accept (`failed`).
REVIEWABLE = ("changed", "new")


def latest_decisions(conn: Connection, build_id: int) -> dict[int, Decision]:
    """Each reviewed snapshot of build `build_id` -> its latest decision (later rows win)."""
    rows = conn.execute(
        select(reviews.c.snapshot_id, reviews.c.decision)
        .where(reviews.c.build_id == build_id)
        .order_by(reviews.c.id)
    )
    return {snapshot_id: cast(Decision, decision) for snapshot_id, decision in rows}


def review_state(conn: Connection, build_id: int) -> ReviewState | None:
    """Build `build_id`'s review state as its row and its decisions stand in this transaction."""
    build = conn.execute(
        select(builds.c.status, builds.c.accepted_at, projects.c.unstable_fails)
        .join(projects, projects.c.id == builds.c.project_id)
        .where(builds.c.id == build_id)
    ).one()
    decided = latest_decisions(conn, build_id)
    if "rejected" in decided.values():
        return "rejected"
    if build.status != "changed":
        return "accepted" if decided else None
    if build.accepted_at is not None:
        return "accepted"
    gating = select(snapshots.c.id).where(
        snapshots.c.build_id == build_id, snapshots.c.status == "changed"
    )
    if not build.unstable_fails:
        gating = gating.where(snapshots.c.settled.is_not(False))
    if all(
        decided.get(snapshot_id) == "accepted" for snapshot_id in conn.execute(gating).scalars()
    ):
        return "accepted"
    return "pending"
