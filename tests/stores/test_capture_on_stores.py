"""A build captured end to end on each store: upload, the child's diff, the results, the report.

The host's part is played in-process (`tests.capture_helpers.run_jobs`): the same `prepare`,
child `capture.run` and `record` a host runs, on a folder and on a real bucket.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import Engine, select

from ipc.artifacts.keys import image_key
from ipc.artifacts.store import ArtifactStore
from ipc.publish import report_index
from supervisor.db.tables import builds, snapshots
from tests.capture_helpers import run_build, screens

BUTTON = ((4, 4, 20, 10),)
MOVED = ((6, 4, 20, 10),)


def test_a_branch_is_compared_with_its_baselines_on_either_store(
    engine: Engine, store: ArtifactStore, tmp_path: Path
) -> None:
    main = run_build(engine, store, screens(tmp_path / "main", button=BUTTON, card=BUTTON))
    branch = run_build(
        engine,
        store,
        screens(tmp_path / "branch", button=MOVED, card=BUTTON, badge=BUTTON),
        branch="feature",
    )
    with engine.connect() as conn:
        rows = {
            row.name: row
            for row in conn.execute(
                select(snapshots).where(snapshots.c.build_id == branch.build_id)
            )
        }
        statuses = dict(conn.execute(select(builds.c.id, builds.c.status)).all())
    assert statuses == {main.build_id: "passed", branch.build_id: "changed"}
    assert {name: row.status for name, row in rows.items()} == {
        "button": "changed",
        "card": "unchanged",
        "badge": "new",
    }
    assert rows["button"].diff_path.startswith(f"diffs/{branch.build_id}/")
    assert store.exists(rows["button"].diff_path)
    assert rows["card"].image_path == image_key(rows["card"].image_sha256)
    report = report_index("web", branch.build_id)
    assert store.exists(report)
    assert b"button" in store.read_bytes(report)
    # The report's folder holds every picture it shows, under the keys it links them by.
    folder = report.rsplit("/", 1)[0]
    assert store.exists(f"{folder}/{rows['button'].diff_path}")
    assert store.exists(f"{folder}/{rows['card'].image_path}")


def test_a_second_upload_of_the_same_images_stores_nothing_new(
    engine: Engine, store: ArtifactStore, tmp_path: Path
) -> None:
    folder = screens(tmp_path / "main", button=BUTTON, card=MOVED)
    run_build(engine, store, folder)
    before = {item.key: item.modified for item in store.listing("images/")}
    run_build(engine, store, folder, branch="again")
    after = {item.key: item.modified for item in store.listing("images/")}
    assert after == before
