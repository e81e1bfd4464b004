"""Where a story's shot covers (`child.browser.render.shot_area`): the agent's view of the page
in, the area in page coordinates and whether it reaches past the viewport out."""

from __future__ import annotations

from typing import Any

from child.browser.render import shot_area
from ipc.storybook import Crop, StorySnapshot


def _snapshot(crop: Crop) -> StorySnapshot:
    return {"story_id": "s--one", "crop": crop, "viewport": {"width": 800, "height": 600}}  # type: ignore[typeddict-item]


def _view(
    root: dict[str, int] | None,
    *,
    scroll: tuple[int, int] = (0, 0),
    page: tuple[int, int] = (800, 600),
) -> dict[str, Any]:
    return {"root": root, "scroll": list(scroll), "page": list(page)}


def test_a_root_inside_the_viewport_is_shot_as_it_is() -> None:
    root = {"x": 16, "y": 16, "width": 300, "height": 40}
    assert shot_area(_snapshot("root"), _view(root)) == ((16, 16, 300, 40), False)


def test_a_root_past_the_viewport_is_shot_whole_from_the_page() -> None:
    root = {"x": 0, "y": 8, "width": 800, "height": 1500}
    view = _view(root, page=(800, 1508))
    assert shot_area(_snapshot("root"), view) == ((0, 8, 800, 1500), True)


def test_a_root_is_cut_to_the_page_and_one_outside_it_leaves_nothing() -> None:
    wider = {"x": -20, "y": 0, "width": 900, "height": 40}
    assert shot_area(_snapshot("root"), _view(wider, page=(880, 600))) == ((0, 0, 880, 40), True)
    away = {"x": -500, "y": 0, "width": 100, "height": 40}
    assert shot_area(_snapshot("root"), _view(away)) == (None, True)


def test_an_empty_root_and_a_viewport_crop_shoot_the_viewport_where_it_is_scrolled() -> None:
    empty = {"x": 0, "y": 0, "width": 0, "height": 0}
    for snapshot, view in (
        (_snapshot("root"), _view(empty, scroll=(0, 120), page=(800, 2000))),
        (_snapshot("root"), _view(None, scroll=(0, 120), page=(800, 2000))),
        (_snapshot("viewport"), _view(None, scroll=(0, 120), page=(800, 2000))),
    ):
        assert shot_area(snapshot, view) == ((0, 120, 800, 600), False)


def test_a_page_crop_covers_the_whole_page_and_says_when_it_is_taller_than_the_viewport() -> None:
    assert shot_area(_snapshot("page"), _view(None, page=(800, 2000))) == ((0, 0, 800, 2000), True)
    assert shot_area(_snapshot("page"), _view(None)) == ((0, 0, 800, 600), False)


def test_what_the_story_drew_in_portals_is_shot_with_its_root() -> None:
    root = {"x": 0, "y": 0, "width": 800, "height": 64}
    notification = {"x": 600, "y": 24, "width": 184, "height": 94}
    view = {**_view(root), "portals": notification}
    assert shot_area(_snapshot("root"), view) == ((0, 0, 800, 118), False)
    # A modal's mask over the whole viewport: the viewport is shot.
    view["portals"] = {"x": 0, "y": 0, "width": 800, "height": 600}
    assert shot_area(_snapshot("root"), view) == ((0, 0, 800, 600), False)
    # The viewport crop and the page's are what they were.
    assert shot_area(_snapshot("viewport"), view) == ((0, 0, 800, 600), False)
