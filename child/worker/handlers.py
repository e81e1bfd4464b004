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
from child.storybook import plan
from child.worker.handler import Handler, Progress
from ipc.plugins import plugin_modules


def _noop(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return {}


def warm_browser(beat: Callable[[], None]) -> None:
    """Launch the child's browser now (`ipc.messages.Warm`); the captures that follow reuse it."""
    child_browser(beat)


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
