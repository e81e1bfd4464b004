"""Time in a capture's page moves only when the renderer runs it forward.

A capture page's timers, animation frames, `performance.now` and `Date` are Playwright's fake
clock, paused (`child.browser.pages.open_page(hold_time=True)`), and `Date` starts each story at
the same instant. The renderer runs it forward in two ways: in growing steps while it waits for
a story to finish rendering, from a frame up (a play function's `setTimeout`, a loader's
debounce must still fire), and then, before the shots, on from timer to timer while the next is
due soon (`SETTLE_HORIZON_MS`), so that motion driven by script (a chart's tween, timed by
`requestAnimationFrame` or by `Date.now()`, a counter on `setInterval`, a mock's delayed answer)
reaches the same state on every run and every host, whatever the machine's speed, while a
toast set to leave seconds later is still shown: the motion's end (at most `RUN_TO_END_MS`
after the story was shown), or its first frame (`FIRST_FRAME_MS`) for a story that asks to be
paused at its start. Between shots the clock stands still, so a loop that never ends (a
spinner drawn from `performance.now`) holds still too.

A timer callback that throws is the story's own business, as it would be in a browser: it is
logged, and the clock has still run the whole stretch (Playwright's clock fires every due timer
before it reports the first error).
"""

from __future__ import annotations

from typing import Any

import structlog
from playwright.sync_api import Page

log = structlog.get_logger(__name__)

#: One frame of the page's clock: how far it runs at the first look at a story still rendering.
FRAME_MS = 16
#: The furthest the clock runs, from the moment a story was shown, before the shots of a story
#: paused at the end of its animations: past the end of the motion component libraries ship
#: (recharts animates for 1.5 s, chart.js for 1 s), without running loops that never end for
#: long (625 frames). It runs that far only while timers keep coming (`SETTLE_HORIZON_MS`).
RUN_TO_END_MS = 10_000
#: How far ahead of the last timer that fired the next must be due for the clock to run on to
#: it after a story finished (`agent.js`'s `settle`): past a transition's end (Material's
#: longest take 0.4 s, antd's motion deadline 0.5 s), a mock's delayed answer (msw's `delay()`
#: 0.1-0.4 s) and a debounce, short of a toast's dismissal (antd's message 3 s, its
#: notification 4.5 s, a snackbar's 4-6 s), which would take it out of the shot.
SETTLE_HORIZON_MS = 1_000
#: How far it runs for a story paused at its first frame: one frame, so that what is drawn on
#: the first animation frame is drawn.
FIRST_FRAME_MS = FRAME_MS


def run_then(page: Page, milliseconds: int, method: str, *args: Any) -> Any:
    """Run the page's clock forward by `milliseconds` (not at all for 0), firing every timer due
    on the way, then answer the agent's `method(*args)`: one round trip through the driver.

    The clock is run by the agent (`agent.js`'s `after`), through the fake clock's own `runFor`
    in each frame: `page.clock.run_for` costs two round trips (it also adds an init script to
    the context, one per call, over hundreds of stories), measured 1.8-2.5 ms of CPU a run
    against 1.1-1.4, and a look after it one more. An error of the page itself (it crashed, it
    closed) raises; one thrown by the story's own timer callback is logged."""
    result = page.evaluate(
        "([ms, method, args]) => window.__storyshelf.after(ms, method, ...args)",
        [milliseconds, method, list(args)],
    )
    if result["threw"] is not None:
        log.info("a timer of the story threw", error=result["threw"])
    return result["answer"]
