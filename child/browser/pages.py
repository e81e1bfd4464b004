"""A page of the child's browser set up for stable pixels, before the build's first script runs.

Each job gets its own browser context (a clean cache, storage and permissions per build) with one
page. What would let a story's pixels differ between runs or hosts is fixed here: the viewport
and device scale factor, reduced motion, a light colour scheme, the locale and time zone, a
seeded `Math.random` (the agent), no download, and the clock: `Date` starts at `FROZEN_TIME`.
Every request that leaves the build's server is aborted (`child.browser.site.RequestGuard`).

The build's service workers run, as in a browser: most teams feed their stories data through
MSW's worker (msw-storybook-addon's loader waits for it, and a page that blocks workers fails
every story). A worker is the build's own: its script must be a file the build's server
serves (a registration is same-origin, and the server answers nothing else), it lives in the
job's context, which no other build shares and which ends with the build's pages, and what it
fetches itself goes through the context's proxy, the build's server, which refuses whatever is
not the build's (`RequestGuard.proxy`), as the network namespace does below it.

A page that captures stories also holds time (`hold_time`): Playwright's fake clock replaces
`setTimeout`, `setInterval`, `requestAnimationFrame`, `requestIdleCallback` and `performance.now`,
paused, so that script-driven motion (a chart's `requestAnimationFrame` tween, a counter on
`setInterval`) moves only when the renderer runs the clock forward (`child.browser.hold`).
Chosen over the DevTools protocol's virtual time (`Emulation.setVirtualTimePolicy`): virtual
time is granted in budgets that the renderer spends as it likes while the network or a timer is
busy, and it stalls Playwright's own waits, which run on the page's timers; the fake clock is
script in the page, per context, and its `runFor` fires every timer due in a stretch of time,
in order, before it returns (asked of it by the agent: `child.browser.hold.run_then`). A plan's
page keeps timers running: it only reads parameters. So does a capture page loaded with no
story (`clock_running`): the clock runs in real time while the preview loads, and is paused by
the renderer before the first story is shown (`child.browser.render`), so that neither the load
nor a plan read from that page waits on looks to move its timers.

A capture page also draws only when the renderer asks (`begin_frames`): it is created with
begin-frame control (`Target.createTarget(enableBeginFrameControl)`, adopted by Playwright as a
page of the context), and every frame is one the renderer begins with
`HeadlessExperimental.beginFrame`. A screenshot is then the frame the renderer begins for it,
drawn at once, where `Page.captureScreenshot` waited for two or three of the compositor's 60 Hz
frames (31 ms on a bare page; 16 ms begun). The browser runs every compositor stage of a frame
before it draws (`--run-all-compositor-stages-before-draw`, `child.browser.flags`), so a begun
frame holds everything the page had when it was begun. Measured on the six real-world builds:
every story's pixels the same as with the compositor's own frames, 11-26 % less time a story.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import BrowserContext, Page

from child.browser.launch import ChildBrowser
from child.browser.site import RequestGuard
from ipc.storybook import Viewport, default_viewport

#: The instant every story sees as now, on every host.
FROZEN_TIME = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
AGENT = Path(__file__).with_name("agent.js")


def open_page(
    browser: ChildBrowser,
    guard: RequestGuard,
    viewport: Viewport | None = None,
    *,
    hold_time: bool = False,
    clock_running: bool = False,
    begin_frames: bool = False,
) -> tuple[BrowserContext, Page]:
    """A new context and its page, ready to load the build; close the context when done.

    With `hold_time`, the page's timers are the fake clock's, paused from its first script on,
    or with `clock_running`, running until `hold` pauses them; with `begin_frames`, the page
    draws only the frames begun through its DevTools session."""
    size = viewport or default_viewport()
    context = browser.browser.new_context(
        viewport={"width": size["width"], "height": size["height"]},
        device_scale_factor=1,
        is_mobile=False,
        has_touch=False,
        reduced_motion="reduce",
        color_scheme="light",
        forced_colors="none",
        locale="en-US",
        timezone_id="UTC",
        service_workers="allow",
        # A download is refused, not written to the host's disk (Playwright keeps one until
        # the context closes: a story's blob of hundreds of MiB, and for good if the child is
        # killed).
        accept_downloads=False,
        proxy=guard.proxy,
    )
    try:
        context.add_init_script(path=AGENT)
        if hold_time:
            # The instant each story's `Date` starts at (the agent's `restartDate`).
            epoch_ms = int(FROZEN_TIME.timestamp() * 1000)
            context.add_init_script(script=f"window.__storyshelfEpoch = {epoch_ms};")
            context.clock.install(time=FROZEN_TIME)
        if hold_time and not clock_running:
            hold(context)
        else:
            context.clock.set_fixed_time(FROZEN_TIME)
        page = (
            _frame_controlled_page(browser, context, size) if begin_frames else context.new_page()
        )
        guard.install(page)
    except BaseException:
        context.close()
        raise
    return context, page


def hold(context: BrowserContext) -> None:
    """Pause the context's running clock at `FROZEN_TIME`: the timers, and `Date` with them,
    move only as the renderer runs them (a chart timed by `Date.now()` tweens as one timed by
    `performance.now` does), and each story's `Date` starts at `FROZEN_TIME` again (the agent's
    `show`), so the same story sees the same dates whatever was shown before it."""
    context.clock.pause_at(FROZEN_TIME)
    context.clock.set_system_time(FROZEN_TIME)  # a page whose clock ran had it fixed


def _frame_controlled_page(browser: ChildBrowser, context: BrowserContext, size: Viewport) -> Page:
    """A page of `context` that draws only the frames begun for it. Playwright opens no such
    page itself: it is created through the browser's DevTools session in the context (whose id
    a first page of it gives, closed after) and Playwright adopts it as it adopts a popup, with
    the context's scripts, clock and viewport."""
    first = context.new_page()
    try:
        target = context.new_cdp_session(first).send("Target.getTargetInfo")["targetInfo"]
        session = browser.browser.new_browser_cdp_session()
        try:
            with context.expect_page() as adopted:
                session.send(
                    "Target.createTarget",
                    {
                        "url": "about:blank",
                        "browserContextId": target["browserContextId"],
                        "enableBeginFrameControl": True,
                        "width": size["width"],
                        "height": size["height"],
                    },
                )
        finally:
            session.detach()
    finally:
        first.close()
    return adopted.value
