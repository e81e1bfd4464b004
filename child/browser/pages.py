"""A page of the child's browser set up for stable pixels, before the build's first script runs.

Each job gets its own browser context (a clean cache, storage and permissions per build) with one
page. What would let a story's pixels differ between runs or hosts is fixed here: the viewport
and device scale factor, reduced motion, a light colour scheme, the locale and time zone, a clock
frozen at one instant (`Date` and `Date.now()` always give `FROZEN_TIME`; timers still run), a
seeded `Math.random` (the agent), and no service worker. Every request that leaves the build's
server is aborted (`child.browser.site.RequestGuard`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from playwright.sync_api import BrowserContext, Page

from child.browser.launch import ChildBrowser
from child.browser.site import RequestGuard
from ipc.storybook import DEFAULT_VIEWPORT_HEIGHT, DEFAULT_VIEWPORT_WIDTH, Viewport

#: The instant every story sees as now, on every host.
FROZEN_TIME = datetime(2024, 1, 1, 12, 0, 0, tzinfo=UTC)
AGENT = Path(__file__).with_name("agent.js")


def open_page(
    browser: ChildBrowser, guard: RequestGuard, viewport: Viewport | None = None
) -> tuple[BrowserContext, Page]:
    """A new context and its page, ready to load the build; close the context when done."""
    size = viewport or {"width": DEFAULT_VIEWPORT_WIDTH, "height": DEFAULT_VIEWPORT_HEIGHT}
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
        service_workers="block",
    )
    try:
        context.add_init_script(path=AGENT)
        context.clock.set_fixed_time(FROZEN_TIME)
        page = context.new_page()
        guard.install(page)
    except BaseException:
        context.close()
        raise
    return context, page
