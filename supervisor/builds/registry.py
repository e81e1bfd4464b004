"""The job kinds a host runs: the built-in ones, then those of plugin modules (`ipc.plugins`).

Tests load their crashing, hanging and memory-eating kinds here with `STORYSHELF_PLUGINS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ipc.plugins import plugin_modules
from supervisor.builds import capture, notify, plan, publish
from supervisor.builds.kinds import Kind


def _is_mapping(data: Any) -> bool:
    return isinstance(data, Mapping)


def registered_kinds() -> dict[str, Kind]:
    """The built-in kinds, then those of the plugin modules (`ipc.plugins`)."""
    kinds = {
        "capture": capture.KIND,
        "plan": plan.KIND,
        "publish": publish.KIND,
        "notify": notify.KIND,
        # Does nothing in a child: measures the host's own overhead, and checks a host end to end.
        "noop": Kind("noop", accepts=_is_mapping),
    }
    for module in plugin_modules():
        kinds.update(module.parent_kinds())
    return kinds
