"""The promises of `supervisor.builds.snapshot_rows`, on PostgreSQL and SQLite."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine, insert, select
from sqlalchemy.exc import IntegrityError

from supervisor.builds.snapshot_rows import COLUMNS, insert_snapshots
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, capture_shards, projects, snapshots


def shard(engine: Engine) -> tuple[int, int]:
    """A build and its shard, for rows to belong to."""
    with transaction(engine) as conn:
        project = conn.execute(insert(projects).values(name="web").returning(projects.c.id))
        build_id = conn.execute(
            insert(builds)
            .values(project_id=project.scalar_one(), branch="b")
            .returning(builds.c.id)
        ).scalar_one()
        shard_id = conn.execute(
            insert(capture_shards).values(build_id=build_id, index=0).returning(capture_shards.c.id)
        ).scalar_one()
    return build_id, shard_id


def row(build_id: int, shard_id: int, name: str, **values: Any) -> dict[str, Any]:
    return (
        dict.fromkeys(COLUMNS)
        | {
            "build_id": build_id,
            "shard_id": shard_id,
            "name": name,
            "status": "unchanged",
        }
        | values
    )


def test_rows_read_back_as_written_the_json_box_and_settings_included(engine: Engine) -> None:
    build_id, shard_id = shard(engine)
    written = [
        row(build_id, shard_id, "a/1", width=1280, height=800, diff_pixels=0, diff_ratio=0.0),
        row(
            build_id,
            shard_id,
            "b 'quoted'\\tab",
            status="changed",
            diff_box=[3, 4, 5, 6],
            metric="oklab",
            threshold=0.05,
            flat_threshold=None,
            count_aa=True,
            diff_pixels=2**40,
            error="a\nline",
        ),
    ]
    with transaction(engine) as conn:
        insert_snapshots(conn, written)
        insert_snapshots(conn, [])
    with engine.connect() as conn:
        read = conn.execute(select(snapshots).order_by(snapshots.c.name)).mappings().all()
    assert [{key: found[key] for key in COLUMNS} for found in read] == written


def test_a_refused_row_is_sqlalchemys_error_and_writes_nothing(engine: Engine) -> None:
    build_id, shard_id = shard(engine)
    duplicate = [row(build_id, shard_id, "a"), row(build_id, shard_id, "a")]
    with pytest.raises(IntegrityError), transaction(engine) as conn:
        insert_snapshots(conn, duplicate)
    with pytest.raises(IntegrityError), transaction(engine) as conn:
        insert_snapshots(conn, [row(build_id, shard_id, "b", baseline_id=999_999)])
    with engine.connect() as conn:
        assert conn.execute(select(snapshots)).all() == []
