"""Time in a capture's page moves only when the renderer runs it forward.

A capture page's timers, animation frames and `performance.now` are Playwright's fake clock,
paused (`child.browser.pages.open_page(hold_time=True)`). The renderer runs it forward in two
ways: in growing steps while it waits for a story to finish rendering, from a frame up (a play
function's `setTimeout`, a loader's debounce must still fire), and then once by a fixed stretch
before the shots, so that motion driven by script (a chart's `requestAnimationFrame` tween, a counter on
`setInterval`, a toast's timeout) reaches the same state on every run and every host, whatever
the machine's speed: its end (`RUN_TO_END_MS`), or its first frame (`FIRST_FRAME_MS`) for a
story that asks to be paused at its start. Between shots the clock stands still, so a loop
that never ends (a spinner drawn from `performance.now`) holds still too.

A timer callback that throws is the story's own business, as it would be in a browser: it is
logged, and the clock has still run the whole stretch (Playwright's clock fires every due timer
before it reports the first error).
"""

from __future__ import annotations

import structlog
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page

log = structlog.get_logger(__name__)

#: One frame of the page's clock: how far it runs at the first look at a story still rendering.
FRAME_MS = 16
#: How far the clock runs before the shots of a story paused at the end of its animations: past
#: the end of the motion component libraries ship (recharts animates for 1.5 s, Material's
#: longest transitions take 0.4 s, a toast waits 5 s), without running loops that never end for
#: long (625 frames).
RUN_TO_END_MS = 10_000
#: How far it runs for a story paused at its first frame: one frame, so that what is drawn on
#: the first animation frame is drawn.
FIRST_FRAME_MS = FRAME_MS


def run_clock(page: Page, milliseconds: int) -> None:
    """Run the page's clock forward by `milliseconds`, firing every timer due on the way.

    An error of the page itself (it crashed, it closed) raises; one thrown by the story's own
    timer callback does not."""
    if milliseconds <= 0:
        return
    try:
        page.clock.run_for(milliseconds)
    except PlaywrightError as error:
        if page.is_closed() or "Target" in str(error):  # Playwright's words for a page gone
            raise
        first = str(error).strip().splitlines()
        log.info("a timer of the story threw", error=first[0] if first else type(error).__name__)
