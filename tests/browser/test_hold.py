"""The page's held clock, run forward by the agent (`child.browser.hold.run_then`): every due
timer fires, in every frame of the page, a timer that throws is logged and stops nothing, and
the look asked for comes back in the same call."""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from child.browser.hold import run_then
from child.browser.launch import ChildBrowser
from child.browser.pages import open_page
from child.browser.site import RequestGuard

#: A page with a counter on `setInterval` and a timer that throws, and a frame of its own
#: origin with a counter of its own.
TIMERS = """<!doctype html><html><body>
<iframe srcdoc="<script>window.ticks = 0; setInterval(() => { window.ticks += 1; }, 10);</script>">
</iframe>
<script>
window.ticks = 0;
setInterval(() => { window.ticks += 1; }, 10);
setTimeout(() => { throw new Error('the story broke its own timer'); }, 25);
</script></body></html>"""


def _ticks(page: Any) -> tuple[int, int]:
    main, frame = page.evaluate("() => [window.ticks, window.frames[0].ticks]")
    return int(main), int(frame)


@pytest.mark.timeout(60)
def test_the_clock_runs_in_every_frame_past_a_throwing_timer_and_answers_the_look(
    browser: ChildBrowser,
) -> None:
    context, page = open_page(browser, RequestGuard("http://127.0.0.1:9"), hold_time=True)
    try:
        page.set_content(TIMERS)
        page.wait_for_function("() => window.frames[0] && window.frames[0].ticks === 0")
        page.wait_for_timeout(100)
        assert _ticks(page) == (0, 0), "held: no real time moves the page's timers"
        with capture_logs() as logs:
            whole = run_then(page, 100, "whole")
        assert whole is True, "the agent's answer comes back with the run"
        assert _ticks(page) == (10, 10), "every due timer fired, in the page and in its frame"
        assert [
            entry["error"] for entry in logs if entry["event"] == "a timer of the story threw"
        ] == ["Error: the story broke its own timer"]
        assert run_then(page, 0, "whole") is True
        assert _ticks(page) == (10, 10), "a look alone runs no time"
    finally:
        context.close()
