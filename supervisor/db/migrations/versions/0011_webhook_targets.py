"""whether a project's webhooks may reach loopback and private addresses

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 10:00:00

A webhook is POSTed from inside the host's network, so where it may go is a project setting:
`projects.webhook_allow_private` (`project P --webhook-allow-private`) lets its webhooks reach
loopback and private networks; link-local and cloud-metadata addresses are refused whatever it
says (`ipc.webhook_target`). False for every project at the upgrade: a project whose webhook
reaches a private receiver turns it on, and until then that webhook's deliveries fail saying so.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "projects",
        sa.Column(
            "webhook_allow_private", sa.Boolean(), nullable=False, server_default=sa.text("false")
        ),
    )


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("webhook_allow_private")
