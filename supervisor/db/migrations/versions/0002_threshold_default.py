"""a new project's diff threshold defaults to 0.1, the default of the diff itself

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01 15:20:00

The first schema gave new projects 0.05 while the diff, README and the benchmarks meant 0.1
(with the finer 0.05 pass on flat areas). Projects that exist keep the threshold they have.
SQLite cannot change a column default without rebuilding the table (which its foreign keys
refuse while builds exist); there the default stays in the schema text only, and new projects
get theirs from `supervisor.builds.projects.ensure_project`, which writes every setting.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def _set_default(value: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column("projects", "threshold", existing_type=sa.Float(), server_default=value)


def upgrade() -> None:
    _set_default("0.1")


def downgrade() -> None:
    _set_default("0.05")
