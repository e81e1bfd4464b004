"""Whether a build's stories all fail with one and the same error, so the rest need not render.

A global loader that throws, a decorator every story goes through, the mock service worker's
script missing from the build: then every story fails the same way, and rendering each one
(and trying it again on a fresh page, `StoryRenderer.take`) only says it again, minutes later.
A child watches its build's stories as it captures them (the watch is kept with the build's
page, `child.storybook.kept`, so it spans the child's shards of the build) and calls the build
broken once the evidence says the error is not a story's own:

* no story of the build has rendered in this child, and every one tried failed with the same
  message (the page's origin taken out, so the messages of two children's pages compare);
* at least `STORIES` stories failed so, of at least `TITLES` components (a broken component
  fails its own stories alike, and that is no reason to stop the others);
* at least `ALONE` of them failed on a fresh page, alone, so a story before them on a reused
  page is not what broke them.

Until it is decided, a story that fails with that error on a reused page is not tried again on
a fresh one once `ALONE` stories have failed with it there (a fresh page would say it again).
The first story that renders, or a second error, ends the watch for good: that build is not
broken by one error, and every story is then rendered and retried as usual.

The child then fails the rest of its shard without rendering them (`ipc.storybook.NOT_RENDERED`)
and says why in its result (`"stopped"`); the parent ends the build (`supervisor.builds.stop`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

#: The evidence that the build is broken by one error (see the module's docstring).
STORIES = 3
TITLES = 2
ALONE = 2

#: Where the watch is: still watching, broken by one error, or ended (a story rendered, or the
#: stories fail in more than one way).
State = Literal["watching", "broken", "healthy"]


@dataclass
class Breakdown:
    """The watch over one build's stories in one child."""

    state: State = "watching"
    #: The one error every story tried so far failed with.
    error: str | None = None
    failed: int = 0
    alone: int = 0
    titles: set[str] = field(default_factory=set)

    @property
    def stopped(self) -> str | None:
        """The error that broke the build, once it did."""
        return self.error if self.state == "broken" else None

    def worth_retrying(self, error: str) -> bool:
        """Whether a story that failed with `error` on a reused page is worth a fresh page."""
        return not (self.state == "watching" and error == self.error and self.alone >= ALONE)

    def saw(self, title: str, error: str | None, *, alone: bool) -> None:
        """A story of `title` rendered (`error` None) or failed with `error`; `alone`: on a
        fresh page of its own."""
        if self.state != "watching":
            return
        if error is None or (self.error is not None and error != self.error):
            self.state = "healthy"
            return
        self.error = error
        self.failed += 1
        self.alone += alone
        self.titles.add(title)
        if self.failed >= STORIES and len(self.titles) >= TITLES and self.alone >= ALONE:
            self.state = "broken"
