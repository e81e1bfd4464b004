"""A plugin whose children say nothing at start while the file `$SILENT_CHILDREN_MARKER`
exists, as a child stuck in native code before its hello would: loaded with
`STORYSHELF_PLUGINS=tests.kinds,tests.silent_children`."""

from __future__ import annotations

import os
import time
from pathlib import Path

from child.worker import loop
from child.worker.handler import Handler
from supervisor.builds.kinds import Kind

_check_engine = loop.check_engine


def _silent_while_marked() -> tuple[str, str | None]:
    marker = Path(os.environ["SILENT_CHILDREN_MARKER"])
    while marker.exists():
        time.sleep(0.05)
    return _check_engine()


def parent_kinds() -> dict[str, Kind]:
    return {}


def child_handlers() -> dict[str, Handler]:
    loop.check_engine = _silent_while_marked  # read by the fork server; its children inherit it
    return {}
