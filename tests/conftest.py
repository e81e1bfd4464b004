"""Fixtures: every database test runs on a real PostgreSQL and on SQLite.

PostgreSQL is a throwaway server started once per session (see `tests.postgres_server`), unless
`STORYSHELF_TEST_DATABASE_URL` names one. Without PostgreSQL the PostgreSQL cases are skipped
on a developer's machine; with `CI=true` they fail instead, so CI can never go green without it.
The S3-compatible object store is the same: a throwaway SeaweedFS (`tests.object_store_server`)
unless `STORYSHELF_TEST_S3_ENDPOINT` names one, skipped without `weed`, failing in CI.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import structlog
from playwright.sync_api import Browser, sync_playwright
from sqlalchemy import Engine, text

from child.browser.launch import discard_child_browser
from child.storybook import kept
from ipc.artifacts.store import ArtifactStore
from supervisor.db.connection import connect
from supervisor.db.migrate import upgrade
from supervisor.db.tables import metadata
from tests import scheduling
from tests.artifact_stores import STORE_KINDS, StoreKind, new_store
from tests.chromium import require_chromium
from tests.hostile import Listeners
from tests.object_store_server import (
    ENDPOINT_VARIABLE,
    ExternalObjectStore,
    ObjectStore,
    own_server,
)
from tests.postgres_server import TemporaryPostgres, own_postgres_server

URL_VARIABLE = "STORYSHELF_TEST_DATABASE_URL"


@pytest.fixture(autouse=True)
def _reset_logging() -> Iterator[None]:
    """Commands run in-process point structlog at pytest's captured stderr; undo that after each test."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[TemporaryPostgres | None]:
    """The session's own server; None when `STORYSHELF_TEST_DATABASE_URL` names another."""
    if os.environ.get(URL_VARIABLE):
        yield None
        return
    yield from own_postgres_server()


@pytest.fixture(scope="session")
def object_store_server() -> Iterator[ObjectStore]:
    """The session's own SeaweedFS; the store `STORYSHELF_TEST_S3_ENDPOINT` names, when set.

    The external store's credentials and region come from the standard AWS variables, its
    bucket from `STORYSHELF_TEST_S3_BUCKET` (made if missing); tests isolate by bucket or prefix.
    """
    if os.environ.get(ENDPOINT_VARIABLE):
        yield ExternalObjectStore.from_environment()
        return
    yield from own_server()


@pytest.fixture(params=STORE_KINDS)
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> ArtifactStore:
    """An empty artifact store of each kind, a folder and a bucket (`tests.artifact_stores`);
    the object store is started only for the bucket's case."""
    kind: StoreKind = request.param
    server = request.getfixturevalue("object_store_server") if kind == "s3" else None
    return new_store(kind, tmp_path, monkeypatch, server)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: TemporaryPostgres | None) -> Iterator[str]:
    """A migrated PostgreSQL database for the session."""
    url = os.environ.get(URL_VARIABLE) or (postgres_server.url if postgres_server else "")
    engine = connect(url)
    upgrade(engine)
    engine.dispose()
    yield url


def _truncate_all(engine: Engine) -> None:
    names = ", ".join(table.name for table in metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated once for the session: each test gets a copy, since running
    every migration per test cost ~0.15 s each, on hundreds of tests."""
    path = tmp_path_factory.mktemp("migrated") / "storyshelf.db"
    engine = connect(f"sqlite:///{path}")
    upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(params=["postgresql", "sqlite"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty database: once on PostgreSQL, once on a SQLite file."""
    if request.param == "sqlite":
        path = tmp_path / "storyshelf.db"
        shutil.copyfile(request.getfixturevalue("migrated_sqlite"), path)
        yield f"sqlite:///{path}"
        return
    url = request.getfixturevalue("postgres_url")
    engine = connect(url)
    _truncate_all(engine)
    engine.dispose()
    yield url


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = connect(database_url)
    try:
        yield engine
    finally:
        engine.dispose()


@pytest.fixture
def listeners() -> Iterator[Listeners]:
    """A TCP and a UDP listener on loopback that the hostile Storybook's stories aim at."""
    watching = Listeners()
    yield watching
    watching.close()


@pytest.fixture(scope="module")
def person_browser() -> Iterator[Browser]:
    """Debian's Chromium as people's browsers open reports and served pages (root needs
    --no-sandbox): not the child's, whose network holds only a build's own server."""
    # One Playwright at a time in a thread: a child's browser that an in-process capture left
    # cached (a worker may run such a test just before) goes first.
    kept.close()
    discard_child_browser()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(
            executable_path=require_chromium(), args=["--no-sandbox"]
        )
        yield launched
        launched.close()


def pytest_configure(config: pytest.Config) -> None:
    """Compile the diff's loops into their cache once, before any worker starts (the controller
    alone; a single-process run too). On a fresh clone every worker's first host would otherwise
    compile them at the same time, each fork server 18 s of CPU, while the other workers wait
    for the CPUs; a cache already filled is loaded in a second."""
    if not hasattr(config, "workerinput"):
        import child.diff.kernels  # noqa: F401  (compiled and cached on import)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Each worker's part of the suite starts with its long tests (`tests.scheduling`)."""
    scheduling.order(items)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """One worker more than the CPUs this process may use: the tests that wait on a host or a
    server leave their CPU to the others (on 2 CPUs: 11.7 min on 3 workers, 13-14 on 2)."""
    return len(os.sched_getaffinity(0)) + 1
