"""The promises of `supervisor.builds.report`: a self-contained page that opens from disk, and a
view made after the build's end commits, whose failure never fails the build or its job."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import structlog
from sqlalchemy import Engine, select
from structlog.testing import capture_logs

from child.capture import shard as capture
from ipc.messages import Done
from supervisor.builds.registry import registered_kinds
from supervisor.builds.report import publish_report, render_report
from supervisor.builds.view import BuildView, SnapshotView, load_build
from supervisor.db.tables import builds, jobs
from supervisor.host.pool import Child
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from tests.capture_helpers import run_build, run_cli, upload, write_png
from tests.chromium import require_chromium

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)


class Links(HTMLParser):
    """Every URL the page would load or link to, and the sections by status."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.statuses: list[str] = []
        self.external_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]
        if tag == "section" and values.get("data-status"):
            self.statuses.append(str(values["data-status"]))
        if tag == "link" or (tag == "script" and "src" in values):
            self.external_tags.append(tag)


def snapshot(name: str, status: str, **facts: object) -> SnapshotView:
    base: dict[str, object] = {
        "id": 1,
        "name": name,
        "status": status,
        "image_path": "images/ab/new.png",
        "image_sha256": "ab" * 32,
        "width": 800,
        "height": 600,
        "baseline_id": None,
        "baseline_image": None,
        "baseline_build_id": None,
        "metric": None,
        "threshold": None,
        "flat_threshold": None,
        "count_aa": None,
        "diff_pixels": None,
        "diff_ratio": None,
        "diff_path": None,
        "diff_box": None,
        "error": None,
    }
    return SnapshotView(**(base | facts))  # type: ignore[arg-type]


def view(*snapshots: SnapshotView, error: str | None = None) -> BuildView:
    counts = {
        s: sum(1 for x in snapshots if x.status == s)
        for s in ("new", "unchanged", "changed", "failed")
    }
    return BuildView(
        id=4,
        project="web",
        branch="feature/<b>",
        commit=None,
        status="failed" if error else "changed",
        counts=counts,
        created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        finished_at=datetime(2026, 1, 2, 3, 5, 5, tzinfo=UTC),
        report_path=None,
        error=error,
        snapshots=snapshots,
    )


def test_every_name_and_message_is_html_escaped() -> None:
    page = render_report(
        view(
            snapshot("<script>alert(1)</script>", "new"),
            snapshot('a"b&c', "failed", error="<img src=x onerror=alert(2)>"),
            error="<b>bold</b>",
        )
    )
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<img src=x" not in page
    assert "a&quot;b&amp;c" in page
    assert "feature/&lt;b&gt;" in page
    assert "<b>bold</b>" not in page


def test_changed_snapshots_show_baseline_new_and_diff_and_come_first() -> None:
    page = render_report(
        view(
            snapshot("a-new", "new"),
            snapshot("b-failed", "failed", error="broken PNG"),
            snapshot(
                "c-changed",
                "changed",
                baseline_id=1,
                baseline_image="images/cd/old.png",
                baseline_build_id=3,
                diff_path="diffs/4/ef.png",
                diff_pixels=120,
                diff_ratio=0.01,
                metric="oklab",
            ),
        )
    )
    links = Links()
    links.feed(page)
    assert links.statuses == ["changed", "failed", "new"]
    assert links.urls[:6] == [
        "../images/cd/old.png",
        "../images/cd/old.png",
        "../images/ab/new.png",
        "../images/ab/new.png",
        "../diffs/4/ef.png",
        "../diffs/4/ef.png",
    ]
    assert "broken PNG" in page
    assert "120 pixels changed (1.00 %)" in page
    assert "baseline (build 3)" in page
    assert "baseline from build 3" in page
    assert "baselines from build 3" in page


def test_the_filter_offers_each_status_with_its_count() -> None:
    page = render_report(view(snapshot("a", "new"), snapshot("b", "new")))
    for label in ("all (2)", "changed (0)", "failed (0)", "new (2)", "unchanged (0)"):
        assert label in page


def test_the_written_report_links_only_to_files_beside_it(engine: Engine, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    for name, marks in (("a", BUTTON), ("b", BUTTON)):
        write_png(tmp_path / "v1" / f"{name}.png", marks=marks)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    write_png(tmp_path / "v2/b.png", marks=BUTTON)
    (tmp_path / "v2/c.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")  # passes the upload
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    with engine.connect() as conn:
        stored = conn.execute(
            select(builds.c.report_path).where(builds.c.id == queued.build_id)
        ).scalar_one()
    assert stored == f"reports/build-{queued.build_id}.html"
    report = artifacts / stored
    links = Links()
    links.feed(report.read_text())
    assert links.external_tags == []
    assert links.urls
    for url in links.urls:
        assert not url.startswith(("http:", "https:", "/", "file:"))
        assert (report.parent / url).resolve().is_file(), url
    assert links.statuses == ["changed", "failed", "unchanged"]


def test_no_report_is_written_for_an_unknown_or_unfinished_build(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    assert publish_report(engine, 99, artifacts) is None
    assert publish_report(engine, queued.build_id, artifacts) is None
    assert not (artifacts / "reports").exists()


def test_a_report_that_cannot_be_written_lets_the_build_end_and_build_id_writes_it_later(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    child: Child,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reports folder is a file (which stops root too, unlike a mode): the settler records
    the job and the build, logs that the report cannot be written, and `build ID` writes it
    once the obstacle is gone."""
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    (artifacts / "reports").write_text("in the way")
    settings = HostSettings(database_url=database_url, artifacts=artifacts, host_id="h")
    settler = Settler(
        engine, settings, registered_kinds(), structlog.get_logger().bind(), time.monotonic
    )
    (running,) = settler.complete_and_claim([child])
    settler.ended(running, Done(running.job.id, capture.run(running.payload, lambda _: None)))
    with capture_logs() as logged:
        settler.complete_and_claim([])
    with engine.connect() as conn:
        job_status = conn.execute(select(jobs.c.status)).scalar_one()
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert (job_status, build.status, build.report_path) == ("completed", "passed", None)
    failures = [event for event in logged if event["event"] == "cannot write the report"]
    assert [(e["build_id"], e["log_level"]) for e in failures] == [(queued.build_id, "error")]
    assert [e["outcome"] for e in logged if e["event"] == "job finished"] == ["completed"]

    (artifacts / "reports").unlink()
    capsys.readouterr()
    command = ["build", str(queued.build_id), f"--database-url={database_url}"]
    assert run_cli([*command, f"--artifacts={artifacts}"]) == 0
    report = artifacts / f"reports/build-{queued.build_id}.html"
    assert f"report    {report}" in capsys.readouterr().out
    assert "Build" in report.read_text()
    with engine.connect() as conn:
        stored = conn.execute(
            select(builds.c.report_path).where(builds.c.id == queued.build_id)
        ).scalar_one()
    assert stored == f"reports/build-{queued.build_id}.html"


def test_a_browser_renders_the_report_from_disk(engine: Engine, tmp_path: Path) -> None:
    browser = require_chromium()
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    with engine.connect() as conn:
        view_ = load_build(conn, queued.build_id)
    assert view_ is not None and view_.report_path is not None
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            (artifacts / view_.report_path).resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert shot.stat().st_size > 5_000
