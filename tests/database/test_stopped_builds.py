"""A build whose stories all fail with one error ends when the first shard says so, its error said
once (`supervisor.builds.stop`); on PostgreSQL and SQLite (no browser: the child's results are
given here as the child sends them, `child.storybook.capture`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from ipc.artifacts.folder import FolderStore
from ipc.storybook import NOT_RENDERED, stopped_error
from supervisor.builds import capture
from supervisor.builds.capture import ResultError
from supervisor.builds.text import format_build
from supervisor.builds.view import load_build
from supervisor.db import queue
from supervisor.db.tables import builds, capture_shards, jobs, snapshots
from tests.capture_helpers import claim
from tests.database.test_plan_kind import planned, queue_plan, record, story
from tests.database.test_story_results import captured

WORKER = "Error: [MSW] Failed to register a Service Worker for scope ('/'): no such script"


def failed(name: str, error: str = WORKER) -> dict[str, Any]:
    item = captured(name, 0.2, settled=True)
    item.update(status="failed", error=error, width=None, height=None, metric=None, threshold=None)
    item.update(count_aa=None, image=None, sha256=None, settled=None, ignore_boxes=None)
    return item


def three_shards(engine: Engine, artifacts: Path) -> list[queue.Job]:
    """A Storybook build of six stories planned into three capture jobs, all still queued."""
    plan_job = queue_plan(engine, artifacts, shards=3)
    shots = [story(f"a--s{n}", title=f"T{n % 3}") for n in range(6)]
    assert record(engine, plan_job, planned(*shots), artifacts) == "open"
    with engine.connect() as conn:
        rows = conn.execute(select(jobs).where(jobs.c.kind == "capture").order_by(jobs.c.id))
        return [queue.Job.from_row(row) for row in rows]


def settle(engine: Engine, job: queue.Job, result: Any) -> str:
    with engine.connect() as conn, conn.begin():
        assert queue.ack(conn, job.lease)
        return capture.record(conn, job, result)


def results(job: queue.Job, *items: dict[str, Any]) -> list[dict[str, Any]]:
    names = [shot["name"] for shot in job.data["snapshots"]]
    given = {item["name"]: item for item in items}
    return [given.get(name) or failed(name, NOT_RENDERED) for name in names]


def test_the_first_shard_to_say_so_stops_the_build_and_the_error_is_said_once(
    engine: Engine, artifacts: Path
) -> None:
    first, second, third = three_shards(engine, artifacts)
    (job,) = claim(engine, limit=1)
    (running,) = claim(engine, limit=1)  # another host runs the second shard meanwhile
    assert (job.id, running.id) == (first.id, second.id)
    tried = results(job, failed(job.data["snapshots"][0]["name"]))
    assert settle(engine, job, {"snapshots": tried, "stopped": WORKER}) == "finalized"

    with engine.connect() as conn:
        build = conn.execute(select(builds)).mappings().one()
        shots = conn.execute(select(snapshots.c.name, snapshots.c.error)).all()
        shards = dict(conn.execute(select(capture_shards.c.index, capture_shards.c.status)).all())
        states = dict(conn.execute(select(jobs.c.id, jobs.c.status)).all())
        asked = dict(conn.execute(select(jobs.c.id, jobs.c.cancel_requested)).all())
    assert build["status"] == "failed"
    assert build["error"] == stopped_error(WORKER)
    assert build["failed"] == 6  # every story is counted, rendered or not
    assert sorted(error for _, error in shots).count(WORKER) == 1
    assert len(shots) == 6
    assert shards == {0: "completed", 1: "failed", 2: "failed"}
    assert states[third.id] == "cancelled"  # queued: cancelled at once
    assert states[second.id] == "running" and asked[second.id]  # running: told to stop

    # The running shard's results, come before its host saw the cancel, are dropped: its
    # stories are written once, as not rendered.
    late = results(running, captured(running.data["snapshots"][0]["name"], 0.3, settled=True))
    assert settle(engine, running, {"snapshots": late, "stopped": None}) == "skipped"
    with engine.connect() as conn:
        assert len(conn.execute(select(snapshots.c.id)).all()) == 6

    with engine.connect() as conn:
        view = load_build(conn, build["id"])
    assert view is not None
    text = format_build(view, FolderStore(artifacts))
    assert text.count("no such script") == 1, text
    assert "not rendered 5 snapshots: the build stopped" in text


def test_a_build_one_of_whose_stories_rendered_goes_on(engine: Engine, artifacts: Path) -> None:
    three_shards(engine, artifacts)
    (one,) = claim(engine, limit=1)
    (two,) = claim(engine, limit=1)
    rendered = [captured(shot["name"], 0.3, settled=True) for shot in two.data["snapshots"]]
    assert settle(engine, two, {"snapshots": rendered, "stopped": None}) == "open"
    tried = results(one, failed(one.data["snapshots"][0]["name"]))
    assert settle(engine, one, {"snapshots": tried, "stopped": WORKER}) == "open"
    with engine.connect() as conn:
        build = conn.execute(select(builds)).mappings().one()
        queued = conn.execute(select(jobs.c.id).where(jobs.c.status == "queued")).all()
    assert build["status"] == "capturing" and len(queued) == 1


@pytest.mark.parametrize("stopped", [12, "", "x" * 5000], ids=["number", "empty", "too long"])
def test_a_malformed_stop_is_refused(engine: Engine, artifacts: Path, stopped: Any) -> None:
    three_shards(engine, artifacts)
    (job,) = claim(engine, limit=1)
    with pytest.raises(ResultError, match="malformed stop"):
        settle(engine, job, {"snapshots": results(job), "stopped": stopped})
