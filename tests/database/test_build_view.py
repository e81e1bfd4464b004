"""The promises of `supervisor.builds.view` and `python -m supervisor build`."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from supervisor.builds.cancel import cancel_build
from supervisor.commands.build import BuildExit
from supervisor.db.connection import transaction
from tests.capture_helpers import run_build, run_cli, run_jobs, upload, write_png

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
BUILD_KEYS = {
    "id",
    "review",
    "project",
    "branch",
    "commit",
    "status",
    "counts",
    "created_at",
    "finished_at",
    "report_url",
    "error",
    "snapshots",
    "source",
    "skipped",
    "removed",
    "unstable",
    "unstable_fails",
}
SNAPSHOT_KEYS = {
    "name",
    "review",
    "status",
    "diff_pixels",
    "diff_ratio",
    "diff_path",
    "diff_box",
    "settings",
    "baseline_id",
    "baseline_build_id",
    "error",
    "story_id",
    "title",
    "story",
    "mode",
    "settled",
    "unstable",
    "image_path",
    "image_sha256",
}


@pytest.fixture
def finished(engine: Engine, tmp_path: Path) -> int:
    """A feature build with one snapshot of each status; returns its id."""
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v1/b.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/b.png", marks=MOVED)
    write_png(tmp_path / "v2/c.png", marks=BUTTON)
    (tmp_path / "v2/d.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")  # passes the upload
    run_build(engine, artifacts, tmp_path / "v1")
    return run_build(engine, artifacts, tmp_path / "v2", branch="feature").build_id


def build_command(
    capsys: pytest.CaptureFixture[str], database_url: str, tmp_path: Path, *extra: str
) -> int:
    capsys.readouterr()  # drop what setting the build up logged
    return run_cli(
        ["build", f"--database-url={database_url}", f"--artifacts={tmp_path / 'artifacts'}", *extra]
    )


def test_json_has_exactly_the_documented_keys(
    database_url: str, finished: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        build_command(capsys, database_url, tmp_path, str(finished), "--json") == BuildExit.FAILED
    )
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert set(printed) == BUILD_KEYS
    assert all(set(snapshot) == SNAPSHOT_KEYS for snapshot in printed["snapshots"])
    assert (printed["id"], printed["project"], printed["branch"], printed["status"]) == (
        finished,
        "web",
        "feature",
        "failed",
    )
    assert printed["counts"] == {"new": 1, "unchanged": 1, "changed": 1, "failed": 1}
    assert printed["report_url"] == str(
        tmp_path / "artifacts" / f"reports/web/{finished}/index.html"
    )
    assert printed["error"] == "1 snapshot failed"
    by_name = {s["name"]: s for s in printed["snapshots"]}
    assert [s["status"] for s in printed["snapshots"]] == ["unchanged", "changed", "new", "failed"]
    assert by_name["b"]["diff_pixels"] > 0
    assert by_name["b"]["diff_path"].startswith(f"diffs/{finished}/")
    assert (by_name["b"]["baseline_id"], by_name["b"]["baseline_build_id"]) == (2, 1)
    assert (by_name["c"]["baseline_id"], by_name["c"]["baseline_build_id"]) == (None, None)
    assert "d.png" not in by_name["d"]["error"] or by_name["d"]["error"]


def test_the_table_is_aligned_and_names_the_report(
    database_url: str, finished: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_command(capsys, database_url, tmp_path, str(finished)) == BuildExit.FAILED
    out = capsys.readouterr().out
    assert f"build {finished}  web @ feature" in out
    assert "status    failed: 1 snapshot failed" in out
    assert "baselines from build 1\n" in out
    assert f"report    {tmp_path / 'artifacts' / f'reports/web/{finished}/index.html'}" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    table = lines[lines.index(header) :]
    status_column = header.index("STATUS")
    assert [line[status_column:].split()[0] for line in table[1:]] == [
        "unchanged",
        "changed",
        "new",
        "failed",
    ]
    source_column = header.index("FROM BUILD") + len("FROM BUILD") - 1
    assert [line[source_column] for line in table[1:]] == ["1", "1", "-", "-"]


def test_a_build_still_capturing_shows_no_finish(
    database_url: str,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, tmp_path / "artifacts", tmp_path / "v1")
    code = build_command(capsys, database_url, tmp_path, str(queued.build_id), "--json")
    assert code == BuildExit.NOT_ENDED
    printed = json.loads(capsys.readouterr().out)
    assert (printed["status"], printed["finished_at"], printed["snapshots"]) == (
        "pending",
        None,
        [],
    )


def test_an_unknown_build_is_a_clear_error(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_command(capsys, database_url, tmp_path, "42") == BuildExit.ERROR
    assert "no build with id 42" in capsys.readouterr().err


def test_the_exit_status_tells_passed_changed_failed_and_cancelled_apart(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    (tmp_path / "v3").mkdir()
    (tmp_path / "v3/a.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")
    passed = run_build(engine, artifacts, tmp_path / "v1").build_id
    changed = run_build(engine, artifacts, tmp_path / "v2", branch="feature").build_id
    failed = run_build(engine, artifacts, tmp_path / "v3", branch="feature").build_id
    cancelled = upload(engine, artifacts, tmp_path / "v2", branch="feature").build_id
    with transaction(engine) as conn:
        cancel_build(conn, cancelled)
    verdicts = {
        build_id: build_command(capsys, database_url, tmp_path, str(build_id))
        for build_id in (passed, changed, failed, cancelled)
    }
    assert verdicts == {
        passed: BuildExit.PASSED,
        changed: BuildExit.CHANGED,
        failed: BuildExit.FAILED,
        cancelled: BuildExit.FAILED,
    }
    assert [int(code) for code in BuildExit] == [0, 1, 2, 3, 4, 5, 6]  # documented: a contract


def test_wait_returns_the_verdict_once_the_build_ends(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    worker = threading.Timer(1.5, run_jobs, (engine, artifacts))
    worker.start()
    started = time.monotonic()
    code = build_command(capsys, database_url, tmp_path, str(queued.build_id), "--wait", "--json")
    worker.join()
    assert code == BuildExit.PASSED
    assert time.monotonic() - started >= 1.5
    assert json.loads(capsys.readouterr().out)["status"] == "passed"


def test_wait_gives_up_after_the_timeout_saying_so(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, tmp_path / "artifacts", tmp_path / "v1")
    build_id = str(queued.build_id)
    code = build_command(capsys, database_url, tmp_path, build_id, "--wait", "--timeout=0.3")
    assert code == BuildExit.NOT_ENDED
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"storyshelf build: build {build_id} is still pending after 0.3 s"]
    assert build_command(capsys, database_url, tmp_path, build_id, "--timeout=5") == BuildExit.USAGE
    assert "--timeout takes --wait" in capsys.readouterr().err
