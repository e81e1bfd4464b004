"""the baselines table: each name's accepted snapshot, fixed for a build when it is created

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-08 10:00:00

Until now a capture job looked its baselines up when it started, among every accepted build of
the project, so a build queued while its baseline build ran compared some shards with it and
some not, and the lookup grew with the number of builds. The table is filled from the accepted
builds already here with the answer that lookup gave (for each name, its snapshot in the latest
accepted build of the project's baseline branch where it did not fail), so an upgraded database
keeps its baselines. Capture jobs not yet finished get their baselines written into their data,
as new builds' jobs carry them; a downgrade takes them out again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

# The tables as this revision knows them, so that later changes to `supervisor.db.tables`
# cannot change what this migration does.
projects = sa.table("projects", sa.column("id"), sa.column("baseline_branch"))
builds = sa.table(
    "builds",
    sa.column("id"),
    sa.column("project_id"),
    sa.column("branch"),
    sa.column("accepted_at"),
)
snapshots = sa.table(
    "snapshots",
    sa.column("id"),
    sa.column("build_id"),
    sa.column("name"),
    sa.column("status"),
    sa.column("image_path"),
    sa.column("image_sha256"),
)
baselines = sa.table(
    "baselines",
    sa.column("project_id"),
    sa.column("name"),
    sa.column("snapshot_id"),
    sa.column("build_id"),
)
jobs = sa.table(
    "jobs",
    sa.column("id"),
    sa.column("kind"),
    sa.column("status"),
    sa.column("build_id"),
    sa.column("data", sa.JSON().with_variant(JSONB(), "postgresql")),
)


def upgrade() -> None:
    op.create_table(
        "baselines",
        sa.Column("project_id", Key, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("snapshot_id", Key, nullable=False),
        sa.Column("build_id", Key, nullable=False),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_baselines_build_id_builds")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_baselines_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_id"], ["snapshots.id"], name=op.f("fk_baselines_snapshot_id_snapshots")
        ),
        sa.PrimaryKeyConstraint("project_id", "name", name=op.f("pk_baselines")),
    )
    _fill_from_accepted_builds()
    _rewrite_unfinished_capture_jobs(_with_baselines)


def downgrade() -> None:
    _rewrite_unfinished_capture_jobs(_without_baselines)
    op.drop_table("baselines")


def _fill_from_accepted_builds() -> None:
    newest_first = (
        sa.func.row_number()
        .over(
            partition_by=(builds.c.project_id, snapshots.c.name),
            order_by=(builds.c.accepted_at.desc(), builds.c.id.desc()),
        )
        .label("rank")
    )
    ranked = (
        sa.select(
            builds.c.project_id,
            snapshots.c.name,
            snapshots.c.id,
            snapshots.c.build_id,
            newest_first,
        )
        .join(builds, builds.c.id == snapshots.c.build_id)
        .join(projects, projects.c.id == builds.c.project_id)
        .where(
            builds.c.accepted_at.is_not(None),
            builds.c.branch == projects.c.baseline_branch,
            snapshots.c.status != "failed",
        )
        .subquery()
    )
    latest = sa.select(ranked.c.project_id, ranked.c.name, ranked.c.id, ranked.c.build_id).where(
        ranked.c.rank == 1
    )
    op.execute(
        baselines.insert().from_select(["project_id", "name", "snapshot_id", "build_id"], latest)
    )


#: What the upgrade or the downgrade does to one unfinished capture job's snapshot list.
Rewrite = Callable[[sa.Connection, int, list[dict[str, Any]]], list[dict[str, Any]]]


def _rewrite_unfinished_capture_jobs(rewrite: Rewrite) -> None:
    conn = op.get_bind()
    unfinished = conn.execute(
        sa.select(jobs.c.id, builds.c.project_id, jobs.c.data)
        .join(builds, builds.c.id == jobs.c.build_id)
        .where(jobs.c.kind == "capture", jobs.c.status.in_(("queued", "running")))
    ).all()
    for job_id, project_id, data in unfinished:
        shots = data.get("snapshots") if isinstance(data, dict) else None
        if not isinstance(shots, list) or not all(isinstance(shot, dict) for shot in shots):
            continue  # malformed already: the host fails it as it would have
        conn.execute(
            jobs.update()
            .where(jobs.c.id == job_id)
            .values(data={**data, "snapshots": rewrite(conn, project_id, shots)})
        )


def _with_baselines(
    conn: sa.Connection, project_id: int, shots: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    rows = conn.execute(
        sa.select(
            baselines.c.name, snapshots.c.id, snapshots.c.image_path, snapshots.c.image_sha256
        )
        .join(snapshots, snapshots.c.id == baselines.c.snapshot_id)
        .where(
            baselines.c.project_id == project_id,
            baselines.c.name.in_([shot.get("name") for shot in shots]),
        )
    )
    found = {
        row.name: {"id": row.id, "image": row.image_path, "sha256": row.image_sha256}
        for row in rows
    }
    return [{**shot, "baseline": found.get(shot.get("name"))} for shot in shots]


def _without_baselines(
    _conn: sa.Connection, _project_id: int, shots: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    return [{key: value for key, value in shot.items() if key != "baseline"} for shot in shots]
