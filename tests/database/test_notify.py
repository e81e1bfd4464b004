"""The promises of a build's notifications (`supervisor.builds.notify`): each of its project's
webhooks is told once that it ended, once its report is published or given up on, through a
real HTTP server on loopback; a webhook that is down is retried, one that refuses is not, and
neither ever changes the build."""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import socket
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from supervisor.builds import notify
from supervisor.builds.ended import queue_publish
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, jobs
from supervisor.host.pool import Child
from tests.capture_helpers import run_build, run_cli, run_jobs, upload, write_png
from tests.settling import SettledRunner
from tests.webhook_server import Answer, webhook_server

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
SECRET = "s3cret"


def add_webhook(database_url: str, url: str, *options: str) -> None:
    assert (
        run_cli(
            [
                "project",
                f"--database-url={database_url}",
                "web",
                "--webhook",
                url,
                "--webhook-allow-private",  # the test's receiver listens on loopback
                *options,
            ]
        )
        == 0
    )


def changed_build(engine: Engine, artifacts: Path, tmp_path: Path) -> int:
    """A baseline build (run to its end before any webhook exists), then a build with one
    changed snapshot and one new, queued: its id."""
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v1/b.png", marks=BUTTON)
    run_build(engine, artifacts, tmp_path / "v1")
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    write_png(tmp_path / "v2/b.png", marks=BUTTON)
    write_png(tmp_path / "v2/c.png", marks=BUTTON)
    return upload(engine, artifacts, tmp_path / "v2", branch="feature").build_id


def notify_jobs(engine: Engine) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(jobs).where(jobs.c.kind == "notify").order_by(jobs.c.id))
        return [dict(row._mapping) for row in rows]


def build_row(engine: Engine, build_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(builds).where(builds.c.id == build_id)).one()


@pytest.fixture
def runner(engine: Engine, database_url: str, tmp_path: Path, child: Child) -> SettledRunner:
    return SettledRunner(engine, database_url, tmp_path / "artifacts", child)


def test_a_build_s_end_is_posted_once_signed_with_its_report(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    artifacts = tmp_path / "artifacts"
    build_id = changed_build(engine, artifacts, tmp_path)
    with webhook_server() as signed, webhook_server() as plain:
        add_webhook(database_url, signed.url, f"--webhook-secret={SECRET}")
        add_webhook(database_url, plain.url)
        runner.run_all()
    (received,) = signed.received
    build = build_row(engine, build_id)
    body = json.loads(received.body)
    assert body == {
        "event": "build.ended",
        "delivery": received.headers["X-Storyshelf-Delivery"],
        "build": {
            "id": build_id,
            "project": "web",
            "branch": "feature",
            "commit": None,
            "status": "changed",
            "review": "pending",
            "source": "images",
            "counts": {"new": 1, "unchanged": 1, "changed": 1, "failed": 0},
            "created_at": build.created_at.isoformat(),
            "finished_at": build.finished_at.isoformat(),
            "error": None,
            "report_url": str(artifacts / f"reports/web/{build_id}/index.html"),
        },
        "changed": ["a"],
        "changed_total": 1,
        "failed": [],
        "failed_total": 0,
        "unstable": [],
        "unstable_total": 0,
        "unstable_fails": True,
    }
    assert received.path == "/hooks/storyshelf"
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["User-Agent"].startswith("storyshelf/")
    assert received.headers["X-Storyshelf-Event"] == "build.ended"
    expected = hmac.new(SECRET.encode(), received.body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(received.headers["X-Storyshelf-Signature"], f"sha256={expected}")
    (unsigned,) = plain.received
    assert "X-Storyshelf-Signature" not in unsigned.headers
    assert unsigned.headers["X-Storyshelf-Delivery"] != body["delivery"]
    assert [(job["status"], job["attempt"], job["build_id"]) for job in notify_jobs(engine)] == [
        ("completed", 1, build_id),
        ("completed", 1, build_id),
    ]


def test_a_webhook_that_is_down_is_retried_with_the_same_delivery(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    build_id = changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server(Answer(503, b"busy"), Answer(502, b"")) as server:
        add_webhook(database_url, server.url)
        run_jobs(engine, tmp_path / "artifacts", kinds=("capture", "publish"))
        runner.step()
        (job,) = notify_jobs(engine)
        assert (job["status"], job["attempt"]) == ("queued", 1)
        assert job["error"] == "webhook answered 503 Service Unavailable: busy"
        runner.run_all()
    first, second, third = server.received
    assert first.body == second.body == third.body
    deliveries = {r.headers["X-Storyshelf-Delivery"] for r in (first, second, third)}
    assert len(deliveries) == 1
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("completed", 3)  # each try's error went with it
    assert build_row(engine, build_id).status == "changed"


def test_a_webhook_that_refuses_fails_its_job_at_once_and_never_the_build(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    build_id = changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server(Answer(404, b"no hook here\n<html>...")) as server:
        add_webhook(database_url, server.url)
        runner.run_all()
    assert len(server.received) == 1
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("failed", 1)
    assert job["error"] == "webhook answered 404 Not Found: no hook here"
    build = build_row(engine, build_id)
    assert (build.status, build.error) == ("changed", None)
    assert build.report_url is not None


def test_a_refused_connection_is_retried(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    changed_build(engine, tmp_path / "artifacts", tmp_path)
    with socket.socket() as bound:  # bound, never listening: every connection is refused
        bound.bind(("127.0.0.1", 0))
        add_webhook(database_url, f"http://127.0.0.1:{bound.getsockname()[1]}/hook")
        run_jobs(engine, tmp_path / "artifacts", kinds=("capture", "publish"))
        (queued,) = notify_jobs(engine)
        assert runner.step() == queued["id"]
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("queued", 1)
    assert job["error"].startswith("cannot reach the webhook: ")
    assert "refused" in job["error"].lower()


def test_a_webhook_that_does_not_answer_in_time_is_retried(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    runner: SettledRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(notify, "TIMEOUT_SECONDS", 0.2)
    changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server(Answer(delay_seconds=1.0)) as server:
        add_webhook(database_url, server.url)
        run_jobs(engine, tmp_path / "artifacts", kinds=("capture", "publish"))
        runner.step()
        (job,) = notify_jobs(engine)
        assert (job["status"], job["error"]) == (
            "queued",
            "the webhook did not answer within 0.2 s",
        )
        runner.run_all()
    assert len(server.received) == 2
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("completed", 2)


def test_a_webhook_removed_before_its_turn_fails_its_job_saying_so(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    build_id = changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server() as server:
        add_webhook(database_url, server.url)
        run_jobs(engine, tmp_path / "artifacts", kinds=("capture", "publish"))
        assert (
            run_cli(
                ["project", f"--database-url={database_url}", "web", "--no-webhook", server.url]
            )
            == 0
        )
        runner.run_all()
    assert server.received == []
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("failed", 1)
    assert job["error"] == "cannot prepare the job: webhook 1 was removed from the project"
    assert build_row(engine, build_id).status == "changed"


def test_a_report_published_again_notifies_nobody_twice(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    runner: SettledRunner,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`build ID` queues a lost report again, and migration 0007 queued publishes of older
    builds: neither is the build's end, so neither notifies."""
    artifacts = tmp_path / "artifacts"
    build_id = changed_build(engine, artifacts, tmp_path)
    with webhook_server() as server:
        add_webhook(database_url, server.url)
        runner.run_all()
        assert len(server.received) == 1
        (artifacts / f"reports/web/{build_id}/index.html").unlink()
        command = [
            "build",
            str(build_id),
            f"--database-url={database_url}",
            f"--artifacts={artifacts}",
        ]
        run_cli(command)
        assert "being published (job" in capsys.readouterr().out
        with transaction(engine) as conn:
            queue_publish(conn, build_id - 1)  # as migration 0007 does
        ran = runner.run_all()
    assert len(ran) == 2
    assert len(server.received) == 1
    assert len(notify_jobs(engine)) == 1


def test_a_report_that_cannot_be_published_is_notified_without_its_url(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    artifacts = tmp_path / "artifacts"
    build_id = changed_build(engine, artifacts, tmp_path)
    run_jobs(engine, artifacts, kinds=("capture",))
    (artifacts / "reports").rename(artifacts / "reports-aside")
    (artifacts / "reports").write_text("in the way")
    with transaction(engine) as conn:
        conn.execute(jobs.update().where(jobs.c.kind == "publish").values(max_attempts=1))
    with webhook_server() as server:
        add_webhook(database_url, server.url)
        runner.run_all()
    (received,) = server.received
    body = json.loads(received.body)
    assert (body["build"]["id"], body["build"]["report_url"]) == (build_id, None)
    with engine.connect() as conn:
        states = dict(
            conn.execute(
                select(jobs.c.kind, jobs.c.status).where(jobs.c.build_id == build_id)
            ).all()
        )
    assert states == {"capture": "completed", "publish": "failed", "notify": "completed"}


def test_cancelling_a_build_cancels_its_pending_notifications_not_its_verdict(
    engine: Engine, database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_id = changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server() as server:
        add_webhook(database_url, server.url)
        run_jobs(engine, tmp_path / "artifacts", kinds=("capture", "publish"))
        assert run_cli(["cancel", str(build_id), f"--database-url={database_url}"]) == 0
        run_jobs(engine, tmp_path / "artifacts")
    assert "cancelled 1 queued job(s); build is changed" in capsys.readouterr().out
    assert server.received == []
    assert [(job["status"], job["error"]) for job in notify_jobs(engine)] == [
        ("cancelled", "cancelled")
    ]
    assert build_row(engine, build_id).status == "changed"


def test_a_large_build_lists_its_first_changed_names_and_counts_them_all(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    runner: SettledRunner,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(notify, "LISTED_NAMES", 2)
    artifacts = tmp_path / "artifacts"
    for name in "abcd":
        write_png(tmp_path / "v1" / f"{name}.png", marks=BUTTON)
        write_png(tmp_path / "v2" / f"{name}.png", marks=MOVED)
    run_build(engine, artifacts, tmp_path / "v1")
    upload(engine, artifacts, tmp_path / "v2", branch="feature")
    with webhook_server() as server:
        add_webhook(database_url, server.url)
        runner.run_all()
    body = json.loads(server.received[0].body)
    assert (body["changed"], body["changed_total"]) == (["a", "b"], 4)


def test_a_name_that_resolves_to_loopback_is_refused_at_delivery_without_the_option(
    engine: Engine, database_url: str, tmp_path: Path, runner: SettledRunner
) -> None:
    """Configured as a name, judged when delivered on the addresses it resolves to: one
    failed delivery saying why, not retried, and nothing POSTed."""
    changed_build(engine, tmp_path / "artifacts", tmp_path)
    with webhook_server() as server:
        url = f"http://localhost:{server.server_address[1]}/hooks/storyshelf"
        assert run_cli(["project", f"--database-url={database_url}", "web", "--webhook", url]) == 0
        runner.run_all()
    (job,) = notify_jobs(engine)
    assert (job["status"], job["attempt"]) == ("failed", 1)
    assert re.fullmatch(
        r"webhook refused: localhost resolves to (127\.0\.0\.1|::1), which is a loopback "
        r"address, a webhook target only with --webhook-allow-private",
        job["error"],
    )
    assert server.received == []
