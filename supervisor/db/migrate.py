"""The schema: created and upgraded with Alembic (idempotent), and checked before a command uses it.

`upgrade` reports what it did, read under the same lock the migrations take, so hosts migrating
at once each tell the truth: one "created", the others "already current".

Alembic is imported only to upgrade or to read the migrations' head: every command checks the
schema's revision first, and importing Alembic for that cost each one 75 ms of its ~450 ms
start, so the revision is read from Alembic's version table with SQLAlchemy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from sqlalchemy import Connection, Engine, inspect, text

from supervisor.db.connection import (
    DatabaseUnusable,
    is_postgres,
    schema_transaction,
    transaction,
)

MIGRATIONS = Path(__file__).with_name("migrations")
#: The advisory lock `migrations/env.py` takes; taken here first so the revision read before the
#: upgrade is the one the upgrade starts from.
MIGRATION_LOCK_ID = 7_411_202
#: Where Alembic keeps the schema's revision: its default table, one row of one column.
VERSION_TABLE = "alembic_version"

if TYPE_CHECKING:
    from alembic.config import Config

#: What `upgrade` did to the schema.
Change = Literal["created", "upgraded", "already current"]


class NoSchema(DatabaseUnusable):
    """The database holds no Storyshelf schema: every statement would fail on a missing table."""

    def __init__(self) -> None:
        super().__init__("no Storyshelf schema here: run `storyshelf migrate`")


@dataclass(frozen=True)
class Migration:
    """The schema's Alembic revision before and after an upgrade."""

    before: str | None
    after: str

    @property
    def change(self) -> Change:
        if self.before is None:
            return "created"
        return "already current" if self.before == self.after else "upgraded"

    def describe(self) -> str:
        """`created at revision 0002`, `upgraded from 0001 to 0002`, `already current (0002)`."""
        if self.change == "created":
            return f"created at revision {self.after}"
        if self.change == "upgraded":
            return f"upgraded from {self.before} to {self.after}"
        return f"already current ({self.after})"


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration: our migrations, run on `connection` (see `migrations/env.py`)."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head_revision() -> str:
    """The newest revision this code knows."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the migrations folder has a head"
    return head


def current_revision(conn: Connection) -> str | None:
    """The schema's revision; None when the database has no Storyshelf schema at all."""
    if not inspect(conn).has_table(VERSION_TABLE):
        return None
    revisions = conn.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalars().all()
    if len(revisions) > 1:
        raise DatabaseUnusable(
            f"the schema has {len(revisions)} revisions at once: {sorted(revisions)}"
        )
    return revisions[0] if revisions else None


def upgrade(engine: Engine) -> Migration:
    """Bring the schema to the newest revision (a no-op when it is there) and say what changed.

    One transaction: on PostgreSQL under the migrations' advisory lock, on SQLite under its
    write lock (`BEGIN IMMEDIATE`); Alembic runs inside it rather than opening its own.
    """
    from alembic import command

    with schema_transaction(engine) as conn:
        if is_postgres(conn):
            conn.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_ID})")
        before = current_revision(conn)
        command.upgrade(alembic_config(conn), "head")
        after = current_revision(conn)
    assert after is not None, "an upgrade leaves a revision"
    return Migration(before, after)


def require_schema(engine: Engine, *, migrate: bool) -> Migration | None:
    """Check that the schema is there before a command uses it; with `migrate`, bring it to the
    newest revision instead (what the upgrade did, or None when nothing was needed).

    Without `migrate` a missing schema is `NoSchema`, which names the command that fixes it: a
    shared database is migrated on purpose, by whoever deploys, not by the first command that
    meets it. An older revision is left to `migrate` too.
    """
    with transaction(engine) as conn:
        revision = current_revision(conn)
    if migrate and revision != head_revision():
        return upgrade(engine)
    if revision is None:
        raise NoSchema()
    return None
