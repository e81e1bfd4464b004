"""A build as people and CI read it, read from the database.

One reading of a build and its snapshots (`load_build`) serves `build ID`'s text
(`supervisor.builds.text`), its JSON (which CI scripts parse, so its keys are a contract) and
the HTML report.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import Connection, RowMapping, Select, case, func, select

from ipc.build_view import (
    REPORT_ORDER,
    SNAPSHOT_FIELDS,
    BuildView,
    SnapshotView,
    snapshot_from_values,
)
from supervisor.db.tables import (
    SNAPSHOT_STATES,
    build_baselines,
    builds,
    projects,
    reviews,
    snapshots,
)


def load_build(conn: Connection, build_id: int, *, with_snapshots: bool = True) -> BuildView | None:
    """Build `build_id` with its snapshots; None when there is no such build.

    Without its snapshots (`with_snapshots=False`) the view is for a reader that streams them
    (`report_snapshots`, `baseline_builds`): its own `snapshots` and `baseline_builds` are then
    empty."""
    row = conn.execute(
        select(builds, projects.c.name.label("project"), projects.c.unstable_fails)
        .join(projects, projects.c.id == builds.c.project_id)
        .where(builds.c.id == build_id)
    ).one_or_none()
    if row is None:
        return None
    m = row._mapping
    plan = m["plan"] if isinstance(m["plan"], dict) else {}
    return BuildView(
        id=m["id"],
        project=m["project"],
        branch=m["branch"],
        commit=m["commit"],
        status=m["status"],
        counts={status: m[status] for status in ("new", "unchanged", "changed", "failed")},
        created_at=m["created_at"],
        started_at=m["started_at"],
        finished_at=m["finished_at"],
        report_url=m["report_url"],
        error=m["error"],
        snapshots=_load_snapshots(conn, build_id) if with_snapshots else (),
        source=m["source"],
        skipped=tuple(plan.get("skipped", ())),
        removed=_removed(conn, build_id, plan) if m["finished_at"] is not None else (),
        unstable=_unstable(conn, build_id),
        unstable_fails=bool(m["unstable_fails"]),
        review=m["review"],
    )


def recent_builds(conn: Connection, limit: int) -> list[RowMapping]:
    """The `limit` newest builds of every project, newest first, as `status` and `serve` list
    them: id, project, branch, commit, status, review, source, a count per snapshot state,
    created_at, finished_at and error (why a failed build failed)."""
    return list(
        conn.execute(
            select(
                builds.c.id,
                projects.c.name.label("project"),
                builds.c.branch,
                builds.c.commit,
                builds.c.status,
                builds.c.review,
                builds.c.source,
                *(builds.c[state] for state in SNAPSHOT_STATES),
                builds.c.created_at,
                builds.c.finished_at,
                builds.c.error,
            )
            .join(projects, projects.c.id == builds.c.project_id)
            .order_by(builds.c.id.desc())
            .limit(limit)
        ).mappings()
    )


def _unstable(conn: Connection, build_id: int) -> tuple[str, ...]:
    """The names of the build's snapshots whose shots never settled."""
    return tuple(
        conn.execute(
            select(snapshots.c.name)
            .where(snapshots.c.build_id == build_id, snapshots.c.settled.is_(False))
            .order_by(snapshots.c.name)
        ).scalars()
    )


def _removed(conn: Connection, build_id: int, plan: dict[str, Any]) -> tuple[str, ...]:
    """The names a Storybook build's frozen baselines have and its snapshots lack, less the
    stories its plan left out on purpose (an opted-out story is not a removed one)."""
    skipped = {story["story_id"] for story in plan.get("skipped", ())}
    captured = select(snapshots.c.name).where(snapshots.c.build_id == build_id)
    names = conn.execute(
        select(build_baselines.c.name)
        .where(build_baselines.c.build_id == build_id, build_baselines.c.name.not_in(captured))
        .order_by(build_baselines.c.name)
    ).scalars()
    return tuple(name for name in names if name.split(" [", 1)[0] not in skipped)


#: Snapshot rows read at a time when they are streamed.
STREAM_ROWS = 500


def _load_snapshots(conn: Connection, build_id: int) -> tuple[SnapshotView, ...]:
    rows = conn.execute(_snapshots_query(build_id).order_by(snapshots.c.name))
    return tuple(snapshot_from_values(row) for row in rows)


def report_snapshots(conn: Connection, build_id: int) -> Iterator[SnapshotView]:
    """Build `build_id`'s snapshots in the order its report shows them (`REPORT_ORDER`, then by
    name), read `STREAM_ROWS` at a time, so that writing the report of a build of any size
    holds a few hundred of them, not all."""
    order = case(
        {status: index for index, status in enumerate(REPORT_ORDER)}, value=snapshots.c.status
    )
    query = _snapshots_query(build_id).order_by(order, snapshots.c.name)
    # On the statement, not the connection: a connection's options stay with it, and every later
    # statement (savepoints included) would open a server-side cursor.
    rows = conn.execute(query.execution_options(yield_per=STREAM_ROWS))
    for row in rows:
        yield snapshot_from_values(row)


def baseline_builds(conn: Connection, build_id: int) -> tuple[int, ...]:
    """The builds build `build_id`'s baselines came from, oldest first (`BuildView`'s, read
    without its snapshots)."""
    baseline = snapshots.alias("baseline")
    found = conn.execute(
        select(baseline.c.build_id)
        .distinct()
        .join(snapshots, snapshots.c.baseline_id == baseline.c.id)
        .where(snapshots.c.build_id == build_id)
        .order_by(baseline.c.build_id)
    ).scalars()
    return tuple(found)


def _snapshots_query(build_id: int) -> Select[Any]:
    """A build's snapshots, a column per field of `SnapshotView`, in the fields' order."""
    baseline = snapshots.alias("baseline")
    latest = (
        select(reviews.c.snapshot_id, func.max(reviews.c.id).label("id"))
        .where(reviews.c.build_id == build_id)
        .group_by(reviews.c.snapshot_id)
        .subquery("latest")
    )
    decision = reviews.alias("decision")
    joined = {
        "baseline_image": baseline.c.image_path,
        "baseline_build_id": baseline.c.build_id,
        "review": decision.c.decision,
    }
    columns = [
        joined[name].label(name) if name in joined else snapshots.c[name]
        for name in SNAPSHOT_FIELDS
    ]
    return (
        select(*columns)
        .outerjoin(baseline, baseline.c.id == snapshots.c.baseline_id)
        .outerjoin(latest, latest.c.snapshot_id == snapshots.c.id)
        .outerjoin(decision, decision.c.id == latest.c.id)
        .where(snapshots.c.build_id == build_id)
    )
