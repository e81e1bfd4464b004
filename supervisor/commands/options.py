"""Options every command shares, and the `STORYSHELF_*` environment fallback of each.

A container is configured without arguments: `--database-url` also reads
`STORYSHELF_DATABASE_URL`, `--artifacts` `STORYSHELF_ARTIFACTS`, and so on.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from supervisor.host.settings import default_artifacts, default_database_url


def env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"STORYSHELF_{name}", default)


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        default=default_database_url(),
        help="SQLAlchemy URL, e.g. postgresql+psycopg://host/db (STORYSHELF_DATABASE_URL; "
        "default: a SQLite file under ./.storyshelf/)",
    )
    parser.add_argument(
        "--artifacts",
        type=Path,
        default=default_artifacts(),
        help="folder of images, diffs and reports (STORYSHELF_ARTIFACTS; default ./.storyshelf/artifacts)",
    )
    parser.add_argument(
        "--log-level",
        default=env("LOG_LEVEL", "info"),
        help="debug, info, warning or error (STORYSHELF_LOG_LEVEL)",
    )
