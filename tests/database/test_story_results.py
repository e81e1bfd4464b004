"""A story's capture result carries its render time, which the host counts when it records the
capture; on PostgreSQL and SQLite (no browser: the child's results are given here as the child
would send them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from child.report.render import render_report
from ipc.artifacts.folder import FolderStore
from ipc.artifacts.keys import image_key
from ipc.messages import Done
from supervisor.builds import capture
from supervisor.builds.capture import STORY_RESULT_KEYS, ResultError
from supervisor.builds.notify import summary
from supervisor.builds.projects import SettingsChange, change_settings
from supervisor.builds.text import format_build
from supervisor.builds.view import load_build
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.host.pool import Child
from supervisor.metrics.registry import HostMetrics
from tests.capture_helpers import claim
from tests.database.test_plan_kind import planned, queue_plan, record, story
from tests.settling import host_settler

SHA = "ab" * 32


def captured(name: str, seconds: Any, settled: bool) -> dict[str, Any]:
    """A story's result as the child sends it: rendered, stored, new."""
    item: dict[str, Any] = dict.fromkeys(STORY_RESULT_KEYS)
    item.update(
        name=name,
        status="new",
        width=100,
        height=40,
        metric="yiq",
        threshold=0.1,
        count_aa=False,
        image=image_key(SHA),
        sha256=SHA,
        settled=settled,
        render_seconds=seconds,
        ignore_boxes=[],
    )
    return item


def timed_out(name: str) -> dict[str, Any]:
    """A story that failed at the render cap: rendered for 15 s, no shot."""
    item: dict[str, Any] = dict.fromkeys(STORY_RESULT_KEYS)
    item.update(
        name=name, status="failed", error="did not finish rendering in 15 s", render_seconds=15.2
    )
    return item


def planned_capture(engine: Engine, artifacts: Path) -> None:
    """A Storybook build planned into one capture job of two stories."""
    plan_job = queue_plan(engine, artifacts)
    record(engine, plan_job, planned(story("a--one"), story("a--two")), artifacts)


def test_a_recorded_capture_counts_its_stories_and_their_render_times(
    engine: Engine, database_url: str, artifacts: Path, child: Child
) -> None:
    planned_capture(engine, artifacts)
    metrics = HostMetrics()
    settler = host_settler(engine, database_url, artifacts, metrics=metrics)
    (running,) = settler.complete_and_claim([child])
    assert running.job.kind == "capture"
    result = {"snapshots": [captured("a--one", 0.4, settled=False), timed_out("a--two")]}
    settler.ended(running, Done(running.job.id, result))
    settler.complete_and_claim([])

    def sample(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert sample("storyshelf_jobs_finished_total", kind="capture", outcome="completed") == 1
    assert sample("storyshelf_stories_rendered_total") == 2
    assert sample("storyshelf_story_render_seconds_sum") == pytest.approx(15.6)
    assert sample("storyshelf_stories_unsettled_total") == 1
    assert sample("storyshelf_claim_batch_size_count") == 1
    assert sample("storyshelf_pickup_latency_seconds_count") == 1


@pytest.mark.parametrize(
    ("change", "refused"),
    [
        (lambda item: item.pop("render_seconds"), "lacks or adds fields"),
        (lambda item: item.update(render_seconds=None), "malformed render time"),
        (lambda item: item.update(render_seconds=-0.1), "malformed render time"),
        (lambda item: item.update(render_seconds=True), "malformed render time"),
        (lambda item: item.update(render_seconds="0.4"), "malformed render time"),
        (lambda item: item.update(render_seconds=1e9), "malformed render time"),
    ],
)
def test_a_story_result_without_a_sound_render_time_is_refused(
    engine: Engine, artifacts: Path, change: Any, refused: str
) -> None:
    planned_capture(engine, artifacts)
    (job,) = [job for job in claim(engine) if job.kind == "capture"]
    items = [captured("a--one", 0.4, settled=True), timed_out("a--two")]
    change(items[0])
    with engine.connect() as conn, conn.begin():
        assert queue.ack(conn, job.lease)
        with pytest.raises(ResultError, match=refused):
            capture.record(conn, job, {"snapshots": items})


def changed_unstable(name: str) -> dict[str, Any]:
    """A story whose shots never settled, and whose last shot differs from its baseline."""
    item = captured(name, 0.4, settled=False)
    item.update(status="changed", diff_pixels=120, diff_ratio=0.01)
    return item


@pytest.mark.parametrize(
    ("setting", "verdict"), [(None, "changed"), (True, "changed"), (False, "passed")]
)
def test_an_unstable_change_fails_the_gate_unless_the_project_lets_it_pass(
    engine: Engine, artifacts: Path, setting: bool | None, verdict: str
) -> None:
    """The default hides nothing: a change in a snapshot that never settled makes the build
    `changed`; `project P --unstable-passes` shows it as unstable and lets the build pass. Either
    way `build --json`, the report and the webhook name it."""
    if setting is not None:
        with transaction(engine) as conn:
            change_settings(conn, "web", SettingsChange(unstable_fails=setting))
    planned_capture(engine, artifacts)
    (job,) = [job for job in claim(engine) if job.kind == "capture"]
    items = [changed_unstable("a--one"), captured("a--two", 0.3, settled=True)]
    with engine.connect() as conn, conn.begin():
        assert queue.ack(conn, job.lease)
        capture.record(conn, job, {"snapshots": items})
    with engine.connect() as conn:
        view = load_build(conn, job.data["build_id"])
        told = summary(conn, job.data["build_id"], "delivery-1")
    assert view is not None and view.status == verdict
    assert view.unstable == ("a--one",)
    document = view.as_json()
    assert document["unstable"] == ["a--one"]
    assert document["unstable_fails"] is (setting is not False)
    by_name = {s["name"]: s for s in document["snapshots"]}
    assert (by_name["a--one"]["unstable"], by_name["a--two"]["unstable"]) == (True, False)
    assert (told["unstable"], told["unstable_total"]) == (["a--one"], 1)
    text = format_build(view, FolderStore(artifacts))
    assert "changed, unstable" in text
    assert "unstable  1 snapshots never settled" in text
    page = render_report(view)
    assert 'data-show="unstable"' in page and 'data-unstable="true"' in page
