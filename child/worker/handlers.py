"""The child's side of each job kind: the function that does the work, by kind.

A handler gets the payload the parent prepared (everything it needs: the child never opens the
database) and a `progress` callback to call after each unit of work, which renews the job's
lease and proves the child is not hung. It returns the result (msgpack-able) or raises; a raised
error is sent to the parent, which retries the job with backoff, unless it is a
`ipc.failures.PermanentFailure`: that job fails at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ipc.plugins import plugin_modules

Progress = Callable[[dict[str, Any]], None]
Handler = Callable[[dict[str, Any], Progress], Any]


def _noop(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return {}


def registered_handlers() -> dict[str, Handler]:
    """The built-in handlers, then those of the plugin modules (`ipc.plugins`)."""
    from child.capture import shard
    from child.notify import post
    from child.report import publish
    from child.storybook import plan

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
