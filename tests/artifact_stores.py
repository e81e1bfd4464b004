"""The artifact stores the suite runs on: a folder, and a bucket of its own SeaweedFS.

A test that takes the `store` fixture (tests/conftest.py) runs once on each. The bucket case
gets a fresh prefix of the suite's bucket, and its process's environment points at the server
(endpoint and credentials, as a host reads them) and at a cache folder of the test's own, so
hosts it starts and children it runs in-process reach the same store.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Literal

import pytest

from ipc.artifacts.folder import FolderStore
from ipc.artifacts.location import CACHE_DIR_VARIABLE
from ipc.artifacts.s3 import S3Store
from ipc.artifacts.store import ArtifactStore
from tests.object_store_server import ObjectStore

StoreKind = Literal["folder", "s3"]
STORE_KINDS: tuple[StoreKind, ...] = ("folder", "s3")


def new_store(
    kind: StoreKind,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server: ObjectStore | None = None,
) -> ArtifactStore:
    """A store of `kind`, empty, for one test."""
    monkeypatch.setenv(CACHE_DIR_VARIABLE, str(tmp_path / "cache"))
    if kind == "folder":
        return FolderStore(tmp_path / "artifacts")
    assert server is not None
    for name, value in server.environment().items():
        monkeypatch.setenv(name, value)
    return S3Store(server.bucket, f"test-{uuid.uuid4().hex[:12]}")
