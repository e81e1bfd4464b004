"""Fixtures of the store tests: a bucket of the suite's object store, and its environment."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipc.artifacts.s3 import S3Store
from tests.artifact_stores import new_store
from tests.object_store_server import ObjectStore


@pytest.fixture
def s3_environment(monkeypatch: pytest.MonkeyPatch, object_store_server: ObjectStore) -> None:
    """This process's environment pointed at the suite's object store, as a host's would be."""
    for name, value in object_store_server.environment().items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def s3_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, object_store_server: ObjectStore
) -> S3Store:
    """A fresh prefix of the suite's bucket."""
    store = new_store("s3", tmp_path, monkeypatch, object_store_server)
    assert isinstance(store, S3Store)
    return store
