"""Motion timed by `Date` ends, and transient UI a play function shows stays in the shot, on a
real team's Storybook (`tests/fixtures/realworld/msw-sb10/`: chart.js 4, antd 5, msw 2).

chart.js times its tweens with `Date.now()`: with `Date` fixed, a chart was shot at its first
frame (empty bars, a flat line) on every run. antd's `message` leaves after 3 s and its
`notification` after 4.5 s: a clock run 10 s past every story took them out of the shot. And
they are drawn in a portal on `<body>`, outside the story's root, which the shot covered alone:
the notification (118 px tall at the top right) was cut at the root's 64 px.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser
from child.browser.render import StoryRenderer, png_size
from child.browser.site import Site
from child.storybook.stored import load
from ipc.artifacts.folder import FolderStore
from supervisor.builds.storybooks import store_storybook
from tests.browser.conftest import Stored, snapshot

MSW_SB10 = Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "msw-sb10"
CHARTS = (
    "charts-chartjs--line-chart",
    "charts-chartjs--bar-chart",
    "charts-chartjs--doughnut-chart",
)
TOASTS = {
    "feedback-toasts--message-success": ".ant-message-notice",
    "feedback-toasts--notification-open": ".ant-notification-notice",
}


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    artifacts = tmp_path_factory.mktemp("artifacts")
    return Stored(
        artifacts, store_storybook(FolderStore(artifacts), MSW_SB10 / "storybook-static").ref
    )


def test_a_chart_tweened_by_date_is_shot_complete(browser: ChildBrowser, team: Stored) -> None:
    """Each chart's shot is the one a second later still gives (the tween is over), and not
    its first frame."""
    build = load(for_job(str(team.artifacts), lambda: None), team.ref)
    with Site(build) as site, StoryRenderer(site) as renderer:
        for story_id in CHARTS:
            ended = renderer.take(snapshot(story_id))
            later = renderer.take(snapshot(story_id, delay_ms=1000))
            start = renderer.take(snapshot(story_id, pause_animation_at_end=False))
            assert ended.error is None and later.error is None and start.error is None
            assert ended.sha256 == later.sha256, story_id
            assert ended.sha256 != start.sha256, story_id


def test_a_toast_a_play_function_shows_is_still_shown_when_the_story_is_shot(
    browser: ChildBrowser, team: Stored
) -> None:
    build = load(for_job(str(team.artifacts), lambda: None), team.ref)
    with Site(build) as site, StoryRenderer(site) as renderer:
        for story_id, toast in TOASTS.items():
            shot = renderer.take(snapshot(story_id))
            assert shot.error is None, shot.error
            assert renderer.page is not None and shot.png is not None
            assert renderer.page.locator(toast).is_visible(), story_id
            box = renderer.page.locator(toast).bounding_box()
            assert box is not None
            # The shot reaches the toast's bottom (and the root's, below the message's).
            assert png_size(shot.png)[1] >= math.ceil(box["y"] + box["height"]), story_id


def test_a_story_after_a_toast_is_shot_alone_on_its_page_loaded_again(
    browser: ChildBrowser, team: Stored
) -> None:
    """The message the story before left on the page fails the next story's first try; it is
    tried again on the same page loaded again (same context: no fresh context's cold load),
    and its shot is the one it has alone."""
    build = load(for_job(str(team.artifacts), lambda: None), team.ref)
    toast, after = TOASTS
    with Site(build) as site, StoryRenderer(site) as renderer:
        alone = renderer.take(snapshot(after))
    with Site(build) as site, StoryRenderer(site) as renderer:
        assert renderer.take(snapshot(toast)).error is None
        assert renderer.page is not None
        context = renderer.page.context
        shot = renderer.take(snapshot(after))
        assert shot.error is None, shot.error
        assert renderer.page is not None and renderer.page.context is context
        assert not renderer.page.locator(TOASTS[toast]).is_visible()
    assert shot.sha256 == alone.sha256
