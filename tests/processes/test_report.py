"""A report that cannot be written, on a real host: the host, the job and the build carry on."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy import Engine, select

from supervisor.db.tables import builds, jobs
from tests.capture_helpers import upload, write_png
from tests.hosts import FAST, ROOT, StartHost


def test_a_host_whose_reports_folder_is_blocked_ends_the_build_and_build_id_mends_it(
    engine: Engine, database_url: str, tmp_path: Path, start_host: StartHost
) -> None:
    artifacts = tmp_path / "artifacts"
    for name in ("a", "b"):
        write_png(tmp_path / "shots" / f"{name}.png", marks=((8, 8, 20, 10),))
    queued = upload(engine, artifacts, tmp_path / "shots", shards=2)
    # A file where the folder should be stops root too, unlike a mode.
    (artifacts / "reports").write_text("in the way")
    host = start_host(*FAST, "--drain")
    assert host.wait(60) == 0, host.log_tail()
    with engine.connect() as conn:
        statuses = set(conn.execute(select(jobs.c.status)).scalars())
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert statuses == {"completed"}
    assert (build.status, build.report_path) == ("passed", None)
    (failure,) = host.events("cannot write the report")
    assert (failure["build_id"], failure["level"]) == (queued.build_id, "error")
    assert host.events("cannot record the job's results") == []

    (artifacts / "reports").unlink()
    shown = subprocess.run(
        [sys.executable, "-m", "supervisor", "build", str(queued.build_id),
         "--database-url", database_url, "--artifacts", str(artifacts)],
        capture_output=True, text=True, cwd=ROOT, check=False,
    )  # fmt: skip
    report = artifacts / f"reports/build-{queued.build_id}.html"
    assert shown.returncode == 0, shown.stderr
    assert f"report    {report}" in shown.stdout
    assert report.is_file()
