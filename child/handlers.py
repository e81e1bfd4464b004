"""The child's side of each job kind: the function that does the work, by kind.

A handler gets the payload the parent prepared (everything it needs: the child never opens the
database) and a `progress` callback to call after each unit of work, which renews the job's
lease and proves the child is not hung. It returns the result (msgpack-able) or raises; a raised
error is sent to the parent, which retries the job with backoff.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Any

Progress = Callable[[dict[str, Any]], None]
Handler = Callable[[dict[str, Any], Progress], Any]


def _noop(payload: dict[str, Any], progress: Progress) -> dict[str, Any]:
    return {}


def registered_handlers() -> dict[str, Handler]:
    """Built-in handlers plus those of the modules in `STORYSHELF_PLUGINS` (`child_handlers()`)."""
    from child import capture

    handlers: dict[str, Handler] = {"capture": capture.run, "noop": _noop}
    for name in filter(
        None, (part.strip() for part in os.environ.get("STORYSHELF_PLUGINS", "").split(","))
    ):
        handlers.update(importlib.import_module(name).child_handlers())
    return handlers
