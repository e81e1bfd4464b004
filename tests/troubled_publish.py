"""The real `publish` kind with a child that misbehaves first, for the tests that show a new
kind runs through the same supervisor path as captures. Loaded with
`STORYSHELF_PLUGINS=tests.troubled_publish`; `STORYSHELF_TEST_PUBLISH` says how:

* `crash-once:FILE`: the first attempt (while FILE does not exist) dies on a real SIGSEGV;
* `hold:SECONDS`: each attempt works for SECONDS, with progress, before it publishes.
"""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path
from typing import Any

from child.report import publish
from child.worker.handler import Handler, Progress
from supervisor.builds.kinds import Kind

VARIABLE = "STORYSHELF_TEST_PUBLISH"


def parent_kinds() -> dict[str, Kind]:
    return {}  # the parent's side is the real one


def _troubled(payload: dict[str, Any], progress: Progress) -> Any:
    how, _, argument = os.environ.get(VARIABLE, "").partition(":")
    if how == "crash-once" and not Path(argument).exists():
        Path(argument).touch()
        ctypes.string_at(0)  # a real segmentation fault, as a native library's would be
    if how == "hold":
        deadline = time.monotonic() + float(argument)
        while time.monotonic() < deadline:
            time.sleep(0.05)
            progress({"holding": deadline - time.monotonic()})
    return publish.run(payload, progress)


def child_handlers() -> dict[str, Handler]:
    return {"publish": _troubled}
