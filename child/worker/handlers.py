"""The child's side of each job kind: the function that does the work, by kind.

Only the child's start-up reads this registry; what a handler is lives in `child.worker.handler`,
so that each handler's module can name it without importing the registry back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from child.browser.launch import child_browser
from child.capture import shard
from child.notify import post
from child.report import publish
from child.storybook import kept, plan
from child.worker.handler import Handler, Progress
from ipc.plugins import plugin_modules


def _noop(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return {}


def warm(build: dict[str, Any] | None, beat: Callable[[], None]) -> None:
    """Start what a coming Storybook capture needs (`ipc.messages.Warm`): the browser, and with
    the build named, its page with the preview loaded (`child.storybook.kept.preload`)."""
    if build is None:
        child_browser(beat)
    else:
        kept.preload(build, beat)


def registered_handlers() -> dict[str, Handler]:
    """The built-in handlers, then those of the plugin modules (`ipc.plugins`)."""
    handlers: dict[str, Handler] = {
        "capture": shard.run,
        "plan": plan.run,
        "publish": publish.run,
        "notify": post.run,
        "noop": _noop,
    }
    for module in plugin_modules():
        handlers.update(module.child_handlers())
    return handlers
