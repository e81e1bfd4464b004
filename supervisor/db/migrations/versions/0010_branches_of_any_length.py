"""branches of any length: `builds.branch` and `projects.baseline_branch` become text

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06 02:00:00

Git takes branch names of any length, and CI hands over whatever its branch is called: a
build of a branch longer than 200 characters was refused by PostgreSQL with a traceback (SQLite
never checked the length). No index holds either column, so text costs nothing.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

#: Each table and its branch column.
COLUMNS = (("builds", "branch"), ("projects", "baseline_branch"))


def upgrade() -> None:
    for table, column in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, type_=sa.Text(), existing_type=sa.String(200))


def downgrade() -> None:
    for table, column in COLUMNS:
        with op.batch_alter_table(table) as batch:
            batch.alter_column(column, type_=sa.String(200), existing_type=sa.Text())
