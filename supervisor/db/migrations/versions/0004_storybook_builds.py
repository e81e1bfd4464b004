"""Storybook builds: where a build came from, its plan, each snapshot's story, and the baselines
a build fixed when it was created

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-15 10:00:00

A build made from a Storybook learns its snapshots' names only when its `plan` job has run, so the
baselines it compares with cannot ride in its jobs' data from the start, as an upload's do: the
project's baselines of that moment are copied into `build_baselines` in the transaction that
creates the build, and the plan's capture jobs read theirs from there. A story that fails has
no image, so a snapshot's image path and digest become nullable (on SQLite by rebuilding the
table, its foreign keys checked at the commit instead of at each step). Every added column is
nullable or has a default, so existing rows (all uploads) need no rewriting.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
Document = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column(
        "builds", sa.Column("source", sa.String(12), nullable=False, server_default="images")
    )
    op.add_column("builds", sa.Column("storybook", Document))
    op.add_column("builds", sa.Column("plan", Document))
    for column in (
        sa.Column("story_id", sa.Text()),
        sa.Column("mode", sa.Text()),
        sa.Column("title", sa.Text()),
        sa.Column("story", sa.Text()),
        sa.Column("settled", sa.Boolean()),
        sa.Column("threshold", sa.Float()),
        sa.Column("count_aa", sa.Boolean()),
    ):
        op.add_column("snapshots", column)
    _image_nullable(True)
    op.create_table(
        "build_baselines",
        sa.Column("build_id", Key, nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("snapshot_id", Key, nullable=False),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_build_baselines_build_id_builds")
        ),
        sa.ForeignKeyConstraint(
            ["snapshot_id"],
            ["snapshots.id"],
            name=op.f("fk_build_baselines_snapshot_id_snapshots"),
        ),
        sa.PrimaryKeyConstraint("build_id", "name", name=op.f("pk_build_baselines")),
    )


def downgrade() -> None:
    op.drop_table("build_baselines")
    op.execute("DELETE FROM snapshots WHERE image_path IS NULL")
    _image_nullable(False)
    for name in ("count_aa", "threshold", "settled", "story", "title", "mode", "story_id"):
        op.drop_column("snapshots", name)
    for name in ("plan", "storybook", "source"):
        op.drop_column("builds", name)


def _image_nullable(nullable: bool) -> None:
    if op.get_bind().dialect.name == "sqlite":
        # Rebuilding `snapshots` drops the table others point at: check those links at the end.
        op.execute("PRAGMA defer_foreign_keys = ON")
    with op.batch_alter_table("snapshots") as batch:
        batch.alter_column("image_path", existing_type=sa.Text(), nullable=nullable)
        batch.alter_column("image_sha256", existing_type=sa.String(64), nullable=nullable)
