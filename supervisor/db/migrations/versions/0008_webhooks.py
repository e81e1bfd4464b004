"""a project's webhooks, told when each of its builds ends

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-04 14:00:00

`project P --webhook URL [--webhook-secret S]` keeps each URL here, one row per project and
URL. When a build's report has been published (or its publish job gave up), one `notify` job
per row POSTs the build's summary there (`supervisor.builds.notify`). Builds that ended before
the upgrade are never announced: no publish job queued before it asks for notifications.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

#: Integer keys as `supervisor.db.tables` has them at this revision.
Key = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", Key, nullable=False),
        sa.Column("project_id", Key, nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text()),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            nullable=False,
            server_default=sa.text("CURRENT_TIMESTAMP"),
        ),
        sa.ForeignKeyConstraint(
            ["project_id"], ["projects.id"], name=op.f("fk_webhooks_project_id_projects")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_webhooks")),
        sa.UniqueConstraint("project_id", "url", name=op.f("uq_webhooks_project_id_url")),
    )


def downgrade() -> None:
    op.drop_table("webhooks")
