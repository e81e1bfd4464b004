"""A build's end told to a webhook by a real host: the capture, its report and the POST each
run in a child of `python -m supervisor run`, to a real HTTP server of the test's."""

from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

from sqlalchemy import Engine, select

from supervisor.db.tables import jobs
from tests.capture_helpers import run_cli, upload, write_png
from tests.hosts import FAST, StartHost, ended, wait_for
from tests.webhook_server import webhook_server


def test_a_host_posts_a_build_s_end_to_its_webhook_signed_and_with_its_report(
    engine: Engine, database_url: str, tmp_path: Path, start_host: StartHost
) -> None:
    write_png(tmp_path / "shots/a.png", marks=((8, 8, 20, 10),))
    with webhook_server() as server:
        project = ["project", f"--database-url={database_url}", "web", "--webhook", server.url]
        assert run_cli([*project, "--webhook-secret=s3cret"]) == 0
        queued = upload(engine, tmp_path / "artifacts", tmp_path / "shots")
        host = start_host(*FAST)
        (received,) = server.wait_for(1, timeout=60)

        def notify_job() -> int | None:
            with engine.connect() as conn:
                found: int | None = conn.execute(
                    select(jobs.c.id).where(jobs.c.kind == "notify")
                ).scalar_one_or_none()
            return found

        assert ended(engine, wait_for(notify_job))["status"] == "completed"
        assert host.stop() == 0
    body = json.loads(received.body)
    assert (body["event"], body["build"]["id"], body["build"]["status"]) == (
        "build.ended",
        queued.build_id,
        "passed",
    )
    report = tmp_path / "artifacts" / f"reports/web/{queued.build_id}/index.html"
    assert body["build"]["report_url"] == str(report)
    expected = hmac.new(b"s3cret", received.body, hashlib.sha256).hexdigest()
    assert received.headers["X-Storyshelf-Signature"] == f"sha256={expected}"
    assert host.events("webhook notified", status=200, build_id=queued.build_id)
