"""A build's page is kept from one capture job to the child's next of the same build
(`child.storybook.kept`): the next shard starts on a loaded preview instead of a fresh context.
Anything else gets a page of its own: another build, and the job after one that raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from child.browser.launch import ChildBrowser
from child.storybook import capture, kept, plan
from tests.browser.conftest import Stored, capture_payload, snapshot

STORIES = ("example-button--primary", "example-button--secondary")


class Cancelled(Exception):
    """What a job's progress raises when the host cancels it."""


def run(stored: Stored, build_id: int = 1, **changes: Any) -> dict[str, str]:
    payload = capture_payload(stored, [snapshot(story) for story in STORIES], **changes)
    payload["build_id"] = build_id
    results = capture.run(payload, lambda _: None)["snapshots"]
    assert [r["status"] for r in results] == ["new", "new"], results
    return {r["name"]: r["sha256"] for r in results}


def kept_page() -> Any:
    assert kept._kept is not None
    return kept._kept.renderer.page


def test_the_next_shard_of_a_build_reuses_its_page_with_the_same_pixels(
    browser: ChildBrowser, stored: Stored
) -> None:
    kept.close()
    first = run(stored)
    page = kept_page()
    assert page is not None and not page.is_closed()
    assert run(stored) == first
    assert kept_page() is page


def test_another_build_gets_a_page_of_its_own_and_the_old_one_is_closed(
    browser: ChildBrowser, stored: Stored
) -> None:
    first = run(stored, build_id=1)
    page = kept_page()
    assert run(stored, build_id=2) == first
    assert page.is_closed()
    assert kept_page() is not page


def test_a_job_that_raised_keeps_nothing(browser: ChildBrowser, stored: Stored) -> None:
    run(stored)
    page = kept_page()

    def cancel(report: dict[str, Any]) -> None:
        if report.get("story_id"):
            raise Cancelled

    payload = capture_payload(stored, [snapshot(story) for story in STORIES])
    with pytest.raises(Cancelled):
        capture.run(payload, cancel)
    assert kept._kept is None and page.is_closed()
    run(stored)  # and the next job opens a page of its own
    assert kept_page() is not page


def plan_payload(stored: Stored, build_id: int = 1) -> dict[str, Any]:
    """What a plan job's payload names, and `Warm` passes on: the build and where it is."""
    return {"artifacts": str(stored.artifacts), "build_id": build_id, "storybook": stored.ref}


def _preloaded(stored: Stored, build_id: int) -> bool:
    return kept.preload(plan_payload(stored, build_id), lambda: None)


def _planned(stored: Stored, build_id: int) -> bool:
    planned = plan.run(plan_payload(stored, build_id), lambda _: None)
    return planned["error"] is None and bool(planned["snapshots"])


@pytest.mark.parametrize("load", [_preloaded, _planned], ids=["told-it-is-coming", "planned"])
def test_a_page_loaded_ahead_is_the_first_shards_page_with_the_same_pixels(
    browser: ChildBrowser, stored: Stored, load: Callable[[Stored, int], bool]
) -> None:
    """A child told its build is coming loads the preview with no story shown, and the child
    that plans a build reads its stories in such a page (its clock running until the first
    story); the build's first capture job in that child switches to its first story through
    the channel on that page, and the bytes are those of a story captured on a page of its own."""
    kept.close()
    fresh = run(stored, build_id=2)
    kept.close()
    assert load(stored, 1)
    page = kept_page()
    assert page is not None and page.url.endswith("/iframe.html")
    assert run(stored, build_id=1) == fresh
    assert kept_page() is page


def test_the_clock_that_ran_while_the_plan_read_is_held_from_the_first_story(
    browser: ChildBrowser, stored: Stored
) -> None:
    """A plan's page keeps its timers running while the preview loads (nothing waits on looks
    to move them); from the first story shown on it, the page's time moves only when the
    renderer runs it, as on a page held from its start."""
    kept.close()
    assert plan.run(plan_payload(stored, build_id=1), lambda _: None)["error"] is None
    page = kept_page()
    now = "() => performance.now()"
    before = page.evaluate(now)
    page.wait_for_timeout(100)
    assert page.evaluate(now) > before  # running while nothing is shown
    run(stored, build_id=1)
    assert kept_page() is page
    held = page.evaluate(now)
    page.wait_for_timeout(100)
    assert page.evaluate(now) == held


def test_a_plan_whose_preview_fails_keeps_no_page(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """A preview that cannot say its stories fails the plan in the browser's words, and leaves
    the child no page of the build to capture on."""

    def throws(folder: Any) -> None:
        (folder / "iframe.html").write_text(
            "<!doctype html><script>throw new Error('no preview today')</script>"
        )

    kept.close()
    planned = plan.run(plan_payload(store_variant(throws), build_id=4), lambda _: None)
    assert planned["error"] is not None and "no preview today" in planned["error"]
    assert kept._kept is None


def test_a_page_loaded_ahead_for_another_build_is_closed_by_the_next_job(
    browser: ChildBrowser, stored: Stored
) -> None:
    assert kept.preload(plan_payload(stored, build_id=7), lambda: None)
    page = kept_page()
    run(stored, build_id=8)
    assert page.is_closed()


def test_a_preview_that_is_never_ready_is_not_kept_and_the_first_story_loads_it(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """A page without Storybook's preview (here: its script removed) is given up on within the
    preload's bound, and closed; the capture job then loads the page as it always did."""

    def no_preview(folder: Any) -> None:
        html = (folder / "iframe.html").read_text()
        (folder / "iframe.html").write_text(
            html.replace("<script", "<template").replace("</script>", "</template>")
        )

    broken = store_variant(no_preview)
    kept.close()
    assert not kept.preload(plan_payload(broken, build_id=3), lambda: None)
    assert kept._kept is not None and kept._kept.renderer.page is None


@pytest.mark.parametrize("load", [_preloaded, _planned], ids=["told-it-is-coming", "planned"])
def test_a_page_loaded_ahead_has_every_story_file_and_font_and_its_stories_request_none(
    browser: ChildBrowser, stored: Stored, load: Callable[[Stored, int], bool]
) -> None:
    """A page loaded ahead imports the build's story files one after another, and loads the
    fonts its styles declare, before it says it is ready: a story shown on it then waits on no
    request (and no quiet window after one), from whichever file it comes and whatever font it
    sets its text in (the fixture's web font), with the bytes of a page of its own. The plan's
    page has them all too (its files imported all at once by `extract()`)."""
    shots = [snapshot("example-card--with-text"), snapshot("example-font--web-font")]
    kept.close()
    alone = capture.run(capture_payload(stored, shots), lambda _: None)["snapshots"]
    kept.close()
    assert load(stored, 1)
    page = kept_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    results = capture.run(capture_payload(stored, shots), lambda _: None)["snapshots"]
    assert [r["sha256"] for r in results] == [r["sha256"] for r in alone], results
    assert kept_page() is page
    assert requests == []


def test_a_story_file_that_throws_on_import_fails_its_stories_and_not_the_page_loaded_ahead(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """The import ahead goes past a story file that throws as it is evaluated: the page is
    ready, the file's story fails as it does on a page of its own, the next story is captured."""

    def card_throws(folder: Any) -> None:
        (chunk,) = (folder / "assets").glob("Card.stories-*.js")
        chunk.write_text("throw new Error('Card file threw on import');\n")

    broken = store_variant(card_throws)
    shots = [snapshot("example-card--with-text"), snapshot("example-button--primary")]
    payload = capture_payload(broken, shots)
    payload["build_id"] = 4
    kept.close()
    alone = capture.run(payload, lambda _: None)["snapshots"]
    kept.close()
    assert _preloaded(broken, 4)
    results = capture.run(payload, lambda _: None)["snapshots"]
    assert [r["status"] for r in results] == ["failed", "new"], results
    assert results[0]["error"] == alone[0]["error"]
    assert results[1]["sha256"] == alone[1]["sha256"]


def test_a_page_loaded_ahead_leaves_fonts_for_other_scripts_to_their_stories(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """Fonts are loaded ahead for Latin text only: a family cut into unicode-range slices for
    another script (a CJK font's hundred slices) is left to load slice by slice as stories use
    them."""

    def cjk_face(folder: Any) -> None:
        html = (folder / "iframe.html").read_text()
        face = (
            "<style>@font-face { font-family: 'Fixture CJK'; unicode-range: U+4E00-9FFF;"
            " src: url('./fonts/inter-latin-400-normal.woff2') format('woff2'); }</style>"
        )
        (folder / "iframe.html").write_text(html.replace("</head>", face + "</head>", 1))

    variant = store_variant(cjk_face)
    kept.close()
    assert _preloaded(variant, 5)
    statuses = kept_page().evaluate(
        "() => Object.fromEntries([...document.fonts].map((face) => [face.family, face.status]))"
    )
    assert (statuses["Fixture Inter"], statuses["Fixture CJK"]) == ("loaded", "unloaded"), statuses


def test_a_plans_page_that_hangs_once_its_stories_are_read_is_not_kept_and_the_plan_stands(
    browser: ChildBrowser, store_variant: Any
) -> None:
    """After `extract()` the plan's page loads its fonts; a page that stops answering then (a
    story file spins when a font is asked to load) is ended by the watchdog and not kept: the
    plan has its stories all the same, and the first shard loads a page of its own."""

    def spins_after_fonts(folder: Any) -> None:
        (chunk,) = (folder / "assets").glob("Card.stories-*.js")
        spin = (
            "FontFace.prototype.load = function () {"
            " const t = performance.now(); while (performance.now() >= t) {} };\n"
        )
        chunk.write_text(chunk.read_text() + spin)

    hanging = store_variant(spins_after_fonts)
    kept.close()
    planned = plan.run(plan_payload(hanging, build_id=6), lambda _: None)
    assert planned["error"] is None and planned["snapshots"]
    assert kept._kept is not None and kept._kept.renderer.page is None
    payload = capture_payload(hanging, [snapshot("example-button--primary")])
    payload["build_id"] = 6
    results = capture.run(payload, lambda _: None)["snapshots"]
    assert [r["status"] for r in results] == ["new"], results
