"""The build report as a reviewer uses it: a real report of a real build, driven in Chromium.

Two folders of PNGs are uploaded and captured in-process (`tests.capture_helpers.run_build`,
which writes the report as the host does) on a SQLite database: the page is the same on
PostgreSQL, and the database's part of the report is tested on both in
`tests/database/test_report.py`. The report is opened from disk (`file://`), as people open it,
and every test checks that the page logged no error and that no request failed.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pyvips
from playwright.sync_api import ConsoleMessage, Page, Request
from sqlalchemy import Engine

from child.browser.launch import ChildBrowser
from child.report.crop import crop_of
from ipc.build_view import BuildView
from supervisor.builds.view import load_build
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from tests.capture_helpers import run_build, write_png

SIZE = (160, 120)
BLUE = (37, 99, 235)
#: One pixel of the `pixel` screen changes: the crop must find it without hunting.
DOT = (100, 70)
VIEWPORT = {"width": 1280, "height": 800}
#: Where a snapshot moved to with the keys stops: under the sticky toolbar (report.css).
SCROLL_MARGIN_PX = 96


@dataclass(frozen=True)
class Built:
    """The branch build's view and its report file."""

    view: BuildView
    report: Path


def _screens(folder: Path, *, branch: bool) -> None:
    """Two changed screens (a button that moved, one pixel), two unchanged, and on the branch a
    new one and a broken one."""
    write_png(folder / "button.png", size=SIZE, marks=((44 if branch else 40, 40, 40, 20),))
    write_png(folder / "pixel.png", size=SIZE, marks=((*DOT, 1, 1),) if branch else ())
    write_png(folder / "card.png", size=SIZE, marks=((20, 20, 100, 60),), colour=(200, 200, 200))
    write_png(folder / "logo.png", size=SIZE, marks=((10, 10, 16, 16),), colour=(22, 163, 74))
    if branch:
        write_png(folder / "badge.png", size=SIZE, marks=((60, 50, 30, 12),), colour=BLUE)
        (folder / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    folder = tmp_path_factory.mktemp("report-page")
    engine: Engine = connect(f"sqlite:///{folder / 'storyshelf.db'}")
    upgrade(engine)
    artifacts = folder / "artifacts"
    try:
        _screens(folder / "main", branch=False)
        _screens(folder / "feature", branch=True)
        run_build(engine, artifacts, folder / "main")
        queued = run_build(engine, artifacts, folder / "feature", branch="feature")
        with engine.connect() as conn:
            view = load_build(conn, queued.build_id)
    finally:
        engine.dispose()
    assert view is not None and view.report_url is not None
    yield Built(view, Path(view.report_url))


@dataclass
class Opened:
    """The report in a fresh page, with what it asked for and what went wrong."""

    page: Page
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def requested(self, path: str | None) -> bool:
        """Whether the page asked for the artifact at `path` (relative to the artifacts root)."""
        assert path is not None
        return any(url.endswith(path) for url in self.requests)


@pytest.fixture
def opened(built: Built, browser: ChildBrowser) -> Iterator[Opened]:
    """The report, loaded in the child's own browser (`conftest.browser`: the process has one
    Playwright driver, which the child's launcher owns)."""
    with opening(browser, built.report) as state:
        yield state


@contextmanager
def opening(browser: ChildBrowser, report: Path) -> Iterator[Opened]:
    """`report` in a fresh page; when done, no console error, page error or failed request."""
    context = browser.browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    page = context.new_page()
    state = Opened(page)

    def console(message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            state.problems.append(f"console {message.type}: {message.text}")

    def failed(request: Request) -> None:
        state.problems.append(f"request failed: {request.url} {request.failure}")

    page.on("console", console)
    page.on("pageerror", lambda error: state.problems.append(f"page error: {error}"))
    page.on("requestfailed", failed)
    page.on("request", lambda request: state.requests.append(request.url))
    try:
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        yield state
    finally:
        context.close()
    assert state.problems == []


def visible(page: Page) -> list[str]:
    """The statuses of the snapshots the page shows, in order."""
    shown: list[str] = page.evaluate(
        "Array.from(document.querySelectorAll('.snapshot'))"
        ".filter(s => s.checkVisibility()).map(s => s.dataset.status)"
    )
    return shown


def section(built: Built, name: str) -> str:
    """A selector for the section of snapshot `name`."""
    label = next(s.label for s in built.view.snapshots if s.name == name)
    return f".snapshot:has(h3:text-is('{label}'))"


def test_the_build_is_as_the_test_means_it(built: Built) -> None:
    statuses = {s.name: s.status for s in built.view.snapshots}
    assert statuses == {
        "badge": "new",
        "broken": "failed",
        "button": "changed",
        "card": "unchanged",
        "logo": "unchanged",
        "pixel": "changed",
    }
    pixel = next(s for s in built.view.snapshots if s.name == "pixel")
    assert pixel.diff_box == (*DOT, 1, 1)


def test_the_filter_shows_only_the_chosen_status(opened: Opened) -> None:
    page = opened.page
    assert visible(page) == ["changed", "changed", "failed", "new", "unchanged", "unchanged"]
    for status, count in (("changed", 2), ("failed", 1), ("new", 1), ("unchanged", 2)):
        page.get_by_role("button", name=f"{status} ({count})", exact=True).click()
        assert visible(page) == [status] * count
        assert page.locator(f"[data-show={status}]").get_attribute("aria-pressed") == "true"
        assert page.locator(".group:visible h2").all_inner_texts()[0].lower().startswith(status)
    page.get_by_role("button", name="all (6)", exact=True).click()
    assert len(visible(page)) == 6


def test_the_crop_shows_the_changed_area_enlarged(built: Built, opened: Opened) -> None:
    """The one changed pixel is in the crop, at the place and scale `crop_of` says, marked on
    baseline and new, and red in the diff's crop as the browser draws it."""
    page = opened.page
    pixel = next(s for s in built.view.snapshots if s.name == "pixel")
    assert pixel.diff_box is not None
    crop = crop_of(pixel.diff_box, (SIZE[0], SIZE[1]))
    frames = page.locator(f"{section(built, 'pixel')} .crop-frame")
    assert frames.count() == 3
    page.wait_for_function(
        "Array.from(document.querySelectorAll('.crop-frame img'))"
        ".every(i => i.complete && i.naturalWidth > 0)"
    )
    for index in range(3):
        frame = frames.nth(index)
        inside = frame.evaluate("f => [f.clientWidth, f.clientHeight]")
        assert inside == [crop.width * crop.scale, crop.height * crop.scale]
        transform = frame.locator("img").evaluate("i => getComputedStyle(i).transform")
        s = crop.scale
        assert transform == f"matrix({s:g}, 0, 0, {s:g}, {-crop.left * s:g}, {-crop.top * s:g})"
        assert frame.locator("img").evaluate("i => getComputedStyle(i).imageRendering") == (
            "pixelated"
        )
    mark = frames.nth(1).locator(".mark").bounding_box()
    image = frames.nth(1).locator("img").bounding_box()
    assert mark is not None and image is not None
    in_image = tuple(
        round(value / crop.scale)
        for value in (
            mark["x"] - image["x"],
            mark["y"] - image["y"],
            mark["width"],
            mark["height"],
        )
    )
    assert in_image == pixel.diff_box

    shot = pyvips.Image.new_from_buffer(frames.nth(2).screenshot(), "")
    red = (shot[0] > 200) & (shot[1] < 60) & (shot[2] < 60)
    assert red.avg() * shot.width * shot.height >= crop.scale**2  # one pixel, enlarged
    left, top = (value - origin for value, origin in zip(DOT, (crop.left, crop.top), strict=True))
    centre = shot.crop(
        int((left + 0.5) * crop.scale) - 1, int((top + 0.5) * crop.scale) - 1, 2, 2
    ).getpoint(0, 0)
    assert centre[0] > 200 and centre[1] < 60, centre


def test_the_slider_moves_the_line_between_baseline_and_new(built: Built, opened: Opened) -> None:
    page = opened.page
    snapshot = page.locator(section(built, "button"))
    over = snapshot.locator(".stack .over")
    assert not over.is_visible()
    snapshot.get_by_role("button", name="overlay", exact=True).click()
    assert over.is_visible() and not snapshot.locator(".sides").is_visible()
    clip = "i => getComputedStyle(i).clipPath"
    assert over.evaluate(clip) == "inset(0px 0px 0px 50%)"
    snapshot.locator("input.reveal").fill("20")
    assert over.evaluate(clip) == "inset(0px 0px 0px 20%)"
    snapshot.locator("input.reveal").fill("100")
    assert over.evaluate(clip) == "inset(0px 0px 0px 100%)"
    snapshot.get_by_role("button", name="side by side", exact=True).click()
    assert snapshot.locator(".sides").is_visible() and not over.is_visible()


def test_blink_alternates_baseline_and_new_until_turned_off(built: Built, opened: Opened) -> None:
    page = opened.page
    snapshot = page.locator(section(built, "button"))
    snapshot.get_by_role("button", name="overlay", exact=True).click()
    over = snapshot.locator(".stack .over")
    blink = snapshot.get_by_role("button", name="blink", exact=True)
    shown = "i => getComputedStyle(i).visibility + ' ' + getComputedStyle(i).clipPath"

    def watch(seconds: float) -> list[str]:
        seen = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            seen.append(over.evaluate(shown))
            page.wait_for_timeout(50)
        return seen

    blink.click()
    assert blink.get_attribute("aria-pressed") == "true"
    seen = watch(1.6)
    # baseline alone (new hidden), new alone (new unclipped)
    assert set(seen) == {"hidden inset(0px 0px 0px 50%)", "visible none"}
    flips = sum(1 for a, b in itertools.pairwise(seen) if a != b)
    assert 2 <= flips <= 4  # every 500 ms
    assert snapshot.locator(".showing").inner_text() in ("showing baseline", "showing new")

    blink.click()
    assert blink.get_attribute("aria-pressed") == "false"
    assert set(watch(1.2)) == {"visible inset(0px 0px 0px 50%)"}  # the slider's view again


def test_j_and_k_move_the_current_snapshot_among_those_the_filter_shows(
    built: Built, opened: Opened
) -> None:
    page = opened.page
    page.set_viewport_size({"width": VIEWPORT["width"], "height": 400})  # so that moving scrolls

    def current() -> str:
        marked: list[str] = page.evaluate(
            "Array.from(document.querySelectorAll('.snapshot.current'))"
            ".map(s => s.querySelector('h3').textContent.replace(s.dataset.status, '').trim())"
        )
        assert len(marked) == 1, marked
        # Scrolled to just under the toolbar (its scroll margin), or as far as the page goes.
        top, at_end = page.locator(".snapshot.current").evaluate(
            "s => [s.getBoundingClientRect().top,"
            " scrollY + innerHeight >= document.documentElement.scrollHeight - 1]"
        )
        assert round(top) == SCROLL_MARGIN_PX or (at_end and 0 <= top < 400), (top, at_end)
        return marked[0]

    order = ["button", "pixel", "broken", "badge", "card", "logo"]
    page.keyboard.press("j")
    assert current() == order[0]
    for name in order[1:]:
        page.keyboard.press("j")
        assert current() == name
    page.keyboard.press("j")
    assert current() == "logo"  # the last stays current
    page.keyboard.press("k")
    assert current() == "card"
    page.keyboard.press("ArrowLeft")
    assert current() == "badge"
    page.keyboard.press("ArrowRight")
    assert current() == "card"
    assert page.locator(".snapshot.current").get_attribute("aria-current") == "true"

    page.get_by_role("button", name="changed (2)", exact=True).click()
    page.keyboard.press("k")  # from a snapshot the filter hides, to the nearest it shows
    assert current() == "pixel"
    page.keyboard.press("k")
    assert current() == "button"
    page.keyboard.press("j")
    assert current() == "pixel"
    page.keyboard.press("j")
    assert current() == "pixel"  # the unchanged ones are hidden


def test_o_and_b_overlay_and_blink_the_current_snapshot(built: Built, opened: Opened) -> None:
    page = opened.page
    snapshot = page.locator(section(built, "button"))
    blink = snapshot.locator("button.blink")  # hidden with the overlay, unlike a role's match
    page.keyboard.press("j")
    page.keyboard.press("o")
    assert snapshot.locator(".overlay").is_visible()
    page.keyboard.press("b")
    assert blink.get_attribute("aria-pressed") == "true"
    page.keyboard.press("b")
    assert blink.get_attribute("aria-pressed") == "false"
    page.keyboard.press("b")
    page.keyboard.press("o")  # back to side by side, which stops the blinking
    assert snapshot.locator(".sides").is_visible() and not snapshot.locator(".overlay").is_visible()
    assert blink.get_attribute("aria-pressed") == "false"
    assert snapshot.locator(".stack").get_attribute("data-blink") is None


def test_a_click_zooms_an_image_and_escape_or_a_click_closes_it(
    built: Built, opened: Opened
) -> None:
    page = opened.page
    snapshot = page.locator(section(built, "button"))
    dialog = page.locator("dialog.zoom")
    snapshot.locator(".sides img").nth(1).click()
    assert dialog.is_visible()
    zoomed = dialog.locator("img")
    width = zoomed.evaluate("i => i.naturalWidth")
    shown = zoomed.bounding_box()
    assert width == SIZE[0] and shown is not None
    assert shown["width"] >= width and shown["width"] % width == 0  # 1:1 or a whole zoom
    assert "new" in dialog.inner_text()
    page.keyboard.press("j")  # keys wait while zoomed
    assert page.locator(".snapshot.current").count() == 1  # the click marked it; j did not move
    page.keyboard.press("Escape")
    assert not dialog.is_visible()

    snapshot.locator(".crop-frame").first.click()
    assert dialog.is_visible() and "baseline" in dialog.inner_text()
    dialog.click()
    assert not dialog.is_visible()


def test_unchanged_images_load_only_when_asked(built: Built, opened: Opened) -> None:
    page = opened.page
    page.evaluate("window.scrollTo(0, document.body.scrollHeight)")  # lazy images would start
    page.wait_for_timeout(300)
    unchanged = {s.name: s.image_path for s in built.view.snapshots if s.status == "unchanged"}
    changed = next(s for s in built.view.snapshots if s.name == "button")
    assert opened.requested(changed.image_path)
    assert not any(opened.requested(path) for path in unchanged.values())

    card = page.locator(section(built, "card"))
    assert card.locator("img").get_attribute("src") is None
    card.get_by_role("button", name="show image", exact=True).click()
    card.locator("img").evaluate(
        "i => i.complete && i.naturalWidth ? true"
        " : new Promise(done => i.addEventListener('load', () => done(true)))"
    )
    assert card.locator("img").evaluate("i => i.naturalWidth") == SIZE[0]
    assert opened.requested(unchanged["card"]) and not opened.requested(unchanged["logo"])
    card.get_by_role("button", name="hide image", exact=True).click()
    assert not card.locator("img").is_visible()

    page.get_by_role("button", name="show all images", exact=True).click()
    logo = page.locator(section(built, "logo")).locator("img")
    logo.evaluate(
        "i => i.complete && i.naturalWidth ? true"
        " : new Promise(done => i.addEventListener('load', () => done(true)))"
    )
    assert opened.requested(unchanged["logo"])
    assert page.locator(section(built, "card")).locator("img").is_visible()


#: A toolbar as wide as a laptop's page and a button's height, and a panel of a common shape.
STRIP = (1168, 42)
PANEL = (400, 300)


@pytest.fixture(scope="module")
def strips(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """A build whose two snapshots changed: the wide, short toolbar and the panel."""
    folder = tmp_path_factory.mktemp("report-strips")
    engine: Engine = connect(f"sqlite:///{folder / 'storyshelf.db'}")
    upgrade(engine)
    try:
        for branch, left in (("main", 40), ("feature", 48)):
            write_png(folder / branch / "toolbar.png", size=STRIP, marks=((left, 10, 80, 22),))
            write_png(folder / branch / "panel.png", size=PANEL, marks=((left, 40, 120, 60),))
            queued = run_build(engine, folder / "artifacts", folder / branch, branch=branch)
        with engine.connect() as conn:
            view = load_build(conn, queued.build_id)
    finally:
        engine.dispose()
    assert view is not None and view.report_url is not None
    assert {s.name: s.status for s in view.snapshots} == {"panel": "changed", "toolbar": "changed"}
    return Built(view, Path(view.report_url))


def test_a_wide_short_snapshot_shows_its_images_one_above_the_other_at_a_readable_height(
    strips: Built, browser: ChildBrowser
) -> None:
    """The toolbar's baseline, new and diff each keep (nearly) their height and fit the window;
    the panel's stay side by side."""
    with opening(browser, strips.report) as opened:
        page = opened.page

        def shown(name: str) -> list[dict[str, float]]:
            images = page.locator(f"{section(strips, name)} .sides img")
            assert images.count() == 3
            images.first.scroll_into_view_if_needed()
            boxes: list[dict[str, float]] = images.evaluate_all(
                "images => Promise.all(images.map(i => i.decode()))"
                ".then(() => images.map(i => i.getBoundingClientRect().toJSON()))"
            )
            return boxes

        window = page.evaluate("document.documentElement.clientWidth")
        strip = shown("toolbar")
        assert all(box["height"] >= 0.8 * STRIP[1] for box in strip), strip
        assert all(box["left"] >= 0 and box["right"] <= window for box in strip), strip
        tops = [box["top"] for box in strip]
        assert tops == sorted(tops) and len(set(tops)) == 3  # one above the other

        panel = shown("panel")
        assert len({box["top"] for box in panel}) == 1, panel  # in one row
        lefts = [box["left"] for box in panel]
        assert lefts == sorted(lefts) and len(set(lefts)) == 3
