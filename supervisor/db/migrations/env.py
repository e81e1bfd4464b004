"""Alembic environment: runs the migrations on the engine `supervisor.db.migrate` hands over."""

from __future__ import annotations

from alembic import context
from sqlalchemy import text

from supervisor.db.tables import metadata

#: Any fixed number: hosts migrating at once on PostgreSQL take turns on this advisory lock.
MIGRATION_LOCK_ID = 7_411_202

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": MIGRATION_LOCK_ID})
    context.run_migrations()
