"""The baselines: per project and snapshot name, the accepted snapshot later builds compare with.

DESIGN section 4: a build's baselines are fixed when it is created. So the `baselines` table
holds, for each name, the snapshot of the last accepted build where that name did not fail:
`accept` replaces the rows of a build on the baseline branch in the transaction that ends it,
and `find` reads a new build's rows in the transaction that creates it. A build queued while
its baseline build still runs therefore compares with the builds that had ended by then, every
time, whichever shard of either runs first; and the lookup is by the table's key, so it costs
the same after 10 or 10,000 builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, literal, select

from supervisor.db.connection import upsert
from supervisor.db.tables import baselines, build_baselines, snapshots

#: Names looked up per statement, well under SQLite's bound-parameter limit.
NAMES_PER_LOOKUP = 500

#: A baseline as a capture job carries it to its child: `{"id", "image", "sha256"}`, and
#: `"ignore_boxes"` when its capture recorded some.
JobBaseline = dict[str, Any]


def find(conn: Connection, project_id: int, names: Sequence[str]) -> dict[str, JobBaseline]:
    """Each of `names`' baseline in project `project_id`, as capture jobs carry it; names
    without one are left out."""
    return _lookup(conn, baselines, baselines.c.project_id == project_id, names)


def freeze(conn: Connection, project_id: int, build_id: int) -> None:
    """Copy project `project_id`'s baselines as they are now to build `build_id`, in one statement.

    For a build whose snapshots' names are known only later (a Storybook's, after its plan), so
    that it compares with what had ended when it was created, like an upload, whatever is
    accepted while its plan waits or runs.
    """
    frozen = select(
        literal(build_id, build_baselines.c.build_id.type),
        baselines.c.name,
        baselines.c.snapshot_id,
    ).where(baselines.c.project_id == project_id)
    conn.execute(build_baselines.insert().from_select(["build_id", "name", "snapshot_id"], frozen))


def find_frozen(conn: Connection, build_id: int, names: Sequence[str]) -> dict[str, JobBaseline]:
    """Each of `names`' baseline as build `build_id` froze them (`freeze`), as `find` gives."""
    return _lookup(conn, build_baselines, build_baselines.c.build_id == build_id, names)


def _lookup(
    conn: Connection, table: Table, owner: ColumnElement[bool], names: Sequence[str]
) -> dict[str, JobBaseline]:
    found: dict[str, JobBaseline] = {}
    for start in range(0, len(names), NAMES_PER_LOOKUP):
        rows = conn.execute(
            select(
                table.c.name,
                snapshots.c.id,
                snapshots.c.image_path,
                snapshots.c.image_sha256,
                snapshots.c.ignore_boxes,
            )
            .join(snapshots, snapshots.c.id == table.c.snapshot_id)
            .where(owner, table.c.name.in_(names[start : start + NAMES_PER_LOOKUP]))
        )
        for row in rows:
            found[row.name] = {"id": row.id, "image": row.image_path, "sha256": row.image_sha256}
            if row.ignore_boxes:
                found[row.name]["ignore_boxes"] = row.ignore_boxes
    return found


def accept(conn: Connection, project_id: int, build_id: int) -> None:
    """Make build `build_id`'s snapshots the project's baselines of their names, in one statement.

    A snapshot that failed has nothing to compare with, so its name keeps the baseline it had.
    Rows are written in name order, so two builds of a project accepted at once on PostgreSQL
    take the rows' locks in the same order and the later one waits instead of deadlocking.
    """
    accepted = (
        select(
            literal(project_id, baselines.c.project_id.type),
            snapshots.c.name,
            snapshots.c.id,
            snapshots.c.build_id,
        )
        .where(snapshots.c.build_id == build_id, snapshots.c.status != "failed")
        .order_by(snapshots.c.name)
    )
    statement = upsert(conn, baselines).from_select(
        ["project_id", "name", "snapshot_id", "build_id"], accepted
    )
    conn.execute(
        statement.on_conflict_do_update(
            index_elements=[baselines.c.project_id, baselines.c.name],
            set_={
                "snapshot_id": statement.excluded.snapshot_id,
                "build_id": statement.excluded.build_id,
            },
        )
    )
