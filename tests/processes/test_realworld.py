"""The Storybooks teams really have, through real hosts: Storybooks built with npm on published
component libraries (`tests/fixtures/realworld/*/`: each folder's README says which versions,
builder, framework and addons, and how it is rebuilt), Storybook 6.5 to 10, webpack and Vite,
React, Vue, Svelte, Angular and web components, and stories fed by MSW's service worker (1 and 2).

For each: every story that does not opt out by a parameter of its own is captured; a second
capture of the same build is `unchanged` for every snapshot (charts animated by script
included); and a build with a one-line visual edit of one component changes exactly the stories
that render it. Each fixture's `expected.json` lists those stories (`edited`); no story of any
fixture fails. The fixtures alternate between the two databases: what differs by database is
settling, which `tests/database` runs on both.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from ipc.artifacts.folder import FolderStore
from ipc.storybook import NOT_RENDERED, stopped_by
from tests.chromium import require_chromium
from tests.hosts import StartHost, build_ended
from tests.processes.test_storybook_hosts import queue_storybook, results

REALWORLD = Path(__file__).resolve().parents[1] / "fixtures" / "realworld"
FIXTURES = sorted(path.parent.name for path in REALWORLD.glob("*/expected.json"))
DATABASES = ("sqlite", "postgresql")
#: Two children, and room for the slowest story (a chart animated for 5 s) within the stall.
HOST = (
    "--concurrency", "2", "--lease-seconds", "60", "--stall-seconds", "40",
    "--backoff-base-seconds", "0.1", "--poll-seconds", "0.3", "--drain-seconds", "10",
)  # fmt: skip
#: A guard for one build's capture on a machine the suite keeps busy (vue-sb9's took 40 s).
BUILD_SECONDS = 300.0
#: The reasons a plan may give for leaving a story out: each a parameter of the story's own.
OPT_OUTS = {
    "chromatic.disableSnapshot",
    "chromatic.disable",
    "lostpixel.disable",
    "screenshot.skip",
    "no snapshot tag",
}


@pytest.fixture(autouse=True)
def chromium_is_required() -> None:
    require_chromium()


def test_there_is_a_real_world_corpus() -> None:
    assert len(FIXTURES) >= 1, f"no fixture with an expected.json under {REALWORLD}"


@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("fixture", "database_url"),
    [(name, DATABASES[index % 2]) for index, name in enumerate(FIXTURES)],
    ids=FIXTURES,
    indirect=["database_url"],
)
def test_a_real_storybook_is_captured_whole_the_same_twice_and_its_edit_found_exactly(
    fixture: str, engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    folder = REALWORLD / fixture
    expected: dict[str, Any] = json.loads((folder / "expected.json").read_text())
    store = FolderStore(tmp_path / "artifacts")
    host = start_host(*HOST)
    first = queue_storybook(engine, store, folder / "storybook-static", "main")
    build = build_ended(engine, first, BUILD_SECONDS)
    skipped = {item["story_id"]: item["reason"] for item in build["plan"]["skipped"]}
    assert {story: why for story, why in skipped.items() if why not in OPT_OUTS} == {}
    captured = results(engine, first)
    assert {n: r["error"] for n, r in captured.items() if r["status"] != "new"} == {}
    assert build["new"] == len(captured) > 0

    # The same host takes the next two builds, as a host left running takes a team's next pushes.
    again = queue_storybook(engine, store, folder / "storybook-static", "main")
    edited = queue_storybook(engine, store, folder / "storybook-static-edited", "edit")
    build_ended(engine, again, BUILD_SECONDS)
    build_ended(engine, edited, BUILD_SECONDS)
    assert host.stop() == 0
    second = results(engine, again)
    assert {n: r["diff_pixels"] for n, r in second.items() if r["status"] != "unchanged"} == {}
    assert set(second) == set(captured)
    changed = results(engine, edited)
    assert {n for n, r in changed.items() if r["status"] != "unchanged"} == set(expected["edited"])
    assert all(changed[name]["status"] == "changed" for name in expected["edited"])


@pytest.mark.timeout(600)
@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_storybook_whose_stories_all_fail_with_one_error_stops_with_it_said_once(
    engine: Engine, start_host: StartHost, tmp_path: Path
) -> None:
    """msw-sb10 without its worker's script (`npx msw init` never run into its static files):
    every story's global loader fails alike. The build ends after a few stories, its error once."""
    build_folder = tmp_path / "storybook-static"
    shutil.copytree(REALWORLD / "msw-sb10" / "storybook-static", build_folder)
    (build_folder / "mockServiceWorker.js").unlink()
    store = FolderStore(tmp_path / "artifacts")
    host = start_host(*HOST)
    build_id = queue_storybook(engine, store, build_folder, "main")
    build = build_ended(engine, build_id, BUILD_SECONDS)
    assert host.stop() == 0

    cause = stopped_by(build["error"])
    assert build["status"] == "failed" and cause is not None, build["error"]
    # The page's origin is out of the message, so that every page's is the same.
    assert "Failed to register a Service Worker for scope ('/')" in cause
    assert "('/mockServiceWorker.js')" in cause and "127.0.0.1" not in cause
    captured = results(engine, build_id)
    errors = [row["error"] for row in captured.values()]
    assert build["failed"] == len(captured) > 30
    assert set(errors) == {cause, NOT_RENDERED}
    # A few stories per child tell it (`child.storybook.breakdown`); the rest are not rendered.
    assert errors.count(cause) <= 2 * 6, errors.count(cause)
