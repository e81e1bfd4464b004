"""The `publish` kind on real hosts: it runs through the supervisor path every kind takes.

A child that dies on it costs a retry counted as a crash, a cancel stops it, and both are the
parent's and child's real code with the child's handler misbehaving first
(`tests.troubled_publish`).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from supervisor.db.tables import builds, jobs
from tests.capture_helpers import upload, write_png
from tests.hosts import FAST, ROOT, StartHost, ended, wait_for

PLUGINS = "tests.kinds,tests.troubled_publish"


def publish_job(engine: Engine) -> int | None:
    with engine.connect() as conn:
        found: int | None = conn.execute(
            select(jobs.c.id).where(jobs.c.kind == "publish")
        ).scalar_one_or_none()
    return found


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_a_publish_whose_child_crashes_is_retried_and_publishes(
    engine: Engine,
    tmp_path: Path,
    start_host: StartHost,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORYSHELF_TEST_PUBLISH", f"crash-once:{tmp_path / 'crashed'}")
    write_png(tmp_path / "shots/a.png", marks=((8, 8, 20, 10),))
    queued = upload(engine, tmp_path / "artifacts", tmp_path / "shots")
    host = start_host(*FAST, plugins=PLUGINS)
    row = ended(engine, wait_for(lambda: publish_job(engine)), timeout=60)
    assert (row["status"], row["crashes"], row["attempt"]) == ("completed", 1, 2)
    assert row["crash_causes"] == ["SIGSEGV"]
    with engine.connect() as conn:
        url = conn.execute(select(builds.c.report_url).where(builds.c.id == queued.build_id))
        assert url.scalar_one() == str(
            tmp_path / "artifacts" / f"reports/web/{queued.build_id}/index.html"
        )
    assert host.stop() == 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_cancelling_a_build_stops_its_running_publish(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    start_host: StartHost,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("STORYSHELF_TEST_PUBLISH", "hold:60")
    write_png(tmp_path / "shots/a.png", marks=((8, 8, 20, 10),))
    queued = upload(engine, tmp_path / "artifacts", tmp_path / "shots")
    host = start_host(*FAST, plugins=PLUGINS)
    publishing = wait_for(lambda: publish_job(engine), timeout=30)
    host.wait_for_event("job started", timeout=30, job_id=publishing)
    cancel = subprocess.run(
        [sys.executable, "-m", "supervisor", "cancel", str(queued.build_id),
         "--database-url", database_url],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    assert cancel.returncode == 0, cancel.stderr
    row = ended(engine, publishing, timeout=10)
    assert (row["status"], row["crashes"]) == ("cancelled", 0)
    with engine.connect() as conn:
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert (build.status, build.report_url) == ("passed", None)  # the build had ended
    assert host.stop() == 0
