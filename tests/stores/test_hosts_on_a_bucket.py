"""Real hosts on a bucket that goes away, and on one that refuses them.

A store that does not answer is a transient fault of the host's surroundings: the job that met
it is retried with backoff (never counted a crash, nothing of it recorded) and completes once
the store is back. A store that refuses (no such bucket) is a setting to mend: the host says so
in one line and exits 3 without claiming.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from ipc.artifacts.s3 import S3Store
from ipc.publish import report_index
from supervisor.db.tables import builds
from tests.artifact_stores import new_store
from tests.capture_helpers import screens, upload
from tests.hosts import FAST, StartHost, ended, hosts, job, wait_for
from tests.object_store_server import TemporaryObjectStore, own_server

BUTTON = ((4, 4, 20, 10),)


@pytest.fixture(scope="module")
def own_store() -> Iterator[TemporaryObjectStore]:
    """A server of this module's own: a test kills it."""
    yield from own_server()


@pytest.fixture
def bucket(
    own_store: TemporaryObjectStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> S3Store:
    store = new_store("s3", tmp_path, monkeypatch, own_store)
    assert isinstance(store, S3Store)
    return store


@pytest.fixture
def start_host(database_url: str, bucket: S3Store, tmp_path: Path) -> Iterator[StartHost]:
    yield from hosts(database_url, bucket.location, tmp_path)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_job_that_met_a_store_gone_away_is_retried_and_completes_once_it_is_back(
    engine: Engine,
    own_store: TemporaryObjectStore,
    bucket: S3Store,
    start_host: StartHost,
    tmp_path: Path,
) -> None:
    queued = upload(engine, bucket, screens(tmp_path / "shots", button=BUTTON, card=BUTTON))
    (job_id,) = queued.job_ids
    own_store.kill()
    try:
        host = start_host(*FAST, "--backoff-base-seconds", "2")  # the retry finds it back
        failure = host.wait_for_event("job finished", timeout=60, job_id=job_id)
        assert failure["outcome"] == "retried"
        assert "the artifact store did not answer" in job(engine, job_id)["error"]
    finally:
        own_store.restart()
    row = ended(engine, job_id, timeout=90)
    assert (row["status"], row["crashes"]) == ("completed", 0)
    assert row["attempt"] >= 2
    with engine.connect() as conn:
        status = conn.execute(select(builds.c.status).where(builds.c.id == queued.build_id))
        assert status.scalar_one() == "passed"
    # The build's end queued its report, published in the bucket by the same host.
    url = wait_for(lambda: report_url(engine, queued.build_id), timeout=30)
    index = report_index("web", queued.build_id)
    assert url == bucket.where(index)
    page = bucket.read_bytes(index).decode()
    folder = index.rsplit("/", 1)[0]
    copies = {f"{folder}/{link}" for link in re.findall(r'src="(images/[^"]+)"', page)}
    assert copies and set(bucket.written(copies)) == copies  # every picture beside its page
    assert (
        f"url=../{queued.build_id}/index.html"
        in bucket.read_bytes("reports/web/latest/main.html").decode()
    )
    assert host.stop() == 0


def report_url(engine: Engine, build_id: int) -> str | None:
    with engine.connect() as conn:
        url: str | None = conn.execute(
            select(builds.c.report_url).where(builds.c.id == build_id)
        ).scalar_one()
    return url


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_host_on_a_bucket_that_does_not_exist_says_so_and_exits_3(
    database_url: str, bucket: S3Store, tmp_path: Path
) -> None:
    missing = f"s3://no-such-bucket-{uuid.uuid4().hex[:8]}/ci"
    host = next(hosts(database_url, missing, tmp_path))(*FAST)
    assert host.wait(60) == 3
    said = wait_for(lambda: host.events("children cannot work; not claiming"))
    assert said[0]["error"].endswith("no such bucket")
