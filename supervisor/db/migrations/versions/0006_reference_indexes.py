"""indexes on the columns that point at a snapshot, for deleting builds

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 16:00:00

`prune` deletes old builds' snapshots, and each deleted row makes the database look for rows
that still point at it (`snapshots.baseline_id`, `build_baselines.snapshot_id`,
`baselines.snapshot_id`) before it lets it go. Without an index each look is a scan of the whole
table: pruning 1,000 builds of 20 snapshots took 36 s on PostgreSQL and 25 s on SQLite, growing
with the square of the table, against 1.5 s and 0.5 s with these.
"""

from __future__ import annotations

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

#: (index, table, column): each column that references `snapshots.id`.
INDEXES = (
    ("ix_snapshots_baseline_id", "snapshots", "baseline_id"),
    ("ix_build_baselines_snapshot_id", "build_baselines", "snapshot_id"),
    ("ix_baselines_snapshot_id", "baselines", "snapshot_id"),
)


def upgrade() -> None:
    for name, table, column in INDEXES:
        op.create_index(name, table, [column])


def downgrade() -> None:
    for name, table, _column in INDEXES:
        op.drop_index(name, table_name=table)
