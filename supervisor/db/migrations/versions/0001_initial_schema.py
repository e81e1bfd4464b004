"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-30 09:09:07.909668
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import supervisor.db.tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "projects",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("baseline_branch", sa.String(length=200), server_default="main", nullable=False),
        sa.Column("metric", sa.String(length=10), server_default="oklab", nullable=False),
        sa.Column("threshold", sa.Float(), server_default="0.05", nullable=False),
        sa.Column("count_aa", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("budget_pixels", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "created_at",
            supervisor.db.tables.UtcDateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_projects")),
        sa.UniqueConstraint("name", name=op.f("uq_projects_name")),
    )
    op.create_table(
        "builds",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "project_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False
        ),
        sa.Column("branch", sa.String(length=200), nullable=False),
        sa.Column("commit", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=12), server_default="pending", nullable=False),
        sa.Column("new", sa.Integer(), server_default="0", nullable=False),
        sa.Column("unchanged", sa.Integer(), server_default="0", nullable=False),
        sa.Column("changed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("failed", sa.Integer(), server_default="0", nullable=False),
        sa.Column("accepted_at", supervisor.db.tables.UtcDateTime(timezone=True), nullable=True),
        sa.Column("report_path", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            supervisor.db.tables.UtcDateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("finished_at", supervisor.db.tables.UtcDateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('pending', 'capturing', 'passed', 'changed', 'failed', 'cancelled')",
            name=op.f("ck_builds_status_known"),
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_builds_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_builds")),
    )
    with op.batch_alter_table("builds", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_builds_project_id"), ["project_id"], unique=False)

    op.create_table(
        "capture_attempts",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("build_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("status", sa.String(length=12), server_default="running", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "summary",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "started_at",
            supervisor.db.tables.UtcDateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("finished_at", supervisor.db.tables.UtcDateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_capture_attempts_build_id_builds")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capture_attempts")),
    )
    with op.batch_alter_table("capture_attempts", schema=None) as batch_op:
        batch_op.create_index(
            batch_op.f("ix_capture_attempts_build_id"), ["build_id"], unique=False
        )

    op.create_table(
        "capture_shards",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("build_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("index", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=12), server_default="queued", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_capture_shards_status_known"),
        ),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_capture_shards_build_id_builds")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_capture_shards")),
        sa.UniqueConstraint("build_id", "index", name=op.f("uq_capture_shards_build_id_index")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("kind", sa.String(length=50), nullable=False),
        sa.Column("status", sa.String(length=12), server_default="queued", nullable=False),
        sa.Column("build_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("shard_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column(
            "data",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default="5", nullable=False),
        sa.Column("crashes", sa.Integer(), server_default="0", nullable=False),
        sa.Column(
            "crash_causes",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=True,
        ),
        sa.Column(
            "run_at",
            supervisor.db.tables.UtcDateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("locked_by", sa.String(length=200), nullable=True),
        sa.Column("child_pid", sa.Integer(), nullable=True),
        sa.Column(
            "lease_expires_at", supervisor.db.tables.UtcDateTime(timezone=True), nullable=True
        ),
        sa.Column(
            "cancel_requested", sa.Boolean(), server_default=sa.text("(false)"), nullable=False
        ),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            supervisor.db.tables.UtcDateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("finished_at", supervisor.db.tables.UtcDateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'completed', 'failed', 'cancelled')",
            name=op.f("ck_jobs_status_known"),
        ),
        sa.ForeignKeyConstraint(["build_id"], ["builds.id"], name=op.f("fk_jobs_build_id_builds")),
        sa.ForeignKeyConstraint(
            ["shard_id"], ["capture_shards.id"], name=op.f("fk_jobs_shard_id_capture_shards")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.create_index("ix_jobs_build_id", ["build_id"], unique=False)
        batch_op.create_index(
            "ix_jobs_queued_run_at",
            ["run_at", "id"],
            unique=False,
            postgresql_where=sa.text("status = 'queued'"),
            sqlite_where=sa.text("status = 'queued'"),
        )
        batch_op.create_index(
            "ix_jobs_running_lease",
            ["lease_expires_at"],
            unique=False,
            postgresql_where=sa.text("status = 'running'"),
            sqlite_where=sa.text("status = 'running'"),
        )

    op.create_table(
        "snapshots",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("build_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("shard_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("image_path", sa.Text(), nullable=False),
        sa.Column("image_sha256", sa.String(length=64), nullable=False),
        sa.Column("width", sa.Integer(), nullable=True),
        sa.Column("height", sa.Integer(), nullable=True),
        sa.Column(
            "baseline_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("status", sa.String(length=12), nullable=False),
        sa.Column("metric", sa.String(length=10), nullable=True),
        sa.Column("diff_pixels", sa.BigInteger(), nullable=True),
        sa.Column("diff_ratio", sa.Float(), nullable=True),
        sa.Column("diff_path", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('new', 'unchanged', 'changed', 'failed')",
            name=op.f("ck_snapshots_status_known"),
        ),
        sa.ForeignKeyConstraint(
            ["baseline_id"], ["snapshots.id"], name=op.f("fk_snapshots_baseline_id_snapshots")
        ),
        sa.ForeignKeyConstraint(
            ["build_id"], ["builds.id"], name=op.f("fk_snapshots_build_id_builds")
        ),
        sa.ForeignKeyConstraint(
            ["shard_id"], ["capture_shards.id"], name=op.f("fk_snapshots_shard_id_capture_shards")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_snapshots")),
        sa.UniqueConstraint("build_id", "name", name=op.f("uq_snapshots_build_id_name")),
    )
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_snapshots_shard_id"), ["shard_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("snapshots", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_snapshots_shard_id"))

    op.drop_table("snapshots")
    with op.batch_alter_table("jobs", schema=None) as batch_op:
        batch_op.drop_index(
            "ix_jobs_running_lease",
            postgresql_where=sa.text("status = 'running'"),
            sqlite_where=sa.text("status = 'running'"),
        )
        batch_op.drop_index(
            "ix_jobs_queued_run_at",
            postgresql_where=sa.text("status = 'queued'"),
            sqlite_where=sa.text("status = 'queued'"),
        )
        batch_op.drop_index("ix_jobs_build_id")

    op.drop_table("jobs")
    op.drop_table("capture_shards")
    with op.batch_alter_table("capture_attempts", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_capture_attempts_build_id"))

    op.drop_table("capture_attempts")
    with op.batch_alter_table("builds", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_builds_project_id"))

    op.drop_table("builds")
    op.drop_table("projects")
