"""the finer flat-area pass becomes a project setting, and each result keeps the settings it
was compared with and the box of its changed pixels

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02 09:00:00

Until now every diff ran the finer pass on flat areas at 0.05 and no project could turn it off,
so counts never equalled pixelmatch's for a team that moved its thresholds over. Projects that
exist keep the pass at the 0.05 they were compared with; NULL means off. A snapshot's
`threshold` and `count_aa` now hold what its comparison used (a story's own settings folded in
by the child), beside `metric` and the new `flat_threshold`, so a result can be read without
knowing the project's settings of that day. `diff_box` is the box around the pixels that
counted, `[left, top, width, height]`, which the report shows large first.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Document = sa.JSON().with_variant(JSONB(), "postgresql")
#: What every project was compared with before the setting existed.
FLAT_THRESHOLD_BEFORE = 0.05


def upgrade() -> None:
    op.add_column("projects", sa.Column("flat_threshold", sa.Float()))
    op.execute(f"UPDATE projects SET flat_threshold = {FLAT_THRESHOLD_BEFORE}")
    op.add_column("snapshots", sa.Column("flat_threshold", sa.Float()))
    op.add_column("snapshots", sa.Column("diff_box", Document))


def downgrade() -> None:
    op.drop_column("snapshots", "diff_box")
    op.drop_column("snapshots", "flat_threshold")
    op.drop_column("projects", "flat_threshold")
