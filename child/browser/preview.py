"""What a Storybook preview says about its stories: every story's parameters, tags and globals.

Parameters are not in `index.json`: they are code, evaluated by the preview. So the plan loads
the build's `iframe.html` once, waits for the preview to be ready (`__STORYBOOK_PREVIEW__.ready()`,
Storybook 8 and later) and asks it for every story at once (`extract()`, which imports every
story file); Storybook 7's preview has no `ready()`, and its story store
(`__STORYBOOK_STORY_STORE__`: `initializationPromise`, `cacheAllCSFFiles()`, `extract()`) is
asked instead. Each story's record comes back as Storybook gives it (`parameters`, `tags`,
`globals`, `storyGlobals`, ...), without its functions, and with the preview's initial and user
globals beside them.

A preview that cannot load (a script error before it is ready, no Storybook in the page, a
story file that throws on import, a preview that never answers) raises `PreviewError` with the
browser's own words. A preview that hangs its page (a story file that spins on import) costs
the deadline, never the child: a watchdog ends the page then (`child.browser.watchdog`). A
file of the build that the child's server could not give (the store did not answer) raises
`ServeFailed` instead, failed or not: it is no fault of the build's.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Page
from playwright.sync_api import TimeoutError as PlaywrightTimeout

from child.browser.errors import first_line
from child.browser.launch import ChildBrowser
from child.browser.pages import open_page
from child.browser.site import RequestGuard, ServeFailures, Site
from child.browser.watchdog import BEAT_SECONDS, POLL_MS, Watchdog

#: How long a preview may take to load and describe its stories.
PREVIEW_TIMEOUT_SECONDS = 30.0
#: How long a loaded page may go without a Storybook preview before it is said to have none.
NO_PREVIEW_SECONDS = 5.0

#: The most objects the preview's answer may hold. An object that several stories share (a
#: preview's table of viewports, a theme) is written out in each of them, so that every story's
#: record is whole; the cap stops a preview whose values share objects in a way that would
#: multiply without end.
MAX_OBJECTS = 2_000_000

#: Started once in the page, then polled: null while pending, else {ok: JSON text} or {error}.
#: Records are made JSON here (functions dropped, a value that contains itself cut where it
#: recurs, an object that several values share written in each) so that any parameter value
#: survives the trip.
EXTRACT = """([noPreviewMs, maxObjects]) => {
  const agent = window.__storyshelf;
  if (agent.extraction) return agent.extraction;
  const preview = window.__STORYBOOK_PREVIEW__;
  if (!preview) {
    const loaded = document.readyState === 'complete';
    if (loaded && agent.errors.length) return { error: agent.errors[0] };
    if (loaded && performance.now() > noPreviewMs) {
      return { error: 'the page has no Storybook preview (window.__STORYBOOK_PREVIEW__ is not defined)' };
    }
    return null;
  }
  if (agent.extracting) return null;
  agent.extracting = true;
  const plain = (value) => {
    const path = [];
    let budget = maxObjects;
    return JSON.stringify(value, function (key, item) {
      if (typeof item === 'function' || typeof item === 'symbol') return undefined;
      if (typeof item === 'bigint') return String(item);
      if (item && typeof item === 'object') {
        if (typeof Node !== 'undefined' && item instanceof Node) return undefined;
        while (path.length && path[path.length - 1] !== this) path.pop();
        if (path.includes(item)) return undefined;
        if (--budget < 0) {
          throw Object.assign(
            new Error(`the preview's stories hold more than ${maxObjects} objects`), { ours: true });
        }
        path.push(item);
      }
      return item;
    });
  };
  const describe = (error) => {
    if (error && error.ours) return error.message;
    return (error && error.message) ? `${error.name || 'Error'}: ${error.message}` : String(error);
  };
  (async () => {
    let stories;
    let globals = {};
    if (typeof preview.ready === 'function') {
      await preview.ready();
      stories = await preview.extract();
      const user = preview.storyStoreValue && preview.storyStoreValue.userGlobals;
      if (user) globals = { initial: user.initialGlobals, user: user.globals };
    } else {
      const store = window.__STORYBOOK_STORY_STORE__;
      if (!store) throw new Error('the preview has neither ready() nor a story store');
      if (store.initializationPromise) await store.initializationPromise;
      if (typeof preview.extract === 'function') stories = await preview.extract();
      else {
        await store.cacheAllCSFFiles();
        stories = store.extract();
      }
      const held = store.globals;
      if (held) globals = { initial: held.initialGlobals, user: held.globals };
    }
    return plain({ stories, globals });
  })().then(
    (text) => { agent.extraction = { ok: text }; },
    (error) => { agent.extraction = { error: describe(error) }; },
  );
  return null;
}"""


class PreviewError(Exception):
    """The preview did not load or could not describe its stories (the browser's message)."""


@dataclass(frozen=True)
class PreviewStories:
    """Every story's record by id, and the preview's globals."""

    stories: dict[str, dict[str, Any]]
    initial_globals: dict[str, Any]
    user_globals: dict[str, Any]


def read_stories(
    browser: ChildBrowser,
    site: Site,
    timeout: float = PREVIEW_TIMEOUT_SECONDS,
    beat: Callable[[], None] = lambda: None,
    *,
    page: Page | None = None,
    look: Callable[[], None] = lambda: None,
) -> PreviewStories:
    """Load the preview of the build `site` serves in `page`, or in a page of `browser` of its
    own (the capture agent installed, a `RequestGuard` on its requests, closed after), and
    extract it, all within `timeout`: the watchdog ends the page (`ChildBrowser.rescue`) when it
    outlives it, and beats for it meanwhile (opening a page and loading one block the thread
    that beats when Chromium is slow to start a renderer). `beat` is the job's progress, also
    called every `BEAT_SECONDS` of waiting; `look` is called before each ask (a capture page,
    which the child keeps for the build's shards, draws only the frames begun for it)."""
    late = f"the preview did not describe its stories in {timeout:g} s"
    with Watchdog(browser.rescue, beat=beat, last_resort=browser.last_resort) as watchdog:
        watchdog.arm(timeout, late)
        context = None
        if page is None:
            context, page = open_page(browser, RequestGuard(site.origin))
        served = ServeFailures(site)
        served.watch(page)
        try:
            stories = _read(page, site.url("iframe.html"), timeout, beat, look)
        except PreviewError as error:
            # Requests of a page the watchdog ended fail too: then only a wait on the store
            # is the host's; else any request the server failed is.
            failure = site.still_reading(late) if watchdog.fired else served.take()
            if failure is not None:
                raise failure from error
            if watchdog.fired:
                raise PreviewError(late) from error
            raise
        finally:
            if context is not None:
                context.close()
    # A file of the build the site could not give (the store down) can leave the preview
    # loaded without some of its stories: the host's trouble, for the job to be tried again.
    if (failure := served.take()) is not None:
        raise failure
    return stories


def _extract(
    page: Page, deadline: float, beat: Callable[[], None], look: Callable[[], None]
) -> Any:
    """The preview's answer to `EXTRACT`, asked every `POLL_MS` after `look`, with a beat every
    `BEAT_SECONDS` of waiting; `PlaywrightTimeout` once `deadline` passes."""
    beaten = time.monotonic()
    while True:
        look()
        answer = page.evaluate(EXTRACT, [NO_PREVIEW_SECONDS * 1000, MAX_OBJECTS])
        if answer is not None:
            return answer
        now = time.monotonic()
        if now >= deadline:
            raise PlaywrightTimeout("the preview did not answer in time")
        if now - beaten >= BEAT_SECONDS:
            beat()
            beaten = now
        page.wait_for_timeout(POLL_MS)


def _read(
    page: Page, url: str, timeout: float, beat: Callable[[], None], look: Callable[[], None]
) -> PreviewStories:
    deadline = time.monotonic() + timeout
    try:
        response = page.goto(url, wait_until="commit", timeout=timeout * 1000)
    except PlaywrightTimeout:
        raise PreviewError(f"the preview did not load in {timeout:g} s") from None
    except PlaywrightError as error:
        raise PreviewError(f"the preview did not load: {first_line(error)}") from None
    if response is not None and response.status >= 400:
        raise PreviewError(f"the preview's page answered HTTP {response.status}")
    try:
        answer = _extract(page, deadline, beat, look)
    except PlaywrightTimeout:
        raise PreviewError(
            f"the preview did not describe its stories in {timeout:g} s{_errors(page)}"
        ) from None
    except PlaywrightError as error:
        raise PreviewError(f"the preview failed: {first_line(error)}") from None
    if "error" in answer:
        raise PreviewError(str(answer["error"]))
    return _described(answer["ok"])


def _described(text: str) -> PreviewStories:
    """The preview's answer, checked: a preview that answers another shape (a string, an
    array, globals as a list, parameters nested past what JSON can be read to) is no Storybook
    the plan can read, and its build fails at once with one line saying what was wrong."""
    try:
        document = json.loads(text)
    except RecursionError:
        raise PreviewError(
            "the preview's extract() answered values nested too deep to read"
        ) from None
    except ValueError as error:
        raise PreviewError(f"the preview's extract() answered no JSON: {error}") from None
    if not isinstance(document, dict):
        raise PreviewError(f"the preview answered {_shape(document)}, not its stories")
    stories = document.get("stories")
    if stories is None:
        stories = {}
    if not isinstance(stories, dict):
        raise PreviewError(
            f"the preview's extract() answered {_shape(stories)}, not a map of stories"
        )
    globals_ = document.get("globals") or {}
    if not isinstance(globals_, dict):
        raise PreviewError(f"the preview's globals are {_shape(globals_)}, not a map")
    initial, user = globals_.get("initial") or {}, globals_.get("user") or {}
    for name, value in (("initial", initial), ("user", user)):
        if not isinstance(value, dict):
            raise PreviewError(f"the preview's {name} globals are {_shape(value)}, not a map")
    return PreviewStories(
        stories={str(key): value for key, value in stories.items() if isinstance(value, dict)},
        initial_globals=initial,
        user_globals=user,
    )


def _shape(value: object) -> str:
    """What a JSON value is, for a message."""
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _errors(page: Page) -> str:
    """The page's first script error, if it can still say one, for a message."""
    try:
        errors = page.wait_for_function("() => window.__storyshelf.errors", timeout=1000)
        listed = errors.json_value()
    except PlaywrightError:
        return ""
    return f" (first script error: {listed[0]})" if listed else ""
