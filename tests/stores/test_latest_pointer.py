"""A branch's `latest` page on each store: any branch git takes gets its report and its page,
and a page the store refuses never costs the report (`child.report.publish`).

Git takes branches of any length and nearly any character; a file system takes 255 bytes in a
name and a bucket 1024 in a key (`ipc.publish` maps one to the other). The host's part is played
in-process (`tests.capture_helpers.run_jobs`), as the host runs it, on PostgreSQL and SQLite,
on a folder and on a real bucket.
"""

from __future__ import annotations

import posixpath
from pathlib import Path

from sqlalchemy import Engine, func, select

from ipc.artifacts.folder import FolderStore
from ipc.artifacts.store import ArtifactStore
from ipc.publish import latest_pointer, pointed_build, pointer_target, report_index
from supervisor.db.tables import builds, jobs
from tests.capture_helpers import run_build, run_cli, screens

BUTTON = ((4, 4, 20, 10),)
#: Branches whose parts, quoted, pass a file system's 255 bytes, or whose path passes what a
#: key can hold, and the names a folder store could confuse (a page where a folder must be).
BRANCHES = (
    "é" * 43,
    "a" * 256,
    "feature/" + "ü" * 200,
    "/".join(["deep"] * 300),
    "x",
    "x.html/y",
    "release/..",
)


def publish_jobs(engine: Engine) -> dict[str, int]:
    with engine.connect() as conn:
        return dict(
            conn.execute(
                select(jobs.c.status, func.count())
                .where(jobs.c.kind == "publish")
                .group_by(jobs.c.status)
            ).all()
        )


def test_a_branch_of_any_length_or_name_gets_its_report_and_latest_page(
    engine: Engine, database_url: str, store: ArtifactStore, tmp_path: Path
) -> None:
    folder = screens(tmp_path / "shots", button=BUTTON)
    built = {branch: run_build(engine, store, folder, branch=branch) for branch in BRANCHES}
    for branch, queued in built.items():
        with engine.connect() as conn:
            url = conn.execute(
                select(builds.c.report_url).where(builds.c.id == queued.build_id)
            ).scalar_one()
        assert url == store.where(report_index("web", queued.build_id)), branch
        pointer = latest_pointer("web", branch)
        assert pointed_build(store.read_bytes(pointer)) == queued.build_id, branch
        target = pointer_target(branch, queued.build_id)
        assert f'url={target}"' in store.read_bytes(pointer).decode()
        opened = posixpath.normpath(posixpath.join(posixpath.dirname(pointer), target))
        assert opened == report_index("web", queued.build_id)
    assert publish_jobs(engine) == {"completed": len(BRANCHES)}
    for queued in built.values():
        command = ["build", str(queued.build_id), f"--database-url={database_url}"]
        assert run_cli([*command, f"--artifacts={store.location}"]) == 0
    assert publish_jobs(engine) == {"completed": len(BRANCHES)}  # nothing to publish again


def test_a_latest_page_the_store_refuses_leaves_the_report_published(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    """An older version's page `latest/feature` (a file) stands where `feature/login` needs a
    folder. The report is published and recorded all the same, and `build ID` has nothing to
    queue again: a failed job would have left the report written but unrecorded, queued again
    by every `build ID` and failing each time. (A bucket has no folders to stand in the way.)"""
    artifacts = tmp_path / "artifacts"
    in_the_way = artifacts / "reports/web/latest/feature"
    in_the_way.parent.mkdir(parents=True)
    in_the_way.write_text("an older pointer page")
    queued = run_build(
        engine,
        FolderStore(artifacts),
        screens(tmp_path / "shots", button=BUTTON),
        branch="feature/login",
    )
    report = artifacts / report_index("web", queued.build_id)
    with engine.connect() as conn:
        url = conn.execute(
            select(builds.c.report_url).where(builds.c.id == queued.build_id)
        ).scalar_one()
    assert url == str(report) and report.is_file()
    assert in_the_way.read_text() == "an older pointer page"
    command = ["build", str(queued.build_id), f"--database-url={database_url}"]
    assert run_cli([*command, f"--artifacts={artifacts}"]) == 0
    assert publish_jobs(engine) == {"completed": 1}
