"""The browser the tests render in: Debian's Chromium, or what `STORYSHELF_CHROMIUM` names.

Without it the tests that need it are skipped on a developer's machine; with `CI=true` they fail
instead, so CI can never go green without a browser (`scripts/install-os-packages` installs it).
"""

from __future__ import annotations

import os
import shutil

import pytest

from ipc.storybook import configured_chromium


def require_chromium() -> str:
    """The browser's path; fails the test under `CI=true` when there is none, else skips it."""
    path = configured_chromium()
    if shutil.which(path) is not None:
        return path
    if os.environ.get("CI") == "true":
        pytest.fail(
            f"Chromium is required in CI, and there is none at {path} (apt-get install chromium-headless-shell)"
        )
    pytest.skip(f"no Chromium at {path}")
