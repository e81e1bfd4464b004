"""reports are published by a job of their own, and a build records where its report opens

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-04 05:00:00

Until now the host wrote one HTML page per build, `reports/build-N.html`, linking into the
artifacts beside it, and recorded that key in `report_path`. A build's end now queues a
`publish` job, which writes a self-contained folder `reports/<project>/<build>/` and records
where its page opens in `report_url` (a path, or `s3://...`). Every build that had a report is
given a `publish` job here, so that the hosts that run next publish its folder too: no build
loses its report by the upgrade. The old pages stay where they are until `prune` removes their
builds.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("builds", sa.Column("report_url", sa.Text()))
    data = (
        "jsonb_build_object('build_id', id)"
        if op.get_bind().dialect.name == "postgresql"
        else "json_object('build_id', id)"
    )
    op.execute(
        f"INSERT INTO jobs (kind, data, build_id) SELECT 'publish', {data}, id FROM builds"
        " WHERE report_path IS NOT NULL ORDER BY id"
    )
    with op.batch_alter_table("builds") as batch:
        batch.drop_column("report_path")


def downgrade() -> None:
    with op.batch_alter_table("builds") as batch:
        batch.add_column(sa.Column("report_path", sa.Text()))
    op.drop_column("builds", "report_url")
