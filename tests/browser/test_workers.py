"""The build's service workers run in the capture, contained, and what one story stores is not
seen by the next.

MSW feeds most teams' stories through its service worker: a capture page runs the workers of
its own build (`child.browser.pages`). Here, in one process as a child renders them, with the
hostile build's workers (`tests/fixtures/storybook/hostile-public/`): one that answers
`api/x` for its build, and ones that throw, never activate, spin, answer without end, come from
elsewhere or come by the thousand.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser
from child.browser.render import Capture, StoryRenderer, cap_message
from child.browser.site import Site
from child.storybook.stored import load
from ipc.artifacts.folder import FolderStore
from supervisor.builds.storybooks import store_storybook
from tests.browser.conftest import Stored, snapshot
from tests.hostile import PLAIN, Listeners, aimed_copy

ANSWERS = "hostile-workers--answers-for-its-build"
FETCHES = "hostile-workers--fetches-api-x"
ELSEWHERE = "hostile-workers--worker-fetches-elsewhere"
FOREIGN = "hostile-workers--registers-a-worker-from-elsewhere"
THROWS = "hostile-workers--registers-a-worker-that-throws"
NEVER = "hostile-workers--registers-a-worker-that-never-activates"
SPINS = "hostile-workers--registers-a-worker-that-spins"
ENDLESS = "hostile-workers--reads-an-endless-answer"
THOUSAND = "hostile-workers--registers-a-thousand-workers"
SETS = "hostile-storage--sets-a-dark-theme"
READS = "hostile-storage--reads-the-theme"
#: The cap of the stories that never finish here, shorter than Chromatic's 15 s.
CAP_SECONDS = 5.0


def _stored(folder: Path, listeners: Listeners, answer: str) -> Stored:
    """The hostile build aimed at `listeners`, its worker to answer `answer`, stored."""
    copy = aimed_copy(folder, listeners)
    aim = json.loads((copy / "target.json").read_text())
    (copy / "target.json").write_text(json.dumps({**aim, "answer": answer}))
    artifacts = folder / "artifacts"
    return Stored(artifacts, store_storybook(FolderStore(artifacts), copy).ref)


@pytest.fixture
def build_a(tmp_path: Path, listeners: Listeners) -> Stored:
    (tmp_path / "a").mkdir()
    return _stored(tmp_path / "a", listeners, "A")


@pytest.fixture
def build_b(tmp_path: Path, listeners: Listeners) -> Stored:
    (tmp_path / "b").mkdir()
    return _stored(tmp_path / "b", listeners, "B")


def _renderer(stored: Stored, cap_seconds: float = 15.0) -> Iterator[StoryRenderer]:
    build = load(for_job(str(stored.artifacts), lambda: None), stored.ref)
    with Site(build) as site, StoryRenderer(site, cap_seconds=cap_seconds) as renderer:
        yield renderer


def _take(stored: Stored, *story_ids: str, cap_seconds: float = 15.0) -> list[Capture]:
    """Each story in turn on one renderer (one page while none breaks it)."""
    for renderer in _renderer(stored, cap_seconds):
        return [renderer.take(snapshot(story_id)) for story_id in story_ids]
    raise AssertionError("unreachable")


def _service_workers(browser: ChildBrowser) -> list[str]:
    session = browser.browser.new_browser_cdp_session()
    try:
        targets = session.send("Target.getTargets")["targetInfos"]
    finally:
        session.detach()
    return [target["url"] for target in targets if target["type"] == "service_worker"]


def test_a_worker_answers_for_its_own_build_alone_and_ends_with_its_pages(
    browser: ChildBrowser, build_a: Stored, build_b: Stored
) -> None:
    """Build A's worker answers `api/x` on A's page; build B's story, in the same browser while
    A's page is still open, gets B's own file. Once A's pages close, its worker is gone."""
    for renderer_a in _renderer(build_a):
        answered = renderer_a.take(snapshot(ANSWERS))
        assert answered.error is None, answered.error
        assert any("echo.js" in url for url in _service_workers(browser))
        (fetched,) = _take(build_b, FETCHES)
        assert fetched.error is None, fetched.error
    deadline = time.monotonic() + 5
    while _service_workers(browser) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _service_workers(browser) == []


def test_what_a_worker_fetches_reaches_nothing_but_the_build(
    browser: ChildBrowser, build_a: Stored, listeners: Listeners
) -> None:
    (shot,) = _take(build_a, ELSEWHERE)
    time.sleep(1.0)  # what was sent in the story's last moments arrives
    assert shot.error is None, shot.error
    assert listeners.reached == []


def test_a_worker_script_that_is_not_a_file_of_the_build_cannot_be_registered(
    browser: ChildBrowser, build_a: Stored, listeners: Listeners
) -> None:
    """One the build lacks, a blob's, another origin's: each refused (the story fails if one
    registers), and nothing reaches the other origin."""
    (shot,) = _take(build_a, FOREIGN)
    time.sleep(1.0)
    assert shot.error is None, shot.error
    assert listeners.reached == []


def test_a_worker_that_throws_never_activates_spins_or_never_ends_fails_its_own_story_alone(
    browser: ChildBrowser, build_a: Stored
) -> None:
    throws, never, spins, endless, thousand, plain = _take(
        build_a, THROWS, NEVER, SPINS, ENDLESS, THOUSAND, PLAIN, cap_seconds=CAP_SECONDS
    )
    cap = cap_message(CAP_SECONDS)
    assert throws.error is not None and "ServiceWorker" in throws.error, throws.error
    never_active = f"{cap}: waiting on a service worker that never activated"
    assert never.error == f"{never_active} (./worker-never.js)"
    assert spins.error == f"{never_active} (./worker-loops.js)"
    assert endless.error == f"{cap}: waiting on api/stream still loading"
    assert thousand.error == "the story registered more than 8 service workers"
    assert plain.error is None, plain.error
    for failed in (throws, never, spins, endless, thousand):
        assert failed.error is not None and "\n" not in failed.error
        assert failed.seconds < 2 * CAP_SECONDS + 5


def test_a_story_sees_nothing_the_story_before_it_stored(
    browser: ChildBrowser, build_a: Stored
) -> None:
    """localStorage, sessionStorage, a cookie, IndexedDB and Cache Storage: the reader shown
    after the story that stored a dark theme in each, before it, and on a page of its own,
    gives the same bytes (on a page that kept the theme, it is dark)."""
    sets, after = _take(build_a, SETS, READS)
    before, sets_after = _take(build_a, READS, SETS)
    (alone,) = _take(build_a, READS)
    for shot in (sets, after, before, sets_after, alone):
        assert shot.error is None, shot.error
    assert after.sha256 == before.sha256 == alone.sha256
    assert sets.sha256 == sets_after.sha256
    assert sets.sha256 != alone.sha256
