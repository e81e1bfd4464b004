"""The plugin modules named in `STORYSHELF_PLUGINS` (comma-separated): extra job kinds.

A kind has two halves, the parent's (`parent_kinds()`, see `supervisor.builds.kinds`) and the
child's (`child_handlers()`, see `child.worker.handlers`). Both sides read the variable here, so
they always load the same modules; the tests load their crashing and hanging kinds this way.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

VARIABLE = "STORYSHELF_PLUGINS"


def plugin_modules() -> list[ModuleType]:
    """The modules `STORYSHELF_PLUGINS` names, imported, in the order given."""
    names = os.environ.get(VARIABLE, "").split(",")
    return [importlib.import_module(name.strip()) for name in names if name.strip()]
