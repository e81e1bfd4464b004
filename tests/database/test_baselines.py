"""The promises of `supervisor.builds.baselines` and of migration 0003, on PostgreSQL and SQLite.

A build's baselines are fixed when it is created (DESIGN section 4): whatever order its shards
and those of a baseline build still running take, it compares with the builds that had ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, event, func, insert, inspect, select, text

from child.capture import shard as capture
from supervisor.builds.cancel import cancel_build
from supervisor.db import queue
from supervisor.db.connection import schema_transaction, transaction
from supervisor.db.migrate import alembic_config
from supervisor.db.tables import baselines, builds, capture_shards, jobs, projects, snapshots
from tests.capture_helpers import (
    claim,
    prepare,
    run_build,
    run_jobs,
    screens,
    settle,
    upload,
)

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)


def settle_now(engine: Engine, job: queue.Job, artifacts: Path) -> None:
    payload = prepare(engine, job, artifacts)
    assert settle(engine, job, capture.run(payload, lambda _: None))


def compared_with(engine: Engine, build_id: int) -> dict[str, tuple[str, int | None]]:
    """Each snapshot of the build: its status and the build its baseline came from."""
    baseline = snapshots.alias("baseline")
    with engine.connect() as conn:
        rows = conn.execute(
            select(snapshots.c.name, snapshots.c.status, baseline.c.build_id)
            .outerjoin(baseline, baseline.c.id == snapshots.c.baseline_id)
            .where(snapshots.c.build_id == build_id)
        )
        return {name: (status, source) for name, status, source in rows}


def baseline_rows(engine: Engine) -> dict[str, int]:
    """The baselines table as {name: build it came from}."""
    with engine.connect() as conn:
        rows = conn.execute(select(baselines.c.name, baselines.c.build_id))
        return {row.name: row.build_id for row in rows}


# fixed when the build is created

ORDERS = {
    # the main build ends before any shard of the branch runs
    "main-first": ("main", "branch", "branch"),
    # one shard of the branch runs before the main build ends, one after
    "interleaved": ("branch", "main", "branch"),
    # the branch runs to its end while the main build is still open
    "branch-first": ("branch", "branch", "main"),
}


@pytest.mark.parametrize("order", ORDERS)
def test_a_build_queued_while_its_baseline_build_runs_compares_with_the_builds_that_had_ended(
    engine: Engine, artifacts: Path, tmp_path: Path, order: str
) -> None:
    ended = run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON))
    running = upload(engine, artifacts, screens(tmp_path / "v2", a=MOVED, b=MOVED), shards=2)
    done, still_open = claim(engine)
    settle_now(engine, done, artifacts)  # one shard of the main build done, the other not
    shots = screens(tmp_path / "branch", a=MOVED, b=MOVED)
    branch = upload(engine, artifacts, shots, branch="feature", shards=2)
    for step in ORDERS[order]:
        if step == "main":
            settle_now(engine, still_open, artifacts)
        else:
            (job,) = claim(engine, limit=1)
            settle_now(engine, job, artifacts)
    assert compared_with(engine, branch.build_id) == {
        "a": ("changed", ended.build_id),
        "b": ("changed", ended.build_id),
    }
    later = upload(engine, artifacts, shots, branch="feature")
    run_jobs(engine, artifacts)
    assert compared_with(engine, later.build_id) == {
        "a": ("unchanged", running.build_id),
        "b": ("unchanged", running.build_id),
    }


def test_an_accepted_build_replaces_the_baselines_of_its_names_and_only_those(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    first = run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON, c=BUTTON))
    assert baseline_rows(engine) == dict.fromkeys("abc", first.build_id)
    broken = screens(tmp_path / "v2", a=MOVED)
    (broken / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")  # passes the upload
    second = run_build(engine, artifacts, broken)
    # A failed snapshot has nothing to compare with: b keeps its baseline; c was not in it.
    assert baseline_rows(engine) == {"a": second.build_id, "b": first.build_id, "c": first.build_id}
    run_build(engine, artifacts, screens(tmp_path / "f", a=(), c=()), branch="feature")
    cancelled = upload(engine, artifacts, screens(tmp_path / "v3", a=(), c=()))
    with transaction(engine) as conn:
        cancel_build(conn, cancelled.build_id)
    # Neither a feature build nor a cancelled one is accepted.
    assert baseline_rows(engine) == {"a": second.build_id, "b": first.build_id, "c": first.build_id}
    with engine.connect() as conn:
        rows = conn.execute(
            select(baselines.c.name, snapshots.c.build_id).join(
                snapshots, snapshots.c.id == baselines.c.snapshot_id
            )
        )
        snapshot_of = {row.name: row.build_id for row in rows}
    assert snapshot_of == baseline_rows(engine)


# the lookup


@contextmanager
def statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every statement `engine` sends while the block runs, with its parameters."""
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        sent.append((statement, parameters))

    event.listen(engine, "before_cursor_execute", record)
    try:
        yield sent
    finally:
        event.remove(engine, "before_cursor_execute", record)


def plan(engine: Engine, statement: str, parameters: Any) -> str:
    explain = "EXPLAIN " if engine.dialect.name == "postgresql" else "EXPLAIN QUERY PLAN "
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execute(text("ANALYZE"))
        rows = conn.exec_driver_sql(explain + statement, parameters)
        return "\n".join(str(row[-1]) for row in rows)


def other_projects_baselines(engine: Engine, count: int) -> None:
    """`count` baselines of another project, so that a scan would cost and a planner sees it."""
    with transaction(engine) as conn:
        project = conn.execute(insert(projects).values(name="other").returning(projects.c.id))
        project_id = project.scalar_one()
        build_id = conn.execute(
            insert(builds)
            .values(project_id=project_id, branch="main", status="passed")
            .returning(builds.c.id)
        ).scalar_one()
        shard_id = conn.execute(
            insert(capture_shards)
            .values(build_id=build_id, index=0, status="completed")
            .returning(capture_shards.c.id)
        ).scalar_one()
        shots = [
            {
                "build_id": build_id,
                "shard_id": shard_id,
                "name": f"story-{n}",
                "image_path": "images/aa/a.png",
                "image_sha256": "a" * 64,
                "status": "new",
            }
            for n in range(count)
        ]
        conn.execute(insert(snapshots), shots)
        conn.execute(
            insert(baselines).from_select(
                ["project_id", "name", "snapshot_id", "build_id"],
                select(
                    func.cast(project_id, baselines.c.project_id.type),
                    snapshots.c.name,
                    snapshots.c.id,
                    snapshots.c.build_id,
                ).where(snapshots.c.build_id == build_id),
            )
        )


def test_a_new_build_reads_its_baselines_in_one_statement_on_the_tables_key(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    other_projects_baselines(engine, 5_000)
    lookups: list[list[tuple[str, Any]]] = []
    accepted = 0
    for past in (1, 12):
        while accepted < past:
            run_build(engine, artifacts, screens(tmp_path / f"v{accepted}", a=BUTTON, b=MOVED))
            accepted += 1
        shots = screens(tmp_path / f"new-{past}", a=BUTTON, b=BUTTON, c=BUTTON)
        with statements(engine) as sent:
            upload(engine, artifacts, shots, branch="feature", shards=3)
        lookups.append([s for s in sent if "FROM baselines" in s[0]])
    # After 1 accepted build and after 12: the same one statement.
    assert [len(found) for found in lookups] == [1, 1]
    shown = plan(engine, *lookups[-1][0])
    if engine.dialect.name == "postgresql":
        assert "pk_baselines" in shown and "Seq Scan" not in shown, shown
    else:
        assert "SEARCH baselines USING INDEX sqlite_autoindex_baselines_1" in shown, shown
        assert "SCAN" not in shown, shown


# migration 0003


def migrate(engine: Engine, step: Callable[..., None], revision: str) -> None:
    config = alembic_config(engine)
    with schema_transaction(engine) as connection:
        config.attributes["connection"] = connection
        step(config, revision)


def unfinished_capture_data(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(jobs.c.data).where(jobs.c.status == "queued").order_by(jobs.c.id)
            ).scalars()
        )


def test_the_migration_fills_the_baselines_from_the_accepted_builds_already_there(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    first = run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON, c=BUTTON))
    broken = screens(tmp_path / "v2", a=MOVED)
    (broken / "b.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")  # passes the upload
    run_build(engine, artifacts, broken)
    run_build(engine, artifacts, screens(tmp_path / "f", a=(), c=()), branch="feature")
    upload(engine, artifacts, screens(tmp_path / "queued", a=(), b=(), d=()), branch="feature")
    expected_rows, expected_data = baseline_rows(engine), unfinished_capture_data(engine)
    assert expected_rows == {"a": 2, "b": first.build_id, "c": first.build_id}
    try:
        migrate(engine, command.downgrade, "0002")
        assert "baselines" not in inspect(engine).get_table_names()
        (data,) = unfinished_capture_data(engine)
        assert all("baseline" not in shot for shot in data["snapshots"])
    finally:
        migrate(engine, command.upgrade, "head")
    assert baseline_rows(engine) == expected_rows
    assert unfinished_capture_data(engine) == expected_data
    (data,) = expected_data
    assert [shot["baseline"] is not None for shot in data["snapshots"]] == [True, True, False]
