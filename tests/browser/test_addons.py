"""How the capture's page treats the addons a team's Storybook carries: on a real build that has
them (tests/fixtures/realworld/vue-sb9: Storybook 9 with addon-a11y and addon-themes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser
from child.browser.render import StoryRenderer
from child.browser.site import Site
from child.storybook.stored import load
from ipc.artifacts.folder import FolderStore
from supervisor.builds.storybooks import store_storybook
from tests.browser.conftest import Stored, snapshot

VUE_SB9 = Path(__file__).resolve().parents[1] / "fixtures" / "realworld" / "vue-sb9"

#: What the page says of the accessibility addon: its global, and whether axe's file was loaded
#: (the addon imports it the first time it checks a story).
ACCESSIBILITY = """() => ({
    a11y: window.__STORYBOOK_PREVIEW__.storyStoreValue.userGlobals.get().a11y,
    theme: window.__STORYBOOK_PREVIEW__.storyStoreValue.userGlobals.get().theme,
    axe: performance.getEntriesByType('resource').some((entry) => /\\/axe-[^/]*\\.js$/.test(entry.name)),
})"""


@pytest.fixture(scope="module")
def vue(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    artifacts = tmp_path_factory.mktemp("artifacts")
    return Stored(
        artifacts, store_storybook(FolderStore(artifacts), VUE_SB9 / "storybook-static").ref
    )


@pytest.mark.parametrize(
    "preloaded", [True, False], ids=["page-loaded-ahead", "page-loaded-for-a-story"]
)
def test_the_accessibility_addons_automatic_checks_do_not_run_in_the_capture(
    browser: ChildBrowser, vue: Stored, preloaded: bool
) -> None:
    """addon-a11y runs axe over every story before Storybook says it finished, unless its
    `a11y.manual` global is set: the capture sets it, so no story waits on axe (its file is
    never loaded), and a mode's globals still apply over it."""
    shots = [
        snapshot("actions-button--primary"),
        snapshot("actions-button--danger", globals={"theme": "dark"}),
        snapshot("data-tag--default"),
    ]
    with Site(load(for_job(str(vue.artifacts)), vue.ref)) as site, StoryRenderer(site) as renderer:
        if preloaded:
            assert renderer.preload(shots[0]["viewport"])
        seen: list[dict[str, Any]] = []
        for shot in shots:
            assert renderer.take(shot).png, shot["story_id"]
            assert renderer.page is not None
            seen.append(renderer.page.evaluate(ACCESSIBILITY))
    assert [state["a11y"] for state in seen] == [{"manual": True}] * 3
    assert not any(state["axe"] for state in seen)
    assert [state["theme"] == "dark" for state in seen] == [False, True, False]
