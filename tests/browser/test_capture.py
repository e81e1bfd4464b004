"""Capturing the fixture's stories in a real Chromium, through the capture handler itself.

One capture of every planned story (but the hang, which costs the render cap and has its own
module) is shared by the tests here; each then looks at one promise: the stored images, the
failure of the throwing story, paused animations, the play function, the crop, blocked requests,
the web font, and byte-identical PNGs from a second, separately launched browser.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import pyvips
from structlog.testing import capture_logs

from child.artifacts.access import for_job
from child.browser.frames import advance
from child.browser.launch import ChildBrowser, launch
from child.browser.render import StoryRenderer
from child.browser.site import Site
from child.storybook import capture, plan
from child.storybook.stored import load
from ipc.capture import RESULT_FIELDS as CAPTURE_RESULT_FIELDS
from ipc.storybook import MAX_SHOTS, STORY_RESULT_FIELDS, StorySnapshot
from tests.browser.conftest import Stored, capture_payload, snapshot

HANG = "example-hang--main-thread-hang"
THROWS = "example-broken--throws-in-render"
#: Stories that draw something new on every render, in their ignore regions.
LIVE = "example-ignore--"
RESULT_FIELDS = {*CAPTURE_RESULT_FIELDS, *STORY_RESULT_FIELDS}


@pytest.fixture(scope="module")
def shots(browser: ChildBrowser, stored: Stored) -> list[StorySnapshot]:
    planned = plan.run(
        {"artifacts": str(stored.artifacts), "build_id": 1, "storybook": stored.ref}, lambda _: None
    )
    assert planned["error"] is None
    return [shot for shot in planned["snapshots"] if shot["story_id"] != HANG]


@pytest.fixture(scope="module")
def captured(
    browser: ChildBrowser, stored: Stored, shots: list[StorySnapshot]
) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """Results by name, the progress reports, and the logs of one capture of every shot."""
    reports: list[dict[str, Any]] = []
    with capture_logs() as logs:
        result = capture.run(capture_payload(stored, shots), reports.append)
    return {r["name"]: r for r in result["snapshots"]}, reports, logs


def image(stored: Stored, result: dict[str, Any]) -> pyvips.Image:
    return pyvips.Image.new_from_file(str(stored.artifacts / result["image"]))


def pixel(picture: pyvips.Image, x: int, y: int) -> tuple[int, ...]:
    return tuple(int(v) for v in picture(x, y)[:3])


def test_every_story_but_the_broken_one_is_stored_content_addressed(
    captured: Any, stored: Stored, shots: list[StorySnapshot]
) -> None:
    results, reports, _ = captured
    assert set(results) == {shot["name"] for shot in shots}
    for name, result in results.items():
        assert set(result) == RESULT_FIELDS
        if name == THROWS:
            continue
        assert result["status"] == "new", (name, result["error"])
        assert result["settled"] is True, name
        data = (stored.artifacts / result["image"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == result["sha256"]
        assert result["image"] == f"images/{result['sha256'][:2]}/{result['sha256']}.png"
    stories = [r for r in reports if "story_id" in r]  # one after each story; beats between
    assert [r["done"] for r in stories] == list(range(1, len(shots) + 1))
    assert reports[0] == {"done": 0, "total": len(shots)}  # the browser is up
    beats = [r for r in reports if r.get("waiting")]
    assert all(r["done"] < len(shots) for r in beats)
    assert [r["story_id"] for r in stories] == [shot["story_id"] for shot in shots]
    assert not list((stored.artifacts / ".scratch").glob("*")), "no scratch file is left"


def test_a_story_that_throws_fails_with_its_message(captured: Any) -> None:
    result = captured[0][THROWS]
    assert result["status"] == "failed"
    assert "Broken story: render threw on purpose" in result["error"]
    assert result["image"] is None and result["sha256"] is None


def test_animations_are_paused_at_their_end_or_at_their_first_frame(
    captured: Any, stored: Stored
) -> None:
    results = captured[0]
    at_start = image(stored, results["example-motion--animation-at-start"])
    # The slide's first frame: accent colour at the left; its last would be primary at 160 px.
    assert pixel(at_start, 20, 20) == (0xDB, 0x27, 0x77)
    assert pixel(at_start, 180, 20) == (255, 255, 255)
    faded = image(stored, results["example-motion--fade-in"])
    assert faded.min() < 100, "the fade-in is captured at its end, its text opaque"


#: Starts an animation of a minute on the page, held in `window.minute`.
START_MINUTE = """() => {
  const box = document.body.appendChild(document.createElement('div'));
  window.minute = box.animate([{ opacity: 0 }, { opacity: 1 }], 60000);
}"""


def test_animations_run_fast_unless_the_story_is_paused_at_its_first_frame(
    browser: ChildBrowser, stored: Stored
) -> None:
    """Storybook 9 and later wait for running animations before a story finishes, in real
    time: a story whose animations are paused at their end runs them at `ANIMATION_RATE` times
    real time (its pixels are those of the end either way); one paused at its first frame keeps
    the real pace, so that a short animation is still there to be paused at its start. The
    page's animations move on the frames begun for it, as the renderer's looks begin them."""
    story = "example-button--primary"
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        reached = []
        for at_end in (True, False, True):
            assert renderer.take(snapshot(story, pause_animation_at_end=at_end)).error is None
            page = renderer.page
            assert page is not None
            # How far it gets in 200 ms of real time (the page's `Date` and timers are held).
            page.evaluate(START_MINUTE)
            frames = page.context.new_cdp_session(page)
            for _ in range(10):
                page.wait_for_timeout(20)
                advance(frames)
            reached.append(page.evaluate("() => window.minute.currentTime"))
    fast, real, fast_again = reached
    assert fast > 20 * 200 and fast_again > 20 * 200, reached
    assert real < 20 * 200, reached


def test_the_play_function_ran_before_the_capture(captured: Any, stored: Stored) -> None:
    results = captured[0]
    played = image(stored, results["example-interactive--play-reveals"])
    button = image(stored, results["example-button--primary"])
    assert played.height > button.height + 20, "the revealed paragraph is in the shot"


def test_the_shot_is_the_story_roots_box(captured: Any, stored: Stored) -> None:
    results = captured[0]
    card = image(stored, results["example-card--with-text"])
    # layout "padded": the root spans the 1200 px viewport less 16 px of padding each side,
    # and is as tall as the card.
    assert card.width == 1200 - 2 * 16
    assert 60 < card.height < 200
    wide = image(stored, results["example-viewports--chromatic-widths [320]"])
    assert wide.width == 320, "layout fullscreen: the root spans the viewport"


def test_an_external_image_is_blocked_logged_and_not_waited_for(captured: Any) -> None:
    _, _, logs = captured
    blocked = [entry for entry in logs if entry["event"] == "request blocked"]
    assert [(entry["url"], entry["story_id"]) for entry in blocked] == [
        ("https://example.com/x.png", "example-images--external-image")
    ]


def test_a_blocked_request_costs_no_wait(browser: ChildBrowser, stored: Stored) -> None:
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        renderer.take(snapshot("example-button--primary"))
        taken = renderer.take(snapshot("example-images--external-image"))
    assert taken.error is None
    assert taken.seconds < 2.0


def test_the_web_font_is_rendered_not_its_fallback(
    captured: Any,
    browser: ChildBrowser,
    stored: Stored,
    store_variant: Callable[[Callable[[Path], None]], Stored],
) -> None:
    without_font = store_variant(
        lambda folder: (folder / "fonts/inter-latin-400-normal.woff2").unlink()
    )
    result = capture.run(
        capture_payload(without_font, [snapshot("example-font--web-font")]), lambda _: None
    )
    fallback = result["snapshots"][0]
    assert fallback["status"] == "new"
    web_font = captured[0]["example-font--web-font"]
    assert image(stored, web_font).min() < 100, "the text is shown, not blank"
    assert fallback["sha256"] != web_font["sha256"]


#: The fixture's card hidden until a chain of 3,000 requests for data: URLs has come, by fetch
#: (and its body read) and by XMLHttpRequest in turn: a story filled in from data inlined in
#: the build (an icon set's, a fixture's).
FILLED_IN_LATE = (
    "render:t=>{const c=e(t);c.style.visibility='hidden';let p=Promise.resolve();"
    "for(let i=0;i<3000;i++)p=p.then(()=>i%2?fetch('data:text/plain,'+i).then(r=>r.text())"
    ":new Promise(d=>{const x=new XMLHttpRequest();x.open('GET','data:text/plain,'+i);"
    "x.onloadend=d;x.send()}));p.then(()=>{c.style.visibility=''});return c}"
)


def test_what_a_story_fetches_from_a_data_url_is_waited_for(
    captured: Any, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    """The driver reports no request for a data: URL, so no quiet window waits for one; the
    page's own count of what its scripts fetched does. The card shown once its data came is
    the card of the unchanged build."""

    def filled_in_late(folder: Path) -> None:
        (chunk,) = (folder / "assets").glob("Card.stories-*.js")
        text = chunk.read_text()
        assert "render:t=>e(t)" in text
        chunk.write_text(text.replace("render:t=>e(t)", FILLED_IN_LATE, 1))

    late = store_variant(filled_in_late)
    payload = capture_payload(late, [snapshot("example-card--with-text")])
    payload["build_id"] = 7
    (result,) = capture.run(payload, lambda _: None)["snapshots"]
    assert result["sha256"] == captured[0]["example-card--with-text"]["sha256"], result


def test_a_second_browser_gives_byte_identical_pngs_in_any_order(
    captured: Any, stored: Stored, shots: list[StorySnapshot]
) -> None:
    second = launch()
    try:
        with (
            Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
            StoryRenderer(site, browser=lambda: second) as renderer,
        ):
            again = {shot["name"]: renderer.take(shot) for shot in reversed(shots)}
    finally:
        second.close()
    differing = sorted(
        name
        for name, result in captured[0].items()
        if result["sha256"] is not None and again[name].sha256 != result["sha256"]
    )
    assert differing == [name for name in sorted(captured[0]) if name.startswith(LIVE)]


def test_motion_driven_by_script_is_captured_at_its_end_or_its_first_frame(
    captured: Any, stored: Stored
) -> None:
    """requestAnimationFrame, setInterval and setTimeout, SVG SMIL and the Web Animations API
    run on the page's held clock: each story shows the same state on every run."""
    results = captured[0]
    primary, track = (29, 78, 216), (229, 231, 235)
    grown = image(stored, results["example-clock--animation-frame"])
    assert pixel(grown, 295, 10) == primary, "the tween ran to its end"
    at_start = image(stored, results["example-clock--animation-frame-at-start"])
    assert pixel(at_start, 295, 10) == track, "pauseAnimationAtEnd: false holds it near its start"
    smil = image(stored, results["example-clock--smil"])
    assert pixel(smil, 230, 30) != (255, 255, 255), "the circle moved to its end"
    assert pixel(smil, 30, 30) == (255, 255, 255)
    web = image(stored, results["example-clock--web-animation"])
    assert web.width == grown.width and pixel(web, 295, 10) == primary
    assert (
        results["example-clock--web-animation"]["sha256"]
        == (results["example-clock--animation-frame"]["sha256"])
    ), "the same full bar, drawn two ways"


def test_timers_run_to_the_same_end_on_every_run(browser: ChildBrowser, stored: Stored) -> None:
    story = snapshot("example-clock--interval-and-timeout")
    texts = []
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        for shot in (story, snapshot("example-button--primary"), story):
            assert renderer.take(shot).error is None
            assert renderer.page is not None
            texts.append(renderer.page.inner_text("#storybook-root"))
    assert texts[0] == texts[2] == "20 done"


def test_the_clock_is_frozen_and_random_seeded_wherever_the_story_comes(
    browser: ChildBrowser, stored: Stored
) -> None:
    story = snapshot("example-nondeterministic--date-and-random")
    texts = []
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        for shot in (story, snapshot("example-button--primary"), story):
            assert renderer.take(shot).error is None
            assert renderer.page is not None
            texts.append(renderer.page.inner_text("#storybook-root"))
    first, _, switched = texts
    assert first.startswith("now: 2024-01-01T12:00:00.000Z\nrandom: 0.")
    assert switched == first, "a story switched to draws what it draws when it opens the page"


@pytest.mark.parametrize(("crop", "size"), [("viewport", (1200, 900)), ("page", (1200, 900))])
def test_a_story_may_ask_for_the_viewport_or_the_whole_page(
    browser: ChildBrowser, stored: Stored, crop: str, size: tuple[int, int]
) -> None:
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        taken = renderer.take(snapshot("example-card--with-text", crop=crop))
    assert taken.png is not None
    picture = pyvips.Image.new_from_buffer(taken.png, "")
    assert (picture.width, picture.height) == size


@pytest.mark.parametrize(("crop", "size"), [("root", (268, 111)), ("page", (300, 143))])
def test_a_shot_past_the_viewport_is_drawn_whole_and_leaves_the_viewport_as_it_was(
    browser: ChildBrowser, stored: Stored, crop: str, size: tuple[int, int]
) -> None:
    """A root (or page) taller than the viewport is drawn with the viewport stretched over the
    page for that frame: the same pixels as the root shot inside a viewport tall enough, and
    the next story is drawn at its own viewport again."""
    short, tall = {"width": 300, "height": 60}, {"width": 300, "height": 600}
    card = "example-card--with-text"
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        past = renderer.take(snapshot(card, crop=crop, viewport=short))
        after = renderer.take(snapshot(card, crop="viewport", viewport=short))
        inside = renderer.take(snapshot(card, crop=crop, viewport=tall))
    assert past.png is not None and after.png is not None and inside.png is not None
    whole = pyvips.Image.new_from_buffer(past.png, "")
    assert (whole.width, whole.height) == size
    viewport = pyvips.Image.new_from_buffer(after.png, "")
    assert (viewport.width, viewport.height) == (300, 60)
    if crop == "root":
        assert (
            whole.write_to_memory()
            == pyvips.Image.new_from_buffer(inside.png, "").write_to_memory()
        )


def test_the_capture_is_diffed_against_its_baseline(
    captured: Any, browser: ChildBrowser, stored: Stored
) -> None:
    results = captured[0]
    primary = results["example-button--primary"]
    secondary = results["example-button--secondary"]
    shots = [snapshot("example-button--primary"), snapshot("example-button--secondary", name="b")]
    payload = capture_payload(
        stored,
        shots,
        **{
            "example-button--primary": {
                "id": 1,
                "image": primary["image"],
                "sha256": primary["sha256"],
            },
            "b": {"id": 2, "image": primary["image"], "sha256": primary["sha256"]},
        },
    )
    again = {r["name"]: r for r in capture.run(payload, lambda _: None)["snapshots"]}
    assert again["example-button--primary"]["status"] == "unchanged"
    assert again["example-button--primary"]["baseline_id"] == 1
    changed = again["b"]
    assert changed["status"] == "changed"
    assert changed["sha256"] == secondary["sha256"]
    assert (stored.artifacts / changed["diff_path"]).is_file()


def test_ignore_regions_are_recorded_and_left_out_of_the_comparison(
    captured: Any, browser: ChildBrowser, stored: Stored, shots: list[StorySnapshot]
) -> None:
    """Each story draws a new number in its ignore regions on every render (Chromatic's
    ignoreSelectors, the chromatic-ignore class and data-chromatic attribute, Lost Pixel's
    mask): its boxes are recorded, and a capture compared with the last is unchanged."""
    first = captured[0]
    live = [shot for shot in shots if shot["name"].startswith(LIVE)]
    assert [shot["ignore"] for shot in live] == [[], [".live-clock"], ["#ad-slot"]]
    boxes = {shot["name"]: first[shot["name"]]["ignore_boxes"] for shot in live}
    assert [len(found) for found in boxes.values()] == [2, 1, 1]
    for found in boxes.values():
        assert all(box[0] == 0 and box[2] > 100 and box[3] > 10 for box in found), found
    baselines = {
        name: {
            "id": 1,
            "image": first[name]["image"],
            "sha256": first[name]["sha256"],
            "ignore_boxes": first[name]["ignore_boxes"],
        }
        for name in boxes
    }
    again = capture.run(capture_payload(stored, live, **baselines), lambda _: None)
    results = {r["name"]: r for r in again["snapshots"]}
    assert {
        name: r["sha256"] != first[name]["sha256"] for name, r in results.items()
    } == dict.fromkeys(boxes, True)
    assert {name: r["status"] for name, r in results.items()} == dict.fromkeys(boxes, "unchanged")


def test_a_story_the_plan_could_not_size_is_failed_with_the_reason(
    browser: ChildBrowser, stored: Stored
) -> None:
    problem = "globals.viewport: no viewport named 'ipad' (known: mobile1)"
    shot = snapshot("example-button--primary", problem=problem)
    (result,) = capture.run(capture_payload(stored, [shot]), lambda _: None)["snapshots"]
    assert (result["status"], result["error"], result["image"]) == ("failed", problem, None)


def test_a_story_is_captured_under_the_media_it_asks_for(
    captured: Any, browser: ChildBrowser, stored: Stored
) -> None:
    """Chromatic's forcedColors and media: emulated for that story, and for no other."""
    plain = captured[0]["example-button--primary"]["sha256"]
    forced = {"reduced_motion": "reduce", "forced_colors": "active", "media": "print"}
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        taken = [
            renderer.take(snapshot("example-button--primary", media=media)).sha256
            for media in (forced, snapshot("x")["media"])
        ]
    assert taken[0] != plain and taken[1] == plain


def test_a_modes_globals_render_its_snapshot_and_leave_the_next_story_alone(
    captured: Any, browser: ChildBrowser, stored: Stored, shots: list[StorySnapshot]
) -> None:
    """Chromatic modes that set the theme global: the dark snapshot is dark, the light one and
    the story after it are as the preview's own globals draw them, whichever came first."""
    results = captured[0]
    dark = image(stored, results["example-themes--light-and-dark [dark]"])
    light = image(stored, results["example-themes--light-and-dark [light]"])
    assert dark.avg() < 100 < 200 < light.avg(), "dark text on a dark page, and the reverse"
    by_name = {shot["name"]: shot for shot in shots}
    order = [
        by_name["example-themes--light-and-dark [dark]"],
        by_name["example-button--primary"],
        by_name["example-themes--light-and-dark [dark]"],
        by_name["example-themes--light-and-dark [light]"],
    ]
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        taken = [renderer.take(shot).sha256 for shot in order]
    assert taken == [
        results["example-themes--light-and-dark [dark]"]["sha256"],
        results["example-button--primary"]["sha256"],
        results["example-themes--light-and-dark [dark]"]["sha256"],
        results["example-themes--light-and-dark [light]"]["sha256"],
    ]


def test_a_story_the_page_draws_still_or_that_is_its_baseline_settles_in_one_shot(
    browser: ChildBrowser, stored: Stored
) -> None:
    """A new story costs one shot when the page drew two frames alike before it; an unchanged
    one (the common case in CI) when that shot is its baseline's bytes. A first shot that is
    neither still needs a second that agrees with it."""
    story = snapshot("example-button--primary")
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        StoryRenderer(site) as renderer,
    ):
        alone = renderer.take(story)
        same = renderer.take(story, alone.sha256)
        other = renderer.take(story, "0" * 64)
    assert alone.error is None and (alone.settled, alone.shots) == (True, 1)
    assert (same.png, same.settled, same.shots) == (alone.png, True, 1)
    assert (other.png, other.settled, other.shots) == (alone.png, True, 2)


class _Restless(StoryRenderer):
    """A renderer whose story, once rendered, changes its text on every message of a worker
    (whose timers the page's held clock does not hold), in real time, for good."""

    def _shoot(self, snapshot: StorySnapshot, baseline_sha256: str | None) -> Any:
        assert self.page is not None
        self.page.evaluate(
            """() => {
                const code = 'let n = 0; setInterval(() => postMessage(++n), 1)';
                const worker = new Worker(URL.createObjectURL(new Blob([code])));
                const root = document.querySelector('#storybook-root');
                worker.onmessage = (event) => { root.textContent = String(event.data); };
            }"""
        )
        self.page.wait_for_function("() => document.querySelector('#storybook-root').textContent")
        return super()._shoot(snapshot, baseline_sha256)


def test_a_story_that_never_stops_changing_is_shot_until_the_limit_and_kept_unsettled(
    browser: ChildBrowser, stored: Stored
) -> None:
    """Frames drawn with damage settle nothing: the shots are compared, and a story whose pixels
    change between every two is kept as its last shot, marked as never settled."""
    with (
        Site(load(for_job(str(stored.artifacts)), stored.ref)) as site,
        _Restless(site) as renderer,
        capture_logs() as logs,
    ):
        restless = renderer.take(snapshot("example-button--primary"))
    assert restless.error is None and restless.png is not None
    assert (restless.settled, restless.shots) == (False, MAX_SHOTS)
    assert any(entry["event"] == "story never settled" for entry in logs)
