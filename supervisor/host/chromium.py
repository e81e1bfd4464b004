"""Which browser the children drive: the parent never starts one, it only tells them where it is.

The path travels in the environment (`ipc.storybook.CHROMIUM_VARIABLE`), set before the fork
server is forked, so every child of every generation inherits it and no job message carries it.
"""

from __future__ import annotations

import os
import shutil

from structlog.typing import FilteringBoundLogger

from ipc.storybook import CHROMIUM_VARIABLE, configured_chromium


def export(chosen: str | None, log: FilteringBoundLogger) -> str:
    """Put the browser's path (`chosen`, else the environment's, else Debian's) where the
    children will find it; returns it.

    A host without Chromium still runs uploads of screenshots, so a missing browser is a warning
    here, not a refusal; each Storybook job then fails with the same advice.
    """
    path = chosen or configured_chromium()
    os.environ[CHROMIUM_VARIABLE] = path
    if shutil.which(path) is None:
        log.warning(
            "Chromium not found: Storybook builds will fail until it is installed "
            "(apt-get install chromium-headless-shell) or run --chromium names it",
            chromium=path,
        )
    return path
