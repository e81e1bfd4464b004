"""The baselines: per project and snapshot name, the accepted snapshot later builds compare with.

DESIGN section 4: a build's baselines are fixed when it is created. So the `baselines` table
holds, for each name, the snapshot of the last accepted build where that name did not fail:
`accept` replaces the rows of a build on the baseline branch in the transaction that ends it,
and `find` reads a new build's rows in the transaction that creates it. A branch has baselines
of its own, `branch_baselines`: the snapshots a review accepted on it (`adopt`, `withdraw`),
which its builds compare with before the baseline branch's. A build queued while
its baseline build still runs therefore compares with the builds that had ended by then, every
time, whichever shard of either runs first; and the lookup is by the table's key, so it costs
the same after 10 or 10,000 builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, and_, delete, literal, select, update

from supervisor.db.connection import upsert
from supervisor.db.tables import baselines, branch_baselines, build_baselines, snapshots

#: Names looked up per statement, well under SQLite's bound-parameter limit.
NAMES_PER_LOOKUP = 500

#: A baseline as a capture job carries it to its child: `{"id", "image", "sha256"}`, and
#: `"ignore_boxes"` when its capture recorded some.
JobBaseline = dict[str, Any]


def _of_branch(project_id: int, branch: str) -> ColumnElement[bool]:
    return and_(branch_baselines.c.project_id == project_id, branch_baselines.c.branch == branch)


def find(
    conn: Connection, project_id: int, branch: str, names: Sequence[str]
) -> dict[str, JobBaseline]:
    """Each of `names`' baseline for a build of `branch` in project `project_id`, as capture
    jobs carry it: the branch's accepted snapshot, else the baseline branch's; names without
    either are left out."""
    found = _lookup(conn, baselines, baselines.c.project_id == project_id, names)
    found.update(_lookup(conn, branch_baselines, _of_branch(project_id, branch), names))
    return found


def freeze(conn: Connection, project_id: int, branch: str, build_id: int) -> None:
    """Copy the baselines a build of `branch` has now (`find`'s answer for every name) to build
    `build_id`, in two statements.

    For a build whose snapshots' names are known only later (a Storybook's, after its plan), so
    that it compares with what had been accepted when it was created, like an upload, whatever
    is accepted while its plan waits or runs.
    """
    columns = ["build_id", "name", "snapshot_id"]
    build = literal(build_id, build_baselines.c.build_id.type)
    own = select(build, branch_baselines.c.name, branch_baselines.c.snapshot_id).where(
        _of_branch(project_id, branch)
    )
    conn.execute(build_baselines.insert().from_select(columns, own))
    taken = select(build_baselines.c.name).where(build_baselines.c.build_id == build_id)
    shared = select(build, baselines.c.name, baselines.c.snapshot_id).where(
        baselines.c.project_id == project_id, baselines.c.name.not_in(taken)
    )
    conn.execute(build_baselines.insert().from_select(columns, shared))


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


def adopt(
    conn: Connection,
    project_id: int,
    branch: str | None,
    build_id: int,
    snapshot_ids: Sequence[int],
) -> None:
    """Make the snapshots `snapshot_ids` of build `build_id` the baselines of their names: the
    branch's (`branch_baselines`), or the project's when `branch` is None (the baseline branch).
    In name order, for the reason `accept` gives."""
    table = baselines if branch is None else branch_baselines
    owner: dict[str, object] = {"project_id": project_id}
    if branch is not None:
        owner["branch"] = branch
    keys = [table.c[column] for column in owner] + [table.c.name]
    for start in range(0, len(snapshot_ids), NAMES_PER_LOOKUP):
        chosen = (
            select(
                *(literal(value, table.c[column].type) for column, value in owner.items()),
                snapshots.c.name,
                snapshots.c.id,
                snapshots.c.build_id,
            )
            .where(
                snapshots.c.build_id == build_id,
                snapshots.c.id.in_(snapshot_ids[start : start + NAMES_PER_LOOKUP]),
            )
            .order_by(snapshots.c.name)
        )
        statement = upsert(conn, table).from_select(
            [*owner, "name", "snapshot_id", "build_id"], chosen
        )
        conn.execute(
            statement.on_conflict_do_update(
                index_elements=keys,
                set_={
                    "snapshot_id": statement.excluded.snapshot_id,
                    "build_id": statement.excluded.build_id,
                },
            )
        )


def withdraw(
    conn: Connection, project_id: int, branch: str | None, snapshot_ids: Sequence[int]
) -> None:
    """Take back the snapshots `snapshot_ids` where they are a baseline (a rejection after an
    acceptance): a branch's name falls back to the baseline branch's; the project's name goes
    back to the baseline that snapshot was compared with, or to none."""
    for start in range(0, len(snapshot_ids), NAMES_PER_LOOKUP):
        chunk = snapshot_ids[start : start + NAMES_PER_LOOKUP]
        if branch is not None:
            conn.execute(
                delete(branch_baselines).where(
                    _of_branch(project_id, branch), branch_baselines.c.snapshot_id.in_(chunk)
                )
            )
            continue
        previous = conn.execute(
            select(snapshots.c.id, snapshots.c.baseline_id, snapshots.c.name).where(
                snapshots.c.id.in_(chunk)
            )
        ).all()
        for snapshot_id, baseline_id, name in previous:
            current = and_(
                baselines.c.project_id == project_id,
                baselines.c.name == name,
                baselines.c.snapshot_id == snapshot_id,
            )
            if baseline_id is None:
                conn.execute(delete(baselines).where(current))
                continue
            origin = select(snapshots.c.build_id).where(snapshots.c.id == baseline_id)
            conn.execute(
                update(baselines)
                .where(current)
                .values(snapshot_id=baseline_id, build_id=origin.scalar_subquery())
            )
