"""What the suite needs from the machine: a test without it fails under `CI=true`, where a
missing server or browser is a broken install, and is skipped elsewhere."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def unavailable(what: str, error: object) -> NoReturn:
    """Fail the test under `CI=true` ("<what> is required in CI: <error>"), else skip it."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"{what} is required in CI: {error}")
    pytest.skip(str(error))
