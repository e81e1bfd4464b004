"""A build's page, kept from one of its capture jobs to the next in the same child.

A build's stories come in shards of ten at most (`supervisor.builds.plan`), and a child often
captures several shards of one build in a row. A fresh context, the preview's load and its first
story cost about as much as a dozen stories once loaded, so the page, the build's server and the
renderer of a capture job that ended normally are kept for the child's next capture job of the
same build (same build, stored Storybook and store, in the same browser). A capture job of
another build closes them first (other kinds of job leave them be: a plan opens a page of its
own); a job that raised (a cancel, a store gone, a browser that cannot be launched)
closes them rather than hand the next job a page in a state nobody knows. What each job brings
of its own is swapped in: its beat, and its artifacts, which the build's server reads through.
The watch over whether the build's stories all fail with one error goes with the page
(`child.storybook.breakdown`), so that it sees all of the child's stories of the build.

A child told that a build is coming (`ipc.messages.Warm`, while another child plans it) opens
the build's page ahead of its first capture job (`preload`): the preview loaded, no story shown,
kept exactly as a capture job's page is. The child that plans the build reads its stories from
such a page too (`read_stories`), which it then keeps for its own first shard.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser, child_browser
from child.browser.preview import PreviewStories
from child.browser.render import StoryRenderer
from child.browser.site import Site
from child.storybook.breakdown import Breakdown
from child.storybook.stored import StoredBuild, load
from ipc.storybook import default_viewport


class JobBeat:
    """The beat of the job that uses the kept page now (nothing between jobs)."""

    def __init__(self) -> None:
        self.job: Callable[[], None] = lambda: None

    def __call__(self) -> None:
        self.job()


@dataclass
class KeptPage:
    key: tuple[Any, ...]
    browser: ChildBrowser
    site: Site
    renderer: StoryRenderer
    beat: JobBeat
    breakdown: Breakdown

    def close(self) -> None:
        try:
            self.renderer.close()
        finally:
            self.site.close()


_kept: KeptPage | None = None


@contextlib.contextmanager
def build_page(
    payload: dict[str, Any], build: StoredBuild, browser: ChildBrowser, beat: Callable[[], None]
) -> Iterator[KeptPage]:
    """The page of `payload`'s build, kept from the job before when it was of the same build
    in the same `browser`, else a new one; kept after the block unless it raised."""
    global _kept
    key = (payload["artifacts"], payload["build_id"], payload["storybook"]["sha256"])
    if _kept is not None and (_kept.key != key or _kept.browser is not browser):
        close()
    if _kept is None:
        holder = JobBeat()
        site = Site(build)
        renderer = StoryRenderer(site, beat=holder, browser=lambda: child_browser(holder))
        _kept = KeptPage(key, browser, site, renderer, holder, Breakdown())
    else:
        _kept.site.serve(build)
    kept = _kept
    kept.beat.job = beat
    try:
        yield kept
    except BaseException:
        close()
        raise
    finally:
        kept.beat.job = lambda: None


def preload(build: dict[str, Any], beat: Callable[[], None]) -> bool:
    """Launch the browser and open the page of `build` (a plan's payload: where the store is,
    the build's id and its stored Storybook) with its preview loaded; True when it is ready
    for the build's first story."""
    browser = child_browser(beat)
    stored = load(for_job(build["artifacts"], beat), build["storybook"])
    with build_page(build, stored, browser, beat) as kept:
        return kept.renderer.preload(default_viewport())


def read_stories(
    payload: dict[str, Any], build: StoredBuild, browser: ChildBrowser, beat: Callable[[], None]
) -> PreviewStories:
    """The stories of `payload`'s build (a plan's), read in a new page that is then kept for
    the child's first capture job of the build, as `preload` keeps one: the plan's page load is
    its first shard's. Raises as `child.browser.preview.read_stories` does, the page closed."""
    close()
    with build_page(payload, build, browser, beat) as kept:
        return kept.renderer.read_stories(default_viewport())


def close() -> None:
    """Close the kept page, its renderer and its server, if any."""
    global _kept
    kept, _kept = _kept, None
    if kept is not None:
        kept.close()
