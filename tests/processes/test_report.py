"""A report that cannot be published, on a real host: the host, the capture jobs and the build
carry on; the publish job fails saying why, and `build ID` queues it again."""

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
        ended = conn.execute(select(jobs.c.kind, jobs.c.status, jobs.c.error)).all()
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert sorted((kind, status) for kind, status, _ in ended) == [
        ("capture", "completed"),
        ("capture", "completed"),
        ("publish", "failed"),
    ]
    (error,) = [error for kind, _, error in ended if kind == "publish"]
    assert "Not a directory" in error and "reports" in error
    assert (build.status, build.report_url) == ("passed", None)
    assert host.events("cannot record the job's results") == []

    (artifacts / "reports").unlink()
    command = [sys.executable, "-m", "supervisor", "build", str(queued.build_id),
               "--database-url", database_url, "--artifacts", str(artifacts)]  # fmt: skip
    shown = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "report    being published (job 4 queued)" in shown.stdout
    host = start_host(*FAST, "--drain")
    assert host.wait(60) == 0, host.log_tail()
    shown = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    report = artifacts / f"reports/web/{queued.build_id}/index.html"
    where = shown.stdout.split("\nreport", 1)[1].split()[0]  # wrapped or not
    assert (ROOT / where).resolve() == report.resolve()
    assert report.is_file()
