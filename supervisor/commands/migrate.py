"""`python -m supervisor migrate`: create or upgrade the schema (`supervisor.db.migrate`)."""

from __future__ import annotations

import argparse

from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade


def execute(args: argparse.Namespace) -> int:
    """Create or upgrade the schema, and say what it did on which database."""
    engine = connect(args.database_url)
    try:
        migration = upgrade(engine)
    finally:
        engine.dispose()
    print(f"schema {migration.describe()} on {engine.url.render_as_string(hide_password=True)}")
    return 0
