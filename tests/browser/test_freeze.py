"""A frozen animation gives one image however far it had run: the child's browser, its flags and
the agent's `freeze`, on pages of their own (no Storybook), where the race is easiest to see."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pyvips
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from child.browser.launch import ChildBrowser
from child.browser.pages import AGENT

#: How long a page may take to give its screenshot. Now and then, on a busy machine, a fresh
#: context keeps its renderer from answering for tens of seconds (the capture's watchdog fails
#: such a story after `SHOTS_SECONDS`): that is not the race this test is about, so such a page
#: is skipped and another opened, until `ENOUGH_SHOTS` pages have answered, at most
#: `MOST_PAGES` tried.
STALL_MS = 5_000
ENOUGH_SHOTS = 8
MOST_PAGES = 30

#: Sanity UI's spinner, in short: an SVG arc that a CSS transform animation turns forever.
SPINNER = """<!doctype html><html><head><style>
@keyframes turn { from { transform: rotate(0deg) } to { transform: rotate(360deg) } }
.spinner svg { animation: turn 500ms linear infinite; }
</style></head><body><div class="spinner" id="host"></div><script>
function show() {
  document.getElementById('host').innerHTML = '<span><svg width="25" height="25"'
    + ' viewBox="0 0 25 25"><circle cx="12.5" cy="12.5" r="8" fill="none" stroke="#556"'
    + ' stroke-width="1.2" stroke-dasharray="40 20"/></svg></span>';
}
</script></body></html>"""


def test_a_spinner_frozen_at_any_moment_of_its_turn_gives_one_image(
    browser: ChildBrowser, tmp_path: Path
) -> None:
    """Paused at its first frame whether the compositor had begun to turn it or not: before
    animations were kept on the main thread, about half of these pages drew the arc filtered."""
    page_file = tmp_path / "spinner.html"
    page_file.write_text(SPINNER)
    digests = set()
    shots = 0
    for attempt in range(MOST_PAGES):
        if shots == ENOUGH_SHOTS:
            break
        context = browser.browser.new_context(viewport={"width": 40, "height": 30})
        try:
            context.add_init_script(path=AGENT)
            page = context.new_page()
            page.goto(page_file.as_uri())
            page.evaluate("show()")
            page.wait_for_timeout(attempt % 3 * 10)
            # The turn, and the SVG's own (empty) timeline.
            assert page.evaluate("() => window.__storyshelf.freeze(false, 0)") == 2
            shot = page.screenshot(animations="allow", timeout=STALL_MS)
            digests.add(hashlib.sha256(shot).hexdigest())
            shots += 1
        except PlaywrightTimeout:
            pass
        finally:
            context.close()
    assert shots == ENOUGH_SHOTS, f"{shots} of {MOST_PAGES} pages gave a screenshot"
    assert len(digests) == 1


#: A focused field inside a shadow root, with a caret of its own colour: red, and wide.
SHADOW_FIELD = """<!doctype html><html><body><div id="host"></div><script>
const root = document.getElementById('host').attachShadow({ mode: 'open' });
root.innerHTML = '<style>input { caret-color: #f00; font-size: 40px; width: 200px; border: 0;'
  + ' outline: 0; background: #fff; color: #fff; }</style><input value="">';
root.querySelector('input').focus();
</script></body></html>"""


def _red_pixels(png: bytes) -> int:
    image = pyvips.Image.new_from_buffer(png, "")[0:3]
    red = (image[0] > 200) & (image[1] < 80) & (image[2] < 80)
    return int(red.avg() / 255 * image.width * image.height)


def test_a_focused_fields_caret_is_hidden_inside_a_shadow_root_too(
    browser: ChildBrowser, tmp_path: Path
) -> None:
    """The caret blinks in real time (on for 500 ms, off for 500): shots across a second and a
    half see it on if it shows at all. Without the freeze, the same shots see it."""
    page_file = tmp_path / "field.html"
    page_file.write_text(SHADOW_FIELD)
    context = browser.browser.new_context(viewport={"width": 240, "height": 80})
    try:
        context.add_init_script(path=AGENT)
        page = context.new_page()
        page.goto(page_file.as_uri())

        def most_red() -> int:
            reds = []
            for _ in range(8):
                reds.append(_red_pixels(page.screenshot(animations="allow", caret="initial")))
                page.wait_for_timeout(200)
            return max(reds)

        assert most_red() > 0, "the caret shows before the freeze"
        page.evaluate("() => window.__storyshelf.freeze(false, 0)")
        assert most_red() == 0
    finally:
        context.close()
