"""Render one story after another in one page, and take each one's screenshot.

The page loads the build's `iframe.html` once, at its first story (or before it, with no story,
when the child is told its build is coming: `preload`, or plans it: `read_stories`); every
later story is switched to through Storybook's channel (`setCurrentStory`, or `forceRemount` to
render the same story again at another size), which costs a render, not a page load. Each
story then goes through:

1. Storybook's render-finished event: `storyFinished` (Storybook 8.4 and later), else
   `storyRendered`; Storybook runs the play function before either, so a story is captured
   after its play. An error event (`storyErrored`, `storyThrewException`,
   `playFunctionThrewException`, `unhandledErrorsWhilePlaying`, `storyMissing`) fails the
   snapshot with the story's message. The page's clock is held (`child.browser.hold`) and runs
   forward at each look meanwhile while no request is in flight, a frame first, then further.
2. The story's own delay and its motion, in the page's time: the clock runs forward by the
   delay, then on while a timer is due soon (`child.browser.hold.SETTLE_HORIZON_MS`: a tween's
   frames, a transition's end, a mock's delayed answer) and no further, so that a toast's
   dismissal set seconds ahead never comes (or one frame, for a story paused at its start).
3. Fonts loaded, every image complete (a blocked one fails at once), and a quiet network: no
   request in flight for `QUIET_SECONDS`; then step 2 again while what came in set timers due
   soon (a data library tells its views on a timer of 0 ms once the data came).
4. Steps 1 to 3 together within `RENDER_CAP_SECONDS` (Chromatic's cap), else the snapshot fails
   with "did not finish rendering in 15 s" and the page is closed (a page that hangs its main
   thread is ended with it); the next story gets a new page.
5. Every CSS animation, transition, Web Animation, SVG animation and video paused at its end (or
   its first frame), the caret hidden, and shots taken until two consecutive ones have the same
   pixels (at most `MAX_SHOTS`; the last is kept and the capture says it never settled), or
   until the first one's PNG is the story's baseline's, byte for byte: those bytes were already
   taken once and kept as the accepted image, so a second shot could only agree with them (an
   unchanged story, the common case in CI, costs one shot). A story with no baseline costs one
   shot too when the page drew the two frames before it alike (`frames.still`). A shot covers
   the story root's box unless the story asks for the viewport or the whole page. The page
   draws only the frames the renderer begins (`child.browser.frames`): a look at a story still
   rendering begins one, and a shot is the frame begun for it, drawn at once.

Deadlines are kept by a watchdog (`child.browser.watchdog`): Playwright's own timeouts do not
fire on a page whose main thread hangs, so at the deadline the renderers are killed and the
blocked call fails. A renderer that crashes fails its story and the page is opened again for the
next; a browser that dies fails its story and is launched again for the next (`child_browser`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import math
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, NamedTuple
from urllib.parse import quote

import pyvips
import structlog
from playwright.sync_api import BrowserContext, CDPSession, Page, Request
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from child.browser import frames
from child.browser.errors import first_line
from child.browser.frames import Box
from child.browser.hold import (
    FIRST_FRAME_MS,
    FRAME_MS,
    RUN_TO_END_MS,
    SETTLE_HORIZON_MS,
    run_then,
)
from child.browser.launch import ChildBrowser, child_browser
from child.browser.pages import hold, open_page
from child.browser.preview import PreviewStories, read_stories
from child.browser.site import RequestGuard, ServeFailures, Site
from child.browser.stopwatch import Phase, Stopwatch
from child.browser.watchdog import BEAT_SECONDS, POLL_MS, Watchdog
from child.worker.resources import RefusedForks
from ipc.storybook import (
    DEFAULT_IGNORE_SELECTORS,
    DEFAULT_MEDIA,
    MAX_DELAY_MS,
    MAX_IGNORE_BOXES,
    MAX_SHOTS,
    RENDER_CAP_SECONDS,
    Media,
    StorySnapshot,
    Viewport,
)

log = structlog.get_logger(__name__)

#: How long the network must stay without a request in flight to count as quiet.
QUIET_SECONDS = 0.1
#: How long a request a service worker answers may stay in flight and still hold the shots
#: back: a worker may keep one open for good on purpose (a loading story's msw
#: `delay('infinite')`), and one that answers late in real time (msw 1's `ctx.delay`, timed in
#: the worker, not by the page's clock) must still be waited for.
HELD_OPEN_SECONDS = 3.0
#: How long the shots of one story may take.
SHOTS_SECONDS = 10.0
#: The most the page's clock runs at one look at a story still rendering (`_await_outcome`).
MAX_STEP_MS = 256
#: How many times faster than real time a story's CSS animations, transitions and Web
#: Animations run on its page's own timeline (DevTools' `Animation.setPlaybackRate`), unless it
#: asks to be paused at its first frame. Storybook 9 and later wait for a story's running
#: animations before they say it finished, and that timeline is real time, not the held clock:
#: 7 of vue-sb9's 40 stories waited 550-620 ms in render, for transitions of half a second. The
#: shots pause every animation at its end anyway, so the pace changes how long the wait lasts,
#: not a pixel. A story paused at its first frame keeps the real pace: sped up, a short
#: animation could be over before the shots pause it at its start.
ANIMATION_RATE = 100.0
#: The agent's answers that look at a story (or a preview) still on its way, each after a frame
#: begun for it (`_agent`).
LOOKS = frozenset({"previewReady", "outcome", "outcomeWithin", "assetsReady", "settled"})
#: How long a story that reported an error may take to finish: Storybook tears its render down
#: after it, and the next story must not start before.
ERROR_SETTLE_SECONDS = 1.0

#: How long a page loaded ahead of its stories (`preload`) may take to be ready for the first.
PRELOAD_SECONDS = 5.0
#: How long past a wait's deadline the watchdog lets a page go: the wait ends at its deadline
#: by itself (`_until`), and the watchdog only ends a page that stopped answering a look.
LOOK_MARGIN_SECONDS = 1.0
#: What `_shown` holds for a page whose preview is loaded with no story shown yet.
NO_STORY = ""
#: The accessibility addon's automatic checks off in a page loaded for a story, as the agent
#: turns them off in a page it switches (`agent.js`, `withoutAutomaticChecks`, which says why);
#: a preview without the addon's global leaves the parameter alone.
NO_AUTOMATIC_CHECKS = "globals=a11y.manual:!true"
#: What a story may leave in its origin's storage that the page does not empty itself (the
#: agent's `show` empties localStorage and sessionStorage): emptied before the next story.
#: Not the service workers: the build's registration stays, for the next story's speed.
STORED = "cookies,indexeddb,cache_storage,file_systems,websql,shared_storage,storage_buckets"

#: How a story is brought into the page: switched to through Storybook's channel, or by
#: loading the page again (what a Storybook without a reachable channel gets).
Switch = Literal["channel", "reload"]


@dataclass(frozen=True)
class Capture:
    """A story's screenshot, or why there is none."""

    story_id: str
    png: bytes | None
    sha256: str | None
    #: Whether two consecutive shots agreed; None when the story failed before any shot.
    settled: bool | None
    error: str | None
    seconds: float
    shots: int = 0
    #: The story's ignore regions in the image, [left, top, width, height] each.
    ignore_boxes: tuple[tuple[int, int, int, int], ...] = ()
    #: Where its seconds went, by phase (`child.browser.stopwatch`).
    phases: Mapping[Phase, float] = dataclasses.field(default_factory=dict)
    #: Whether it was shown on a fresh page of its own (no story before it on that page).
    alone: bool = False


class _Shot(NamedTuple):
    """One screenshot of a story, with what the agent's `prepare` saw of the page for it."""

    pixels: frames.Pixels
    view: dict[str, Any]
    #: Where the image's top left corner is on the page.
    origin: tuple[int, int]
    #: Whether the page drew two frames alike just before this shot (`frames.still`).
    still: bool = False


class StoryFailed(Exception):
    """The story failed; its message is the snapshot's error."""

    def __init__(self, message: str, *, page_broken: bool = False) -> None:
        super().__init__(message)
        self.page_broken = page_broken


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height, from its header (Chromium's screenshots are PNGs)."""
    width, height = struct.unpack(">II", png[16:24])
    return int(width), int(height)


def cap_message(seconds: float = RENDER_CAP_SECONDS) -> str:
    return f"did not finish rendering in {seconds:g} s"


def shots_message(seconds: float = SHOTS_SECONDS) -> str:
    return f"did not give a screenshot in {seconds:g} s"


def shot_area(snapshot: StorySnapshot, view: dict[str, Any]) -> tuple[Box | None, bool]:
    """Where `snapshot`'s shot covers, in page coordinates, cut to what can be shot, and whether
    it reaches past the viewport; None when nothing of it is left. From the agent's `prepare`
    (`view`): the story root's box (the viewport's when it is empty) with what the story drew
    outside it in portals on `<body>` (a modal, a notification, an open menu: the agent's
    `portalBox`), the viewport where it is scrolled to, or the whole page."""
    viewport = snapshot["viewport"]
    page_width, page_height = view["page"]
    scroll_x, scroll_y = view["scroll"]
    shown = (scroll_x, scroll_y, viewport["width"], viewport["height"])
    crop = snapshot["crop"]
    if crop == "root":
        box = view["root"]
        if box and box["width"] > 0 and box["height"] > 0:
            wanted = (box["x"], box["y"], box["width"], box["height"])
            if view.get("portals"):
                portals = view["portals"]
                wanted = _union(
                    wanted, (portals["x"], portals["y"], portals["width"], portals["height"])
                )
            inside = _cut(wanted, shown) == wanted
            return _cut(wanted, shown if inside else (0, 0, page_width, page_height)), not inside
        log.info("story root is empty, shooting the viewport", story_id=snapshot["story_id"])
    if crop == "page":
        whole = (0, 0, page_width, page_height)
        beyond = page_width > viewport["width"] or page_height > viewport["height"]
        return _cut(whole, whole), beyond
    return shown, False


def _union(one: Box, other: Box) -> Box:
    """The smallest box holding both."""
    left, top = min(one[0], other[0]), min(one[1], other[1])
    right = max(one[0] + one[2], other[0] + other[2])
    bottom = max(one[1] + one[3], other[1] + other[3])
    return (left, top, right - left, bottom - top)


def _cut(box: Box, within: Box) -> Box | None:
    """The part of `box` inside `within`, or None when they do not overlap."""
    left, top = max(box[0], within[0]), max(box[1], within[1])
    right = min(box[0] + box[2], within[0] + within[2])
    bottom = min(box[1] + box[3], within[1] + within[3])
    return (left, top, right - left, bottom - top) if right > left and bottom > top else None


class StoryRenderer:
    """One page of the child's browser showing one stored build's stories; close it after."""

    def __init__(
        self,
        site: Site,
        *,
        browser: Callable[[], ChildBrowser] = child_browser,
        switch: Switch = "channel",
        cap_seconds: float = RENDER_CAP_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        beat: Callable[[], None] = lambda: None,
    ) -> None:
        self.site = site
        #: Called at least every `BEAT_SECONDS` while a story renders and settles, so that the
        #: stall watchdog sees a child waiting on a slow page alive: by the main thread between
        #: waits (it raises on a cancel), by the page watchdog's thread while a call blocks.
        self._beat = beat
        self._beaten_at = 0.0
        #: Requests of the page that the child's server failed, since the story began.
        self._serve_failures = ServeFailures(site)
        self.guard = RequestGuard(site.origin)
        self._browser_of = browser
        self._switch = switch
        self._cap = cap_seconds
        self._clock = clock
        self._watch = Stopwatch(clock)
        self._browser: ChildBrowser | None = None
        self._context: BrowserContext | None = None
        self._page: Page | None = None
        #: The page's own DevTools session, which begins its frames (`child.browser.frames`).
        self._devtools: CDPSession | None = None
        self._shown: str | None = None
        self._viewport: Viewport | None = None
        self._media: Media = DEFAULT_MEDIA
        self._animation_rate = 1.0
        self._crashed = False
        #: The story just shown removed what Storybook renders into (`agent.js`'s `whole`).
        self._broken_by_story = False
        #: The story just tried failed on an element an earlier story left drawn on the page.
        self._left_behind = False
        #: The requests of the page in flight, by the page's own events, with when each began.
        self._in_flight: dict[Request, float] = {}
        self._last_activity = 0.0
        self._live: ChildBrowser | None = None
        self._watchdog = Watchdog(self._rescue, clock, beat, self._last_resort)
        #: The page's clock runs in real time (a preview loaded with no story), until the first
        #: story is shown.
        self._clock_running = False

    @property
    def page(self) -> Page | None:
        """The page showing the last story (None before the first, or after a broken one)."""
        return self._page

    def take(
        self,
        snapshot: StorySnapshot,
        baseline_sha256: str | None = None,
        *,
        retry: Callable[[str], bool] = lambda _error: True,
    ) -> Capture:
        """Render `snapshot`'s story and screenshot it; a failure is a `Capture` with `error`.
        `baseline_sha256`: its baseline's digest, which a first shot that matches settles.

        A story that fails on a page that had shown other stories is tried once more on a fresh
        page before it is failed: what a story before it left behind (a removed root, a broken
        channel, a stray global) must not fail it. Only an error the story reported is tried
        again: a page that crashed, hung or ran out of time would only do it again, at a
        second cap's cost; and only when `retry` says the error is worth it (the build's other
        stories fail with it on fresh pages too: `child.storybook.breakdown`).

        A browser that cannot be launched raises (`BrowserUnavailable`, `OutOfResources`): the
        job fails or goes back, the story is not to blame. Nor is it for a failure while the
        kernel refused forks (a renderer Chromium could not start is a page that crashed or
        never loaded): that raises `OutOfResources` too.
        """
        reused = self._shown is not None
        capture, reported = self._attempt(snapshot, baseline_sha256)
        if capture.error is None or not reused or not reported or not retry(capture.error):
            return dataclasses.replace(capture, alone=not reused)
        log.info(
            "story failed on a page other stories had shown; trying it again alone",
            story_id=capture.story_id,
            error=capture.error,
            page="loaded again" if self._left_behind else "fresh",
        )
        if self._left_behind:
            self._load_again()
        else:
            self._close_page()
        retried, _ = self._attempt(snapshot, baseline_sha256)
        return dataclasses.replace(retried, seconds=capture.seconds + retried.seconds, alone=True)

    def preload(self, viewport: Viewport) -> bool:
        """Load the build's preview with no story shown, before any story is asked for (the
        child was told its build is coming: `ipc.messages.Warm`), so that the first story is
        switched to through the channel as every later one is, rather than costing a page load
        (about a second: measured 1.2-1.3 s for a story on a fresh page, 0.6 on one loaded
        ahead), with every story file imported and its fonts loaded (the agent's `ahead` says
        why), as far as `PRELOAD_SECONDS` allow: past them, what is not loaded yet is loaded
        as the stories that need it come. The page is a new one, whose clock runs in real time
        until the first story is shown (`_hold_clock`): nothing waits on looks to move the
        preview's timers. True when the page is ready; otherwise it is closed, and the first
        story loads it as usual."""
        self._close_page()
        started = self._clock()
        deadline = started + PRELOAD_SECONDS
        browser = self._browser_of()
        self._live = browser
        self._serve_failures.take()
        why = "the preview did not load ahead of its stories"
        try:
            with self._watchdog.armed(PRELOAD_SECONDS + LOOK_MARGIN_SECONDS, why):
                page = self._ensure_page(browser, viewport, clock_running=True)
                page.goto(
                    self.site.url("iframe.html"),
                    wait_until="commit",
                    timeout=PRELOAD_SECONDS * 1000,
                )
                if not self._until(page, "previewReady", deadline):
                    raise PlaywrightTimeout("the preview was not ready in time")
                loaded = self._until(page, "loadedAhead", deadline)
        except PlaywrightError as error:
            log.info("could not load the preview ahead of its stories", error=first_line(error))
            self._close_page()
            return False
        if (problem := self._watchdog.fired or self._serve_failures.take()) is not None:
            log.info("could not load the preview ahead of its stories", error=first_line(problem))
            self._close_page()
            return False
        self._shown = NO_STORY
        log.debug(
            "preview loaded ahead of its stories",
            seconds=round(self._clock() - started, 3),
            loaded_ahead=loaded,
        )
        return True

    def read_stories(self, viewport: Viewport) -> PreviewStories:
        """Load the build's preview in a new page with no story shown and read its stories as
        a plan does (`child.browser.preview.read_stories`, whose errors it raises), a frame
        begun at each ask; the page is then ready for the build's first story, as after
        `preload`, with every story file imported (by `extract()`) and its fonts loaded (as far
        as `PRELOAD_SECONDS` allow). Its clock runs until that story."""
        self._close_page()
        browser = self._browser_of()
        self._live = browser
        with self._watchdog.armed(PRELOAD_SECONDS, "the browser did not open a page"):
            page = self._ensure_page(browser, viewport, clock_running=True)
        devtools = self._devtools
        assert devtools is not None, "a page is open"
        stories = read_stories(
            browser, self.site, beat=self._beat_now, page=page,
            look=lambda: frames.advance(devtools),
        )  # fmt: skip
        # The stories are read: a page that stops answering now costs its keeping, not the plan.
        why = "the preview did not load its fonts"
        try:
            with self._watchdog.armed(PRELOAD_SECONDS + LOOK_MARGIN_SECONDS, why):
                self._until(page, "loadedAhead", self._clock() + PRELOAD_SECONDS)
        except PlaywrightError as error:
            log.info("could not keep the plan's page", error=first_line(error))
            self._close_page()
            return stories
        self._shown = NO_STORY
        return stories

    def _attempt(
        self, snapshot: StorySnapshot, baseline_sha256: str | None
    ) -> tuple[Capture, bool]:
        """One try at `take`, and whether it failed on an error the story reported (its page
        still whole and in time)."""
        started = self._clock()
        self._watch.restart()
        story_id = snapshot["story_id"]
        self._broken_by_story = False
        self._left_behind = False
        self.guard.story_id = story_id
        self._serve_failures.take()
        refused = RefusedForks()
        browser = self._browser_of()
        self._live = browser
        # Past the cap by a margin: the render's own wait ends at the cap and says what the story
        # was waiting on (`_why_not_finished`); the watchdog ends a page that stopped answering.
        with self._watchdog.armed(self._cap + LOOK_MARGIN_SECONDS, cap_message(self._cap)):
            try:
                png, settled, shots, boxes = self._take(browser, snapshot, started, baseline_sha256)
            except StoryFailed as failure:
                # Without the page's origin, whose port is this page's own: a message is the
                # same from every page of the build (and from the build's next capture).
                message = (self._watchdog.fired or str(failure)).replace(self.site.origin, "")
                broken = failure.page_broken or self._watchdog.fired is not None
                self._after_failure(browser, story_id, message, broken)
                # The page's own server failed it, or a page that broke or ran out of time was
                # kept waiting on the store: not the story. A story that reported its own error
                # is to blame whatever is still loading (its error page asks for fonts).
                served = self._serve_failures.take() or (
                    self.site.still_reading(f"{story_id}: {message}") if broken else None
                )
                if served is not None:
                    self._close_page()
                    raise served from None
                refused.blame(f"{story_id}: {message}")
                capture = Capture(
                    story_id, None, None, None, message, self._clock() - started,
                    phases=dict(self._watch.laps),
                )  # fmt: skip
                return capture, not broken
        if self._watchdog.fired or self._broken_by_story:
            self._close_page()  # gone (the watchdog fired as the last shot came back), or broken
        if (served := self._serve_failures.take()) is not None:
            self._close_page()  # what it cached of the failed load must not be reused
            raise served
        seconds = self._clock() - started
        log.debug(
            "story captured",
            story_id=story_id,
            seconds=round(seconds, 3),
            shots=shots,
            phases={phase: round(lap * 1000, 1) for phase, lap in self._watch.laps.items()},
        )
        digest = hashlib.sha256(png).hexdigest()
        capture = Capture(
            story_id, png, digest, settled, None, seconds, shots, boxes, dict(self._watch.laps)
        )
        return capture, False

    def _take(
        self,
        browser: ChildBrowser,
        snapshot: StorySnapshot,
        started: float,
        baseline_sha256: str | None,
    ) -> tuple[bytes, bool, int, tuple[Box, ...]]:
        render_deadline = started + self._cap
        lap = self._watch.lap
        try:
            page = self._ensure_page(browser, snapshot["viewport"])
            self._hold_clock()
            self._emulate(page, snapshot["media"])
            self._pace_animations(snapshot["pause_animation_at_end"])
            lap("page")
            self._show(page, snapshot["story_id"], render_deadline, snapshot["globals"])
            lap("show")
            elapsed = self._await_outcome(page, render_deadline)
            lap("render")
            self._settle(page, snapshot, elapsed, render_deadline)
        except PlaywrightTimeout:
            raise StoryFailed(self._why_not_finished(), page_broken=True) from None
        except PlaywrightError as error:
            raise self._broken(browser, error) from None
        if self._watchdog.fired is None:
            self._watchdog.arm(SHOTS_SECONDS, shots_message())
        try:  # no timeout of the driver's: the watchdog ends a shot that takes too long
            png, settled, shots, boxes = self._shoot(snapshot, baseline_sha256)
            lap("shots")
            return png, settled, shots, boxes
        except PlaywrightError as error:
            raise self._broken(browser, error) from None

    def _settle(self, page: Page, snapshot: StorySnapshot, elapsed: int, deadline: float) -> None:
        """The story's delay, then its motion run to its end (`settled`), fonts and images
        loaded and the network quiet; then the motion again while what came meanwhile set
        timers due soon, within what is left of `RUN_TO_END_MS` since the story was shown
        (counted from then, not from when it finished: a loop that never ends is held at the
        same moment however long Storybook took). A story paused at its first frame runs one
        frame. The first look at its fonts and images comes back with the run."""
        lap = self._watch.lap
        delay = min(max(0, snapshot["delay_ms"]), MAX_DELAY_MS)
        if not snapshot["pause_animation_at_end"]:
            run_ms = delay + max(FIRST_FRAME_MS - elapsed, 0)
            ready = self._agent("assetsReady", self._held_open_ms(), run_ms=run_ms)
            budget = 0
        else:
            budget = max(RUN_TO_END_MS - elapsed, 0)
            ready, ran = self._settled(delay, budget)
            budget -= ran
        lap("motion")

        def run() -> bool:
            nonlocal budget
            ready, ran = self._settled(0, budget)
            budget -= ran
            return ready

        while True:
            while not ready:  # mostly ready at once; a timer due meanwhile is run to
                if self._clock() >= deadline:
                    raise PlaywrightTimeout("fonts and images did not load")
                self._beat_now()
                page.wait_for_timeout(POLL_MS)
                ready = run()
            lap("assets")
            self._wait_for_quiet(page, deadline, run)
            lap("quiet")
            if self._workers:
                # What a worker answered reaches the page's scripts in real time (its
                # messages, React's scheduler): a moment for it to set the timers it sets.
                page.wait_for_timeout(POLL_MS)
            if budget <= 0 or not self._agent("dueWithin", SETTLE_HORIZON_MS):
                if not self._workers or not self._loading():
                    return
                continue
            ready = run()
            budget -= 1  # a run that found nothing due still ends the loop
            lap("motion")

    def _settled(self, run_ms: int, budget: int) -> tuple[bool, int]:
        """The agent's `settle` within `budget` ms after a run of `run_ms`: whether fonts and
        images were ready after it, and how far it ran."""
        held_open = self._held_open_ms()
        answer = self._agent("settled", budget, SETTLE_HORIZON_MS, held_open, run_ms=run_ms)
        if answer["threw"] is not None:
            log.info("a timer of the story threw", error=answer["threw"])
        return bool(answer["ready"]), int(answer["ran"])

    def _why_not_finished(self) -> str:
        """The cap's message, with what the story was still waiting on when the page can say:
        a service worker that never activated, or a request still in flight."""
        message = cap_message(self._cap)
        waiting: list[str] = []
        if self._watchdog.fired is None and self._page is not None and not self._crashed:
            with contextlib.suppress(PlaywrightError):
                pending = self._page.evaluate("() => window.__storyshelf.waitingOn()")
                waiting += [
                    f"a service worker that never activated ({script})" for script in pending
                ]
        if not waiting and self._in_flight:
            url = min(request.url for request in self._in_flight)
            waiting.append(f"{url.removeprefix(self.site.origin + '/')} still loading")
        return f"{message}: waiting on {', '.join(waiting)}" if waiting else message

    def _await_outcome(self, page: Page, deadline: float) -> int:
        """Wait for the story to finish rendering, and return how long that took in the page's
        time (ms); raise `StoryFailed` with the error it reported, once it finished or had its
        time to.

        While its files load, the page's time stands still, so that a story that needs no timer
        to render is rendered at the instant it was shown, however slow the machine. With no
        request in flight only a timer can be what the story waits for (Storybook 9's 100 ms
        wait for animations, a play function's typing, a debounce): the clock then runs a frame,
        and twice as far at each look after, up to `MAX_STEP_MS` (Storybook's wait is passed at
        the third look, not the seventh); from there a look waits up to `POLL_MS` of real time
        too, so a story that never finishes is looked at, not spun. A wait (that one, or one on
        a request in flight) is the agent's `outcomeWithin`: it ends the moment Storybook says
        the story is done, where a sleep then a look overshot by half a poll."""
        errored_at: float | None = None
        step = FRAME_MS
        outcome = self._agent("outcome")
        while True:
            if outcome is not None and "error" not in outcome:
                return round(float(outcome["elapsed"]))
            if outcome is not None:
                errored_at = self._clock() if errored_at is None else errored_at
                if outcome.get("finished") or self._clock() - errored_at >= ERROR_SETTLE_SECONDS:
                    raise StoryFailed(str(outcome["error"]))
            if self._clock() >= deadline:
                raise PlaywrightTimeout("the story did not finish rendering")
            self._beat_now()
            growing = step < MAX_STEP_MS and errored_at is None
            loading = bool(self._in_flight) and not self._workers
            if loading or not growing:
                # A wait of `POLL_MS` that ends as Storybook says the story is done.
                outcome = self._agent("outcomeWithin", POLL_MS)
                final = outcome is not None and ("error" not in outcome or outcome.get("finished"))
                if final or loading:
                    continue
            run_ms = step if not loading else 0
            if run_ms and growing:
                step = min(2 * step, MAX_STEP_MS)
            outcome = self._agent("outcome", run_ms=run_ms)  # the run and the look: one call

    def _ensure_page(
        self, browser: ChildBrowser, viewport: Viewport, *, clock_running: bool = False
    ) -> Page:
        """The open page at `viewport`, or a new one; a new one's clock is held from its
        first script on, or with `clock_running` runs until `_hold_clock`."""
        if self._page is not None and (self._crashed or self._browser is not browser):
            self._close_page()
        if self._page is None:
            self._context, self._page = open_page(
                browser, self.guard, viewport,
                hold_time=True, clock_running=clock_running, begin_frames=True,
            )  # fmt: skip
            self._clock_running = clock_running
            self._devtools = self._context.new_cdp_session(self._page)
            self._browser = browser
            self._viewport = viewport
            self._media = DEFAULT_MEDIA
            self._animation_rate = 1.0
            self._shown = None
            self._crashed = False
            self._in_flight = {}
            self._context.on("serviceworker", self._on_service_worker)
            self._page.on("crash", self._on_crash)
            self._page.on("request", self._on_request_started)
            self._page.on("requestfinished", self._on_request_ended)
            self._page.on("requestfailed", self._on_request_ended)
            self._serve_failures.watch(self._page)
        elif viewport != self._viewport:
            assert self._devtools is not None, "a page is open"
            frames.resize(self._devtools, viewport["width"], viewport["height"])
            self._viewport = viewport
        return self._page

    def _hold_clock(self) -> None:
        """Pause the clock of a page loaded with its clock running, before its first story."""
        if self._clock_running:
            assert self._context is not None, "a page is open"
            hold(self._context)
            self._clock_running = False

    def _emulate(self, page: Page, media: Media) -> None:
        """The media features the story asks for, set only when they change."""
        if media != self._media:
            page.emulate_media(
                media=media["media"],
                reduced_motion=media["reduced_motion"],
                forced_colors=media["forced_colors"],
            )
            self._media = media

    def _pace_animations(self, paused_at_end: bool) -> None:
        """The pace of the page's CSS animations, transitions and Web Animations: `ANIMATION_RATE`
        for a story whose animations are paused at their end, the real one for a story paused
        at its first frame; set only when it changes (it holds across loads, in every frame)."""
        rate = ANIMATION_RATE if paused_at_end else 1.0
        if rate != self._animation_rate:
            assert self._devtools is not None, "a page is open"
            self._devtools.send("Animation.setPlaybackRate", {"playbackRate": rate})
            self._animation_rate = rate

    def _show(self, page: Page, story_id: str, deadline: float, globals_: dict[str, Any]) -> None:
        """Bring `story_id` into the page under `globals_` (a Chromatic mode's, over the
        preview's own): a switch through the channel, else a page load, and then, for globals
        of its own, a switch to the same story under them."""
        switchable = self._shown is not None and self._switch == "channel"
        if switchable and not self._switch_to(story_id, globals_):
            return
        self._shown = None
        url = self.site.url(
            f"iframe.html?id={quote(story_id)}&viewMode=story&{NO_AUTOMATIC_CHECKS}"
        )
        page.goto(url, wait_until="commit", timeout=self._remaining_ms(deadline))
        self._shown = story_id
        if globals_:
            self._await_outcome(page, deadline)
            if self._switch_to(story_id, globals_):
                raise StoryFailed("the page's Storybook cannot take the mode's globals")

    def _switch_to(self, story_id: str, globals_: dict[str, Any]) -> str:
        """Switch through Storybook's channel; what stopped it, or "" once switched."""
        remount = self._shown == story_id
        problem: str = self._agent("show", story_id, remount, globals_, False)
        if problem == "stored":  # a cookie, IndexedDB or Cache Storage of the story before
            self._empty_storage(STORED)
            problem = self._agent("show", story_id, remount, globals_, True)
        if problem:
            log.info("switching stories by loading the page", reason=problem)
        else:
            self._shown = story_id
        return problem

    def _wait_for_quiet(self, page: Page, deadline: float, run: Callable[[], object]) -> None:
        """Until no request has been in flight for `QUIET_SECONDS`. Once the last one ended,
        the wait is exactly what is left of the window (a request that starts meanwhile is seen
        as it is sent: the driver delivers events while it waits), not a `POLL_MS` step, which
        overshot by half a step on average. On a page run by a service worker, a request
        holds the shots back as `_loading` says, and `run` runs the page's timers due soon
        while one waits (a mock's answer may wait on them)."""
        while (left := QUIET_SECONDS - (self._clock() - self._last_activity)) > 0 or (
            self._loading()
        ):
            if self._clock() > deadline:
                raise PlaywrightTimeout("the network did not go quiet")
            self._beat_now()
            if left <= 0 and self._workers and self._agent("dueWithin", SETTLE_HORIZON_MS):
                run()  # what is in flight may wait on the page's timers (msw's `delay()`)
                continue
            wait = POLL_MS if left <= 0 else max(1, math.ceil(left * 1000))
            page.wait_for_timeout(wait)

    def _held_open_ms(self) -> float | None:
        """How long a fetch of the page's scripts may wait and still hold the shots back (the
        agent's `assetsReady`): `HELD_OPEN_SECONDS` on a page run by a service worker, else
        for good (None: the agent's default)."""
        return HELD_OPEN_SECONDS * 1000 if self._workers else None

    def _loading(self) -> bool:
        """Whether a request of the page is in flight that the shots wait for: any, or on a
        page run by a service worker, one the build's server is answering or that began less
        than `HELD_OPEN_SECONDS` ago."""
        if not self._workers:
            return bool(self._in_flight)
        young = self._clock() - HELD_OPEN_SECONDS
        if self.site.serving():
            return True
        return any(began > young for began in self._in_flight.values())

    def _shot(self, snapshot: StorySnapshot, *, look_still: bool = False) -> _Shot:
        """One shot, after the agent's `prepare` (animations paused, the caret hidden, the
        areas to shoot and ignore measured): the area `shot_area` says, in a frame begun for
        it (`child.browser.frames.shoot`). With `look_still`, whether the page drew two frames
        alike just before it (`frames.still`; not asked of an area past the viewport, which is
        drawn at another size than those frames would be)."""
        view = self._agent(
            "prepare",
            snapshot["pause_animation_at_end"],
            RUN_TO_END_MS / 1000,
            [*DEFAULT_IGNORE_SELECTORS, *snapshot["ignore"]],
            MAX_IGNORE_BOXES,
        )
        if view["leftover"]:
            # Not the story's fault: `take` tries it on the page loaded again, where it is alone.
            self._left_behind = True
            raise StoryFailed("an earlier story's element is still on the page")
        area, beyond = shot_area(snapshot, view)
        if area is None:
            raise StoryFailed("the story's root is outside the page: nothing to shoot")
        assert self._devtools is not None, "a page is open"
        viewport = snapshot["viewport"]
        page_width, page_height = view["page"]
        try:
            still = look_still and not beyond and frames.still(self._devtools)
            pixels = frames.shoot(
                self._devtools,
                area,
                (viewport["width"], viewport["height"]),
                (page_width, page_height) if beyond else None,
            )
        except (frames.NotDrawn, pyvips.Error) as error:
            message = f"the browser drew no frame to shoot: {first_line(error)}"
            raise StoryFailed(message, page_broken=True) from None
        return _Shot(pixels, view, (area[0], area[1]), still)

    def _shoot(
        self, snapshot: StorySnapshot, baseline_sha256: str | None
    ) -> tuple[bytes, bool, int, tuple[Box, ...]]:
        """Shots until two consecutive ones have the same pixels, at most `MAX_SHOTS`, or a
        first one whose PNG is the baseline's, byte for byte (an unchanged story costs one shot
        and one encoding), or, for a story with no baseline, a first one the page drew two
        frames alike just before (`frames.still`: a new story costs one shot too, and its
        frames are compared by the browser without being read back); the PNG of the last, with
        its ignore boxes.

        Every shot comes after the quiet window. Taking a new story's first one inside it (its
        frame waits overlapping the window) saved 8 ms a story, but moved the pair's second
        shot a shot's time closer to the last request: a shoelace-sb65 story's two shots then
        agreed on a state its page left later, and that image became the next build's wrong
        baseline (20 pixels, once in a suite run under load)."""
        shot, count = self._shot(snapshot, look_still=baseline_sha256 is None), 1
        png = shot.pixels.png() if baseline_sha256 is not None or shot.still else None
        settled = shot.still or (
            png is not None and hashlib.sha256(png).hexdigest() == baseline_sha256
        )
        while not settled and count < MAX_SHOTS:
            previous, shot, count = shot, self._shot(snapshot), count + 1
            settled, png = shot.pixels.data == previous.pixels.data, None
        if not settled:
            log.info("story never settled", story_id=snapshot["story_id"], shots=MAX_SHOTS)
        png = png if png is not None else shot.pixels.png()
        boxes = self._ignore_boxes(snapshot, shot.view["ignore"], png, shot.origin)
        return png, settled, count, boxes

    def _ignore_boxes(
        self,
        snapshot: StorySnapshot,
        found: dict[str, Any],
        png: bytes,
        origin: tuple[int, int],
    ) -> tuple[Box, ...]:
        """The boxes of the story's ignore regions in its image, cut to the image, from what the
        agent found (`ignoreBoxes`); notes a page the story left broken."""
        if found["bad"]:
            log.info("ignore selectors the browser cannot read", selectors=found["bad"])
        if not found["whole"]:
            log.info(
                "the story left its page broken; the next story gets a fresh one",
                story_id=snapshot["story_id"],
            )
            self._broken_by_story = True
        width, height = png_size(png)
        boxes = []
        for left, top, box_width, box_height in found["boxes"]:
            x0, y0 = max(0, left - origin[0]), max(0, top - origin[1])
            x1 = min(width, left - origin[0] + box_width)
            y1 = min(height, top - origin[1] + box_height)
            if x1 > x0 and y1 > y0:
                boxes.append((x0, y0, x1 - x0, y1 - y0))
        return tuple(boxes)

    def _agent(self, method: str, *args: Any, run_ms: int = 0) -> Any:
        """The answer of the agent's `method(*args)` in the page (`agent.js`), a plain value;
        with `run_ms`, asked once the page's clock has run forward by that much
        (`child.browser.hold.run_then`), in the same call.

        A page whose main thread hangs never answers, and no Playwright timeout ends the wait:
        the watchdog, armed for the story, kills its renderers, and the call raises. (Asked of
        the DevTools protocol directly, a call saves a tenth of a millisecond, measured, but a
        page that crashes meanwhile leaves it unanswered for good: Playwright fails it.)

        A look at a story still rendering (`LOOKS`) begins a frame first, not drawn: the page
        draws only when asked (`child.browser.frames`), and what a story waits for may run on
        its frames (a resize observer, the animations' timeline)."""
        assert self._page is not None, "a page is open"
        if method in LOOKS:
            assert self._devtools is not None, "a page is open"
            frames.advance(self._devtools)
        return run_then(self._page, run_ms, method, *args)

    def _until(self, page: Page, method: str, deadline: float) -> bool:
        """Whether the agent's `method` said yes by `deadline`, asked every `POLL_MS` (a frame
        begun at each ask of a look), with a beat every `BEAT_SECONDS` of waiting."""
        while not self._agent(method):
            if self._clock() >= deadline:
                return False
            self._beat_now()
            page.wait_for_timeout(POLL_MS)
        return True

    def _beat_now(self) -> None:
        if self._clock() - self._beaten_at >= BEAT_SECONDS:
            self._beaten_at = self._clock()
            self._beat()

    def _remaining_ms(self, deadline: float) -> float:
        return max(1.0, (deadline - self._clock()) * 1000)

    def _broken(self, browser: ChildBrowser, error: PlaywrightError) -> StoryFailed:
        """What a Playwright error means for the story: the page or the browser went away."""
        if not browser.alive():
            return StoryFailed("the browser crashed while rendering the story", page_broken=True)
        if self._crashed or "crash" in str(error).lower():
            return StoryFailed("the page crashed while rendering the story", page_broken=True)
        first = str(error).strip().splitlines()
        return StoryFailed(first[0] if first else type(error).__name__, page_broken=True)

    def _after_failure(
        self, browser: ChildBrowser, story_id: str, message: str, broken: bool
    ) -> None:
        log.info("story failed", story_id=story_id, error=message)
        if broken:
            self._close_page()
        if not browser.alive():
            log.warning("browser died during a story; the next story launches another")

    def _on_crash(self, page: Page) -> None:
        """A renderer gone: the page is closed at once, which fails a shot waiting on its
        DevTools session (a session's call is never answered once the renderer is gone: it
        would wait for the watchdog's deadline). Called while a call of the page's waits."""
        self._crashed = True
        log.warning("page crashed", story_id=self.guard.story_id)
        with contextlib.suppress(PlaywrightError):
            page.close()

    def _on_request_started(self, request: Request) -> None:
        self._in_flight[request] = self._last_activity = self._clock()

    def _on_request_ended(self, request: Request) -> None:
        self._in_flight.pop(request, None)
        self._last_activity = self._clock()

    @property
    def _workers(self) -> bool:
        """The page's context runs a service worker of the build: what is in flight may be
        waiting on the page's own timers (a mock's `delay()`), so the clock runs anyway. Kept
        by `ServeFailures`, which a worker's answers concern too (reset with each new page)."""
        return self._serve_failures.workers

    def _on_service_worker(self, worker: object) -> None:
        self._serve_failures.workers = True

    def _load_again(self) -> None:
        """Have the next story load the page again in the same context, its origin's storage
        emptied first (all of it but the build's service workers), where an earlier story left
        an element drawn on it (a toast, a static dialog): the new document holds the story
        alone, as a fresh context's would, and the context's cache and the build's registered
        worker spare it a fresh context's cold load (msw-sb10: 1.8-2.1 s a story tried again
        on a fresh context, against 0.6-1.0 s on the page loaded again)."""
        if self._devtools is None or self._page is None:
            return  # gone meanwhile: the next story opens a new one
        try:
            self._empty_storage(f"{STORED},local_storage")
            self._page.evaluate("() => { try { sessionStorage.clear(); } catch (_) {} }")
        except PlaywrightError as error:
            log.debug("emptying a page loaded again", error=first_line(error))
            self._close_page()
            return
        self._shown = None

    def _empty_storage(self, types: str) -> None:
        """Empty the page's origin of the storage `types` (the DevTools protocol's names)."""
        assert self._devtools is not None, "a page is open"
        self._devtools.send(
            "Storage.clearDataForOrigin", {"origin": self.site.origin, "storageTypes": types}
        )

    def _close_page(self) -> None:
        context, self._context, self._page, self._shown = self._context, None, None, None
        self._devtools = None  # goes with its page
        if context is not None:
            try:
                context.close()
            except PlaywrightError as error:
                log.debug("closing a broken page", error=str(error).splitlines()[0])

    def _rescue(self) -> None:
        """The watchdog's rescue, from its thread: only signals, never a call into Playwright."""
        if self._live is not None:
            self._live.rescue()

    def _last_resort(self) -> None:
        if self._live is not None:
            self._live.last_resort()

    def close(self) -> None:
        self._watchdog.close()
        self._close_page()

    def __enter__(self) -> StoryRenderer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
