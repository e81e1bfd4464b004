"""Fixtures of the browser tests: a real Chromium shared by each module, and the Storybook fixture
stored in a temporary artifacts folder the way the parent stores it.

Without Chromium the tests are skipped on a developer's machine; with `CI=true` they fail
instead, so CI can never go green without a browser.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from child.browser.launch import ChildBrowser, child_browser, discard_child_browser
from child.storybook import kept
from ipc.artifacts.folder import FolderStore
from ipc.storybook import (
    DEFAULT_MEDIA,
    DEFAULT_VIEWPORT_HEIGHT,
    DEFAULT_VIEWPORT_WIDTH,
    StorybookRef,
    StorySnapshot,
)
from supervisor.builds.storybooks import store_files, store_storybook
from tests.chromium import require_chromium

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "storybook" / "storybook-static"
OPTIONS = {
    "metric": "yiq",
    "threshold": 0.1,
    "flat_threshold": None,
    "count_aa": False,
    "budget_pixels": 0,
}


@pytest.fixture(scope="module")
def browser() -> Iterator[ChildBrowser]:
    """The child's browser, launched once for the module, as a child launches it."""
    require_chromium()
    kept.close()
    discard_child_browser()
    yield child_browser()
    kept.close()
    discard_child_browser()


@dataclass(frozen=True)
class Stored:
    artifacts: Path
    ref: StorybookRef


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    """The fixture's build stored under a fresh artifacts folder."""
    artifacts = tmp_path_factory.mktemp("artifacts")
    return Stored(artifacts, store_storybook(FolderStore(artifacts), FIXTURE).ref)


@pytest.fixture(scope="module")
def store_variant(
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[Callable[[Path], None]], Stored]:
    """Stores a copy of the fixture changed by a function of its folder (a file removed...),
    unchecked: as a store may hold what no upload would take."""

    def store(change: Callable[[Path], None]) -> Stored:
        folder = tmp_path_factory.mktemp("variant") / "storybook-static"
        shutil.copytree(FIXTURE, folder)
        change(folder)
        artifacts = tmp_path_factory.mktemp("artifacts")
        return Stored(artifacts, store_files(FolderStore(artifacts), folder).ref)

    return store


def snapshot(story_id: str, **changes: Any) -> StorySnapshot:
    """A story's snapshot with the plan's defaults, changed by `changes`."""
    shot: StorySnapshot = {
        "name": story_id,
        "story_id": story_id,
        "title": "",
        "story": "",
        "mode": None,
        "viewport": {"width": DEFAULT_VIEWPORT_WIDTH, "height": DEFAULT_VIEWPORT_HEIGHT},
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
    shot.update(changes)  # type: ignore[typeddict-item]
    return shot


def capture_payload(stored: Stored, shots: list[StorySnapshot], **baselines: Any) -> dict[str, Any]:
    """A capture job's payload for `shots`, with no baselines unless given by name."""
    return {
        "artifacts": str(stored.artifacts),
        "build_id": 1,
        "shard_id": 1,
        "diff_dir": "diffs/1",
        "options": dict(OPTIONS),
        "storybook": stored.ref,
        "snapshots": [{**shot, "baseline": baselines.get(shot["name"])} for shot in shots],
    }
