"""The promises of `supervisor.commands.cancel` and `python -m supervisor cancel`."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Column, Engine, select

from supervisor.builds import capture as capture_kind
from supervisor.builds.cancel import cancel_build
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, capture_attempts, capture_shards, jobs
from tests.capture_helpers import claim, run_build, run_cli, upload, write_png

BUTTON = ((8, 8, 20, 10),)


def shots(folder: Path, *names: str) -> Path:
    for name in names:
        write_png(folder / f"{name}.png", marks=BUTTON)
    return folder


def statuses(engine: Engine, column: Column[str]) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(column).order_by(column.table.c.id)).scalars())


def test_cancelling_a_queued_build_cancels_it_at_once(engine: Engine, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    queued = upload(engine, artifacts, shots(tmp_path / "s", "a", "b"), shards=2)
    with transaction(engine) as conn:
        outcome = cancel_build(conn, queued.build_id)
    assert (outcome.cancelled_jobs, outcome.flagged_jobs, outcome.build_status) == (
        2,
        0,
        "cancelled",
    )
    # The captures cancelled; the build's end queued its report, which shows it cancelled.
    assert statuses(engine, jobs.c.status) == ["cancelled", "cancelled", "queued"]
    assert statuses(engine, jobs.c.kind) == ["capture", "capture", "publish"]
    assert statuses(engine, capture_shards.c.status) == ["cancelled", "cancelled"]
    assert statuses(engine, capture_attempts.c.status) == ["cancelled"]


def test_a_running_job_is_flagged_and_its_host_ends_the_build(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    queued = upload(engine, artifacts, shots(tmp_path / "s", "a", "b"), shards=2)
    running = claim(engine, limit=1)[0]
    with transaction(engine) as conn:
        outcome = cancel_build(conn, queued.build_id)
    assert (outcome.cancelled_jobs, outcome.flagged_jobs, outcome.build_status) == (1, 1, "pending")
    with transaction(engine) as conn:
        assert queue.cancel(conn, running.lease)
        capture_kind.on_cancelled(conn, running)
    assert statuses(engine, builds.c.status) == ["cancelled"]


def test_cancelling_an_ended_build_changes_nothing(engine: Engine, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    queued = run_build(engine, artifacts, shots(tmp_path / "s", "a"))
    with transaction(engine) as conn:
        outcome = cancel_build(conn, queued.build_id)
    assert (outcome.cancelled_jobs, outcome.flagged_jobs, outcome.build_status) == (0, 0, "passed")


def test_the_command_says_what_happened(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "artifacts"
    queued = upload(engine, artifacts, shots(tmp_path / "s", "a"))
    argv = ["cancel", f"--database-url={database_url}", f"--artifacts={artifacts}"]
    capsys.readouterr()  # drop what the upload logged
    assert run_cli([*argv, str(queued.build_id)]) == 0
    assert (
        capsys.readouterr().out
        == f"build {queued.build_id}: cancelled 1 queued job(s); build is cancelled\n"
    )
    assert run_cli([*argv, "77"]) == 1
    assert "no build with id 77" in capsys.readouterr().err
