"""reviews: every decision on a snapshot, branch baselines, a build's review state

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 06:00:00

A person accepts or rejects a build's changed and new snapshots (`review`); each decision is a
row of `reviews`, and the latest per snapshot is its state. An accepted snapshot of a build on
another branch than the baseline branch becomes that branch's baseline of its name
(`branch_baselines`), compared with before the baseline branch's. `builds.review` keeps a
changed build's review state: `accepted` for changed builds already accepted on the baseline
branch at the upgrade, `pending` for other changed builds. `projects.auto_accept` says whether
the baseline branch's builds are accepted when they end (true, as before the upgrade).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import supervisor.db.tables

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Moment = supervisor.db.tables.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.add_column(
        "projects",
        sa.Column("auto_accept", sa.Boolean(), nullable=False, server_default=sa.text("true")),
    )
    with op.batch_alter_table("builds") as batch:
        batch.add_column(sa.Column("review", sa.String(12), nullable=True))
        batch.create_check_constraint(
            op.f("ck_builds_review_known"), "review IN ('pending', 'accepted', 'rejected')"
        )
    op.execute(
        "UPDATE builds SET review = CASE WHEN accepted_at IS NULL THEN 'pending' "
        "ELSE 'accepted' END WHERE status = 'changed'"
    )
    op.create_table(
        "branch_baselines",
        sa.Column("project_id", Key, nullable=False),
        sa.Column("branch", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("snapshot_id", Key, nullable=False),
        sa.Column("build_id", Key, nullable=False),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_branch_baselines_build_id_builds")
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_branch_baselines_project_id_projects")
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_branch_baselines_snapshot_id_snapshots"),
        ),
        sa.PrimaryKeyConstraint("project_id", "branch", "name", name=op.f("pk_branch_baselines")),
    )
    op.create_index("ix_branch_baselines_snapshot_id", "branch_baselines", ["snapshot_id"])
    op.create_table(
        "reviews",
        sa.Column("id", Key, nullable=False),
        sa.Column("build_id", Key, nullable=False),
        sa.Column("snapshot_id", Key, nullable=False),
        sa.Column("decision", sa.String(12), nullable=False),
        sa.Column("by", sa.Text(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column(
            "created_at", Moment, server_default=sa.text("(CURRENT_TIMESTAMP)"), nullable=False
        ),
        sa.CheckConstraint(
            "decision IN ('accepted', 'rejected')", name=op.f("ck_reviews_decision_known")
        ),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_reviews_build_id_builds")
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_id"], ["snapshots.id"], name=op.f("fk_reviews_snapshot_id_snapshots")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reviews")),
    )
    op.create_index("ix_reviews_build_id", "reviews", ["build_id"])
    op.create_index("ix_reviews_snapshot_id", "reviews", ["snapshot_id"])


def downgrade() -> None:
    op.drop_table("reviews")
    op.drop_table("branch_baselines")
    with op.batch_alter_table("builds") as batch:
        batch.drop_constraint(op.f("ck_builds_review_known"), type_="check")
        batch.drop_column("review")
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("auto_accept")
