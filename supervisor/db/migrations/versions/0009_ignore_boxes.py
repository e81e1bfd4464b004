"""a story capture's ignore regions, kept with its snapshot; whether unstable changes count

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-05 09:00:00

A story may mark parts of itself that change on every render (`chromatic.ignoreSelectors`, the
`chromatic-ignore` class, Lost Pixel's `mask`). Their boxes in the captured image are kept here,
so that a later build that takes this snapshot as its baseline leaves those pixels out too.
Snapshots captured before the upgrade have none.

`projects.unstable_fails` says whether a change in a snapshot whose shots never settled makes
its build `changed` (true, the default, so that nothing is hidden) or is shown without failing
the gate.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

#: JSON as `supervisor.db.tables` has it at this revision.
Document = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    op.add_column("snapshots", sa.Column("ignore_boxes", Document))
    op.add_column(
        "projects",
        sa.Column("unstable_fails", sa.Boolean(), nullable=False, server_default=sa.text("true")),
    )


def downgrade() -> None:
    with op.batch_alter_table("projects") as batch:
        batch.drop_column("unstable_fails")
    with op.batch_alter_table("snapshots") as batch:
        batch.drop_column("ignore_boxes")
