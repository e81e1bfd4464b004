"""The promises of `supervisor.builds.view` and `python -m supervisor build`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.capture_helpers import run_build, run_cli, upload, write_png

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
BUILD_KEYS = {
    "id",
    "project",
    "branch",
    "commit",
    "status",
    "counts",
    "created_at",
    "finished_at",
    "report_path",
    "error",
    "snapshots",
    "source",
    "skipped",
    "removed",
}
SNAPSHOT_KEYS = {
    "name",
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
    assert build_command(capsys, database_url, tmp_path, str(finished), "--json") == 0
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
    assert printed["report_path"] == f"reports/build-{finished}.html"
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
    assert build_command(capsys, database_url, tmp_path, str(finished)) == 0
    out = capsys.readouterr().out
    assert f"build {finished}  web @ feature" in out
    assert "status    failed: 1 snapshot failed" in out
    assert "baselines from build 1\n" in out
    assert f"report    {tmp_path / 'artifacts' / 'reports' / f'build-{finished}.html'}" in out
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
    assert build_command(capsys, database_url, tmp_path, str(queued.build_id), "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert (printed["status"], printed["finished_at"], printed["snapshots"]) == (
        "pending",
        None,
        [],
    )


def test_an_unknown_build_is_a_clear_error(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build_command(capsys, database_url, tmp_path, "42") == 1
    assert "no build with id 42" in capsys.readouterr().err
