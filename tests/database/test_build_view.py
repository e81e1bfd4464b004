"""The promises of `supervisor.builds.view` and `python -m supervisor build`."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Engine, inspect, update

from child.report.render import render_report
from ipc.artifacts.folder import FolderStore
from ipc.artifacts.store import ArtifactStore
from ipc.build_view import SNAPSHOT_FIELDS, BuildView, SnapshotView, spoken_duration
from supervisor.builds.cancel import cancel_build
from supervisor.builds.text import format_build
from supervisor.builds.view import load_build
from supervisor.commands.build import BuildExit
from supervisor.commands.main import CUT_SHORT
from supervisor.db.connection import schema_transaction, transaction
from supervisor.db.migrate import alembic_config
from supervisor.db.tables import SNAPSHOT_STATES, builds
from tests.capture_helpers import (
    claim,
    prepare,
    run_build,
    run_cli,
    run_jobs,
    screens,
    upload,
    write_png,
)
from tests.database.test_command_line import cli
from tests.database.test_plan_kind import queue_plan
from tests.hosts import ROOT

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
    "started_at",
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
    database_url: str,
    finished: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    assert build_command(capsys, database_url, tmp_path, str(finished)) == BuildExit.FAILED
    out = capsys.readouterr().out
    assert f"build {finished}  web @ feature" in out
    assert "status    failed: 1 snapshot failed" in out
    assert "baselines from build 1\n" in out
    assert f"report    artifacts/reports/web/{finished}/index.html\n" in out
    lines = out.splitlines()
    header = next(line for line in lines if line.startswith("NAME"))
    table = lines[lines.index(header) + 1 : lines.index("", lines.index(header))]
    rows = [line for line in table if not line.startswith(" ")]
    status_column = header.index("STATUS")
    assert [row[status_column:].split()[0] for row in rows] == ["changed", "failed", "new"]
    source_column = header.index("FROM BUILD") + len("FROM BUILD") - 1
    assert [row[source_column] for row in rows] == ["1", "-", "-"]
    assert lines[-1] == "unchanged 1 snapshot, not listed"


def snapshot(name: str, status: str, **facts: Any) -> SnapshotView:
    """A snapshot of a Storybook build as `load_build` reads it: `status`, settled."""
    values: dict[str, Any] = dict.fromkeys(SNAPSHOT_FIELDS)
    values.update(id=1, name=name, status=status, settled=True, title="Button", story=name)
    return SnapshotView(**(values | facts))


def build_of(*snapshots: SnapshotView, **fields: Any) -> BuildView:
    counts = {state: sum(s.status == state for s in snapshots) for state in SNAPSHOT_STATES}
    values: dict[str, Any] = {
        "id": 7,
        "project": "web",
        "branch": "feature",
        "commit": None,
        "status": "failed",
        "counts": counts,
        "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "finished_at": datetime(2026, 1, 2, 3, 5, 5, tzinfo=UTC),
        "report_url": None,
        "error": None,
        "snapshots": snapshots,
        "source": "storybook",
    }
    return BuildView(**(values | fields))


def test_changes_come_first_changed_unstable_failed_new_and_the_unchanged_are_counted(
    tmp_path: Path,
) -> None:
    view = build_of(
        snapshot("a--new", "new"),
        snapshot("b--same", "unchanged"),
        snapshot("c--failed", "failed", error="did not finish rendering in 15 s", settled=None),
        snapshot("d--flaky", "changed", settled=False, diff_path="diffs/7/d.png"),
        snapshot("e--changed", "changed", diff_path="diffs/7/e.png"),
        snapshot("f--same", "unchanged"),
        snapshot("g--flaky-same", "unchanged", settled=False),
        snapshot("h--same", "unchanged"),
    )
    lines = format_build(view, FolderStore(tmp_path)).splitlines()
    header = next(line for line in lines if line.startswith("STORY"))
    name = header.index("NAME")
    rows = [line[name:].split()[0] for line in lines[lines.index(header) + 1 :] if "--" in line]
    assert rows == ["e--changed", "d--flaky", "g--flaky-same", "c--failed", "a--new"]
    assert "  did not finish rendering in 15 s" in lines
    assert lines[-1] == "unchanged 3 snapshots, not listed"
    assert not any("b--same" in line or "f--same" in line for line in lines)


def test_changed_lists_only_the_changes_in_text_and_json_keeping_every_key(
    database_url: str, finished: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = build_command(capsys, database_url, tmp_path, str(finished), "--changed", "--json")
    assert code == BuildExit.FAILED
    printed: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert set(printed) == BUILD_KEYS
    assert [s["name"] for s in printed["snapshots"]] == ["b", "c", "d"]
    assert printed["counts"] == {"new": 1, "unchanged": 1, "changed": 1, "failed": 1}
    build_command(capsys, database_url, tmp_path, str(finished))
    whole = capsys.readouterr().out
    build_command(capsys, database_url, tmp_path, str(finished), "--changed")
    changes = capsys.readouterr().out
    assert "unchanged 1 snapshot, not listed" in whole
    assert changes.splitlines() == whole.splitlines()[:-2]


def test_rows_fit_the_window_a_long_name_cut_and_the_diff_opens_from_another_folder(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    long_name = "components-forms-date-range-picker--with-presets-and-a-long-caption"
    artifacts = tmp_path / "artifacts"
    run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, **{long_name: BUTTON}))
    changed = screens(tmp_path / "v2", a=MOVED, **{long_name: MOVED}, n=BUTTON)
    (changed / "broken.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")
    build_id = run_build(engine, artifacts, changed, branch="feature").build_id
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shown = cli(
        "build", str(build_id), f"--database-url={database_url}", f"--artifacts={artifacts}",
        cwd=elsewhere, COLUMNS="60",
    )  # fmt: skip
    assert shown.returncode == BuildExit.FAILED, shown.stderr
    lines = shown.stdout.splitlines()
    # A path or URL wider than the window stands whole on a line of its own: cut, it opens nothing.
    assert [line for line in lines if len(line) > 60 and " " in line.strip()] == []
    (cut_row,) = [line for line in lines if line.startswith("components-")]
    assert "…" in cut_row and len(cut_row) <= 60
    diffs = [Path(line.strip()) for line in lines if line.strip().endswith(".png")]
    assert len(diffs) == 2
    assert all(not path.is_absolute() and (elsewhere / path).is_file() for path in diffs)


def test_the_diff_is_named_where_its_store_keeps_it(
    store: ArtifactStore,
    database_url: str,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A folder's diff as a path from the current folder; a bucket's as its `s3://` URL."""
    run_build(engine, store, screens(tmp_path / "v1", a=BUTTON))
    build_id = run_build(
        engine, store, screens(tmp_path / "v2", a=MOVED), branch="feature"
    ).build_id
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    run_cli(
        ["build", str(build_id), f"--database-url={database_url}", f"--artifacts={store.location}"]
    )
    (shown,) = [line.strip() for line in capsys.readouterr().out.splitlines() if "diffs/" in line]
    with engine.connect() as conn:
        view = load_build(conn, build_id)
    assert view is not None
    (key,) = [s.diff_path for s in view.snapshots if s.diff_path]
    assert store.exists(key)
    if isinstance(store, FolderStore):
        assert shown == f"artifacts/{key}"
        assert (tmp_path / shown).is_file()
    else:
        assert shown == store.where(key) and shown.startswith("s3://")


def test_output_cut_short_by_its_reader_ends_quietly(
    database_url: str, finished: int, tmp_path: Path
) -> None:
    """`build N | head -1`: the reader goes before the listing is written; no traceback, and
    the exit status is a shell's for a program stopped by SIGPIPE, never a verdict."""
    command = [
        sys.executable, "-m", "supervisor", "build", str(finished),
        f"--database-url={database_url}", f"--artifacts={tmp_path / 'artifacts'}",
    ]  # fmt: skip
    environment = {**os.environ, "PYTHONPATH": str(ROOT)}
    closed = subprocess.Popen(
        command, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert closed.stdout is not None and closed.stderr is not None
    closed.stdout.close()  # before the command has written anything
    stderr = closed.stderr.read()
    assert closed.wait(timeout=60) == CUT_SHORT
    assert stderr == b""
    piped = subprocess.run(
        ["bash", "-o", "pipefail", "-c", f"{shlex.join(command)} | head -1"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert piped.stdout == f"build {finished}  web @ feature\n"
    assert piped.stderr == ""
    assert piped.returncode in (BuildExit.FAILED, CUT_SHORT)


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


# when work began: started_at


def read(engine: Engine, build_id: int) -> BuildView:
    with engine.connect() as conn:
        view = load_build(conn, build_id)
    assert view is not None
    return view


def test_a_build_starts_when_its_first_job_begins_not_when_it_is_queued(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    queued = upload(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON), shards=2)
    assert read(engine, queued.build_id).started_at is None
    first, second = claim(engine)
    prepare(engine, first, artifacts)
    started = read(engine, queued.build_id)
    assert started.status == "capturing" and started.started_at is not None
    assert started.started_at >= started.created_at
    prepare(engine, second, artifacts)  # a later shard leaves the start as it was
    assert read(engine, queued.build_id).started_at == started.started_at
    plan = queue_plan(engine, artifacts)  # a Storybook build starts with its plan
    assert read(engine, plan.data["build_id"]).started_at is not None


def test_text_and_json_show_the_queue_wait_apart_from_how_long_the_work_took(
    database_url: str,
    finished: int,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with transaction(engine) as conn:
        conn.execute(
            update(builds)
            .where(builds.c.id == finished)
            .values(
                created_at=created,
                started_at=created + timedelta(seconds=90),
                finished_at=created + timedelta(seconds=120),
            )
        )
    build_command(capsys, database_url, tmp_path, str(finished))
    out = capsys.readouterr().out
    assert "started   2026-01-02 03:05:35 (queued 1 min 30 s)\n" in out
    assert "finished  2026-01-02 03:06:05 (took 30.0 s)\n" in out
    build_command(capsys, database_url, tmp_path, str(finished), "--json")
    printed = json.loads(capsys.readouterr().out)
    assert printed["started_at"] == "2026-01-02T03:05:35+00:00"
    page = render_report(read(engine, finished))
    assert "2026-01-02 03:05:35 UTC (waited 1 min 30 s in the queue)" in page
    assert "2026-01-02 03:06:05 UTC (took 30.0 s)" in page


def test_a_build_cancelled_while_pending_never_started_and_took_nothing(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queued = upload(engine, tmp_path / "artifacts", screens(tmp_path / "v1", a=BUTTON))
    with transaction(engine) as conn:
        cancel_build(conn, queued.build_id)
    build_command(capsys, database_url, tmp_path, str(queued.build_id))
    out = capsys.readouterr().out
    assert "status    cancelled" in out and "finished  " in out
    assert "started" not in out and "took" not in out
    build_command(capsys, database_url, tmp_path, str(queued.build_id), "--json")
    assert json.loads(capsys.readouterr().out)["started_at"] is None
    page = render_report(read(engine, queued.build_id))
    assert "took" not in page and "in the queue" not in page


def migrate(engine: Engine, step: Callable[..., None], revision: str) -> None:
    config = alembic_config(engine)
    with schema_transaction(engine) as connection:
        config.attributes["connection"] = connection
        step(config, revision)


def test_a_build_from_before_migration_0013_counts_its_length_from_its_creation(
    database_url: str,
    finished: int,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        migrate(engine, command.downgrade, "0012")
        assert "started_at" not in {c["name"] for c in inspect(engine).get_columns("builds")}
    finally:
        migrate(engine, command.upgrade, "head")
    view = read(engine, finished)
    assert view.started_at is None and view.finished_at is not None
    took = spoken_duration((view.finished_at - view.created_at).total_seconds())
    build_command(capsys, database_url, tmp_path, str(finished))
    captured = capsys.readouterr()
    assert f"finished  {view.finished_at:%Y-%m-%d %H:%M:%S} (took {took})\n" in captured.out
    assert "started" not in captured.out and captured.err == ""
    page = render_report(view)
    assert f"(took {took})" in page and "in the queue" not in page
