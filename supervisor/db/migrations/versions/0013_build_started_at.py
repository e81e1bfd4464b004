"""builds record when work on them began, so that a build's length leaves out its queue wait

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 12:00:00

`builds.started_at` is set with the database's clock where a build leaves `pending` for
`capturing` (its plan, or its first capture job), so that `build ID` and the report say how long
the build waited in the queue and how long it took apart. Builds already there keep it NULL:
when they started was not recorded, and their readers count their length from `created_at` as
before (`ipc.build_view.BuildView.began_at`).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import supervisor.db.tables

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

Moment = supervisor.db.tables.UtcDateTime(timezone=True)


def upgrade() -> None:
    op.add_column("builds", sa.Column("started_at", Moment, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.drop_column("started_at")
