"""A shard's snapshot rows, written in bulk: the one statement of a capture job's results.

A byte-identical snapshot costs its child some tens of microseconds, so its row must cost the
host no more. SQLAlchemy's `execute(insert(...), rows)` processes every row's parameters in
Python, and on PostgreSQL psycopg then runs one INSERT per row (60-90 µs a row measured here,
foreign-key checks included); `COPY ... FROM STDIN` takes the whole shard as one stream (20-40
µs). On SQLite, one prepared INSERT run over the rows by the driver (`executemany`) is about
10 µs a row, half of what the same through SQLAlchemy's parameter processing takes.

Both run on the connection of the caller's transaction, so the rows commit with the job's
acknowledgement or not at all; a driver error is raised as SQLAlchemy's `DBAPIError`, so that a
lost connection is told apart from a refused row here as everywhere else.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from operator import itemgetter
from typing import Any

from psycopg.types.json import Jsonb
from sqlalchemy import Connection
from sqlalchemy.exc import DBAPIError

from ipc.capture import SETTING_FIELDS
from supervisor.db.tables import snapshots

#: The columns a snapshot's row gives, in the order its values are sent (`id` is the database's).
COLUMNS: tuple[str, ...] = tuple(column.name for column in snapshots.columns if column.name != "id")
#: The JSON columns, the values a driver cannot take as Python gives them.
JSON_NAMES = ("diff_box", "ignore_boxes")
JSON_COLUMNS = tuple(COLUMNS.index(name) for name in JSON_NAMES)
_values = itemgetter(*COLUMNS)
#: What a story snapshot's row keeps of its `StorySnapshot`.
STORY_COLUMNS = ("story_id", "mode", "title", "story")


def snapshot_row(
    build_id: int, shard_id: int, shot: Mapping[str, Any], item: Mapping[str, Any]
) -> dict[str, Any]:
    """The row of one snapshot: the upload's image, or the story's capture and settings."""
    story = "story_id" in shot
    source = item if story else shot
    return {
        "build_id": build_id,
        "shard_id": shard_id,
        "name": item["name"],
        "image_path": source["image"],
        "image_sha256": source["sha256"],
        **{key: shot[key] if story else None for key in STORY_COLUMNS},
        "settled": item["settled"] if story else None,
        "ignore_boxes": item["ignore_boxes"] if story else None,
        "width": item["width"],
        "height": item["height"],
        "baseline_id": item["baseline_id"],
        "status": item["status"],
        **{key: item[key] for key in SETTING_FIELDS},
        "diff_box": item["diff_box"],
        "diff_pixels": item["diff_pixels"],
        "diff_ratio": None if item["diff_ratio"] is None else float(item["diff_ratio"]),
        "diff_path": item["diff_path"],
        "error": item["error"],
    }


def insert_snapshots(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    """Insert `rows` (each a value for every one of `COLUMNS`) into `snapshots`."""
    if not rows:
        return
    if conn.dialect.name == "postgresql":
        _copy(conn, rows)
    else:
        _executemany(conn, rows)


def _copy(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    statement = f"COPY snapshots ({', '.join(COLUMNS)}) FROM STDIN"
    raw = conn.connection.driver_connection
    assert raw is not None, "a connection in a transaction has its driver's connection"
    with (
        _as_sqlalchemy_error(conn, statement),
        raw.cursor() as cursor,
        cursor.copy(statement) as copy,
    ):
        for row in rows:
            values = list(_values(row))
            for column in JSON_COLUMNS:
                if values[column] is not None:
                    values[column] = Jsonb(values[column])
            copy.write_row(values)


def _executemany(conn: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
    marks = ", ".join("?" for _ in COLUMNS)
    statement = f"INSERT INTO snapshots ({', '.join(COLUMNS)}) VALUES ({marks})"
    values = [_values(row) for row in rows]
    for index, row in enumerate(rows):
        # The JSON columns as their text, as SQLAlchemy's JSON type stores them; an image's row
        # has none.
        if any(row[name] is not None for name in JSON_NAMES):
            value = list(values[index])
            for column, name in zip(JSON_COLUMNS, JSON_NAMES, strict=True):
                if row[name] is not None:
                    value[column] = json.dumps(row[name])
            values[index] = tuple(value)
    conn.exec_driver_sql(statement, values)


@contextmanager
def _as_sqlalchemy_error(conn: Connection, statement: str) -> Iterator[None]:
    """A driver error raised inside as the `DBAPIError` SQLAlchemy would have raised."""
    driver_error = conn.dialect.loaded_dbapi.Error
    try:
        yield
    except driver_error as error:
        lost = conn.dialect.is_disconnect(error, conn.connection.dbapi_connection, None)
        raise DBAPIError.instance(
            statement,
            None,
            error,
            driver_error,
            connection_invalidated=lost,
            dialect=conn.dialect,
        ) from error
