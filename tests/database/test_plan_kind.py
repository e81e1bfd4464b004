"""The parent's side of a `plan` job: its result becomes shards and capture jobs, in the settle
transaction, with the baselines the build froze; on PostgreSQL and SQLite (no browser: the
child's plan is given here as the child would send it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from ipc.artifacts.folder import FolderStore
from ipc.storybook import DEFAULT_MEDIA, StorySnapshot
from supervisor.builds import capture, plan
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, capture_shards, jobs
from tests.capture_helpers import claim, run_build, screens

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "storybook" / "storybook-static"


def story(story_id: str, mode: str | None = None, **settings: Any) -> StorySnapshot:
    shot: StorySnapshot = {
        "name": story_id if mode is None else f"{story_id} [{mode}]",
        "story_id": story_id,
        "title": "Example/Button",
        "story": "Primary",
        "mode": mode,
        "viewport": {"width": int(mode or 1200), "height": 900},
        "delay_ms": 0,
        "pause_animation_at_end": True,
        "crop": "root",
        "threshold": None,
        "count_aa": None,
        "ignore": [],
        "media": DEFAULT_MEDIA.copy(),
        "globals": {},
        "problem": None,
    }
    return {**shot, **settings}  # type: ignore[typeddict-item]


def broken(**changes: Any) -> dict[str, Any]:
    """A story snapshot with these fields changed, into what no plan may hold."""
    return {**story("a"), **changes}


def planned(*shots: Mapping[str, Any], error: str | None = None) -> dict[str, Any]:
    skipped = [{"story_id": "a--off", "title": "A", "story": "Off", "reason": "lostpixel.disable"}]
    return {"snapshots": list(shots), "skipped": skipped, "docs": 1, "error": error}


def queue_plan(engine: Engine, artifacts: Path, shards: int | None = None) -> queue.Job:
    stored = store_storybook(FolderStore(artifacts), FIXTURE)
    with transaction(engine) as conn:
        enqueue_storybook(conn, project="web", branch="feature", storybook=stored, shards=shards)
    (job,) = [job for job in claim(engine) if job.kind == "plan"]
    with transaction(engine) as conn:
        plan.prepare(conn, job, FolderStore(artifacts))
    return job


def record(engine: Engine, job: queue.Job, result: Any, artifacts: Path) -> str:
    with engine.connect() as conn, conn.begin():
        assert queue.ack(conn, job.lease)
        return plan.record(conn, job, result)


def rows(engine: Engine, table: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(r._mapping) for r in conn.execute(select(table).order_by(table.c.id))]


def test_a_plan_becomes_shards_and_capture_jobs_with_the_frozen_baselines(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    run_build(engine, artifacts, screens(tmp_path / "main", **{"b--one": ((1, 1, 3, 3),)}))
    job = queue_plan(engine, artifacts, shards=2)
    shots = [story("b--one"), story("b--two", "320"), story("b--two", "1200", threshold=0.3)]
    assert record(engine, job, planned(*shots), artifacts) == "open"
    build = next(b for b in rows(engine, builds) if b["id"] == job.data["build_id"])
    assert build["status"] == "capturing"
    assert build["plan"] == {
        "skipped": planned()["skipped"],
        "docs": 1,
        "snapshots": 3,
    }
    shards = [s for s in rows(engine, capture_shards) if s["build_id"] == build["id"]]
    captures = [
        j for j in rows(engine, jobs) if j["kind"] == "capture" and j["build_id"] == build["id"]
    ]
    assert len(shards) == len(captures) == 2
    data = [job["data"] for job in captures]
    assert all(capture.accepts(item) for item in data)
    assert all(item["storybook"] == job.data["storybook"] for item in data)
    by_name = {shot["name"]: shot for item in data for shot in item["snapshots"]}
    assert sorted(by_name) == ["b--one", "b--two [1200]", "b--two [320]"]
    assert by_name["b--one"]["baseline"] is not None
    assert by_name["b--two [1200]"]["baseline"] is None
    assert by_name["b--two [1200]"]["threshold"] == 0.3


@pytest.mark.parametrize(
    ("stories", "expected"),
    [
        (45, [2, 10, 10, 10, 7, 3, 2, 1]),
        (12, [2, 5, 3, 2]),
        (13, [2, 6, 3, 2]),
        (4, [2, 2]),
        (2, [2]),
        (1, [1]),
    ],
)
def test_without_shards_asked_the_first_takes_two_stories_and_the_others_halve_to_the_end(
    engine: Engine, tmp_path: Path, stories: int, expected: list[int]
) -> None:
    """The first job is done within seconds of the plan, so the build's first results come at
    once; the others are ten at most, so that two children share a small Storybook, and halve
    what is left towards the end, so that the children end together."""
    job = queue_plan(engine, tmp_path / "artifacts")
    shots = [story(f"s--{index:02}") for index in range(stories)]
    record(engine, job, planned(*shots), tmp_path / "artifacts")
    captures = [j for j in rows(engine, jobs) if j["kind"] == "capture"]
    assert [len(j["data"]["snapshots"]) for j in captures] == expected
    names = [shot["name"] for j in captures for shot in j["data"]["snapshots"]]
    assert names == sorted(names) and len(names) == stories


def test_a_plan_that_cannot_open_its_storybook_fails_the_build_with_the_browser_message(
    engine: Engine, tmp_path: Path
) -> None:
    job = queue_plan(engine, tmp_path / "artifacts")
    result = planned(error="Uncaught SyntaxError: Unexpected token '<'")
    assert record(engine, job, result, tmp_path / "artifacts") == "finalized"
    (build,) = rows(engine, builds)
    assert build["status"] == "failed"
    assert build["error"] == (
        "the Storybook cannot be planned: Uncaught SyntaxError: Unexpected token '<'"
    )
    assert [j["kind"] for j in rows(engine, jobs)] == ["plan", "publish"]  # its report


def test_a_plan_with_every_story_opted_out_fails_the_build_saying_so(
    engine: Engine, tmp_path: Path
) -> None:
    job = queue_plan(engine, tmp_path / "artifacts")
    assert record(engine, job, planned(), tmp_path / "artifacts") == "finalized"
    (build,) = rows(engine, builds)
    assert (build["status"], build["new"]) == ("failed", 0)
    assert build["error"] == "nothing to capture: no story left after the opt-outs (1 skipped)"


@pytest.mark.parametrize(
    "result",
    [
        None,
        {"snapshots": [], "skipped": [], "docs": 0},
        planned(story("a"), story("a")),
        planned(broken(crop="everything")),
        planned(broken(viewport={"width": 0, "height": 900})),
        planned(broken(name="a\nb")),
        planned(broken(threshold=3)),
        planned(broken(delay_ms=10**9)),
        {**planned(), "docs": -1},
    ],
    ids=[
        "none",
        "no-error-key",
        "duplicate",
        "crop",
        "viewport",
        "control-char",
        "threshold",
        "delay",
        "docs",
    ],
)
def test_a_malformed_plan_is_refused_and_writes_nothing(
    engine: Engine, tmp_path: Path, result: Any
) -> None:
    job = queue_plan(engine, tmp_path / "artifacts")
    with pytest.raises(plan.PlanError), engine.connect() as conn, conn.begin():
        plan.record(conn, job, result)
    assert [j["kind"] for j in rows(engine, jobs)] == ["plan"]
    assert rows(engine, capture_shards) == []
