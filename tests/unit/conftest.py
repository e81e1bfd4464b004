"""Fixtures of the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.unit.jobs import MakeChild, make_child_fixture


@pytest.fixture
def make_child() -> Iterator[MakeChild]:
    """Makes ready children, each with a real socket pair (closed after the test)."""
    yield from make_child_fixture()
