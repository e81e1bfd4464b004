"""A plugin whose children speak the next protocol version, as a child of a newer release
would: loaded with `STORYSHELF_PLUGINS=tests.other_version`, the host must refuse it."""

from __future__ import annotations

from child.worker import loop
from child.worker.handler import Handler
from ipc.messages import PROTOCOL_VERSION
from supervisor.builds.kinds import Kind


def parent_kinds() -> dict[str, Kind]:
    return {}


def child_handlers() -> dict[str, Handler]:
    loop.PROTOCOL_VERSION = PROTOCOL_VERSION + 1  # read by the fork server; its children inherit it
    return {}
