"""A build's end told to a webhook by a real host: the capture, its report and the POST each
run in a child of `python -m supervisor run`, to a real HTTP server of the test's."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from supervisor.db.tables import jobs
from tests.capture_helpers import run_cli, upload, write_png
from tests.hosts import FAST, StartHost, ended, wait_for
from tests.webhook_server import Answer, webhook_server


def test_a_host_posts_a_build_s_end_to_its_webhook_signed_and_with_its_report(
    engine: Engine, database_url: str, tmp_path: Path, start_host: StartHost
) -> None:
    write_png(tmp_path / "shots/a.png", marks=((8, 8, 20, 10),))
    with webhook_server() as server:
        project = ["project", f"--database-url={database_url}", "web", "--webhook", server.url]
        # The receiver listens on loopback: a private target, which the project must allow.
        assert run_cli([*project, "--webhook-allow-private", "--webhook-secret=s3cret"]) == 0
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


#: A password with characters a URL must percent-encode, as it is and as the URL carries it.
PASSWORD, QUOTED_PASSWORD = "pa55:w@rd", "pa55%3Aw%40rd"


def test_credentials_in_a_webhook_url_are_sent_as_basic_auth_and_quoted_nowhere(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    start_host: StartHost,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`http://user:pass@host/...` is delivered with HTTP Basic authentication, and its password
    is in no job's error, no line of the host's log, nor `status`, `build --json` or
    `project`, whether the receiver takes the POST or refuses it after a retry."""
    write_png(tmp_path / "shots/a.png", marks=((8, 8, 20, 10),))
    with (
        webhook_server() as taking,
        webhook_server(Answer(503, b"busy"), Answer(404, b"no such hook")) as refusing,
    ):
        for server in (taking, refusing):
            url = server.url.replace("http://", f"http://ci%40bot:{QUOTED_PASSWORD}@")
            assert run_cli(
                ["project", f"--database-url={database_url}", "web", "--webhook", url,
                 "--webhook-allow-private"]
            ) == 0  # fmt: skip
        queued = upload(engine, tmp_path / "artifacts", tmp_path / "shots")
        host = start_host(*FAST)
        (received,) = taking.wait_for(1, timeout=60)
        refusing.wait_for(2, timeout=60)

        def notify_jobs() -> list[int] | None:
            with engine.connect() as conn:
                found = conn.execute(select(jobs.c.id).where(jobs.c.kind == "notify")).scalars()
                ids = sorted(found)
            return ids if len(ids) == 2 else None

        ends = [ended(engine, job_id) for job_id in wait_for(notify_jobs)]
        assert host.stop() == 0
    assert received.headers["Authorization"] == (
        f"Basic {base64.b64encode(f'ci@bot:{PASSWORD}'.encode()).decode()}"
    )
    assert received.path == "/hooks/storyshelf"
    assert all(
        request.headers["Authorization"] == received.headers["Authorization"]
        for request in refusing.received
    )
    assert [(job["status"], job["error"]) for job in ends] == [
        ("completed", None),
        ("failed", "webhook answered 404 Not Found: no such hook"),
    ]
    capsys.readouterr()
    for command in (
        ["status"],
        ["status", "--json"],
        ["build", str(queued.build_id), "--json"],
        ["project", "web"],
        ["project", "web", "--json"],
    ):
        run_cli([*command, f"--database-url={database_url}"])
    shown = capsys.readouterr()
    with engine.connect() as conn:
        errors = " ".join(str(error) for error in conn.execute(select(jobs.c.error)).scalars())
    log = host.log_path.read_text()
    assert "webhook notified" in log and "ci%40bot:****@127.0.0.1" in shown.out
    for text in (shown.out, shown.err, errors, log):
        assert PASSWORD not in text and QUOTED_PASSWORD not in text and "pa55" not in text
