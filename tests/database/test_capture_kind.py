"""The promises of `supervisor.builds.capture` and `supervisor.builds.reduce`, on PostgreSQL and SQLite."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, update

from child.capture import shard as capture
from supervisor.builds import capture as capture_kind
from supervisor.builds import reduce
from supervisor.builds.projects import SettingsChange, change_settings
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import capture_attempts, capture_shards, jobs, snapshots
from tests.capture_helpers import claim, prepare, run_build, screens, settle, upload
from tests.hosts import build_row

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
SHA = "a" * 64


def rows(engine: Engine, table: Any, **where: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        query = select(table).where(*(table.c[k] == v for k, v in where.items()))
        return [dict(row._mapping) for row in conn.execute(query.order_by(table.c.id))]


# accepts


def valid_data() -> dict[str, Any]:
    return {
        "build_id": 1,
        "shard_id": 2,
        "snapshots": [{"name": "a", "image": "images/aa/a.png", "sha256": SHA, "baseline": None}],
    }


def test_accepts_a_snapshot_with_its_baseline() -> None:
    baseline = {"id": 7, "image": "images/bb/b.png", "sha256": "b" * 64}
    assert capture_kind.accepts(with_snapshot(baseline=baseline))


def test_accepts_well_formed_capture_data() -> None:
    assert capture_kind.accepts(valid_data())


def with_snapshot(**changes: Any) -> dict[str, Any]:
    data = valid_data()
    data["snapshots"][0] |= changes
    return data


@pytest.mark.parametrize(
    "data",
    [
        None,
        "capture",
        [],
        {},
        valid_data() | {"build_id": "1"},
        valid_data() | {"build_id": True},
        valid_data() | {"shard_id": None},
        valid_data() | {"shard_id": -3},
        valid_data() | {"snapshots": []},
        valid_data() | {"snapshots": "a.png"},
        valid_data() | {"extra": 1},
        with_snapshot(name=""),
        with_snapshot(name=3),
        with_snapshot(image="/etc/passwd"),
        with_snapshot(image=""),
        with_snapshot(sha256="A" * 64),
        with_snapshot(sha256="a" * 63),
        with_snapshot(sha256=None),
        {
            "build_id": 1,
            "shard_id": 2,
            "snapshots": [{"name": "a", "image": "a.png", "sha256": SHA}],
        },
        with_snapshot(baseline="images/bb/b.png"),
        with_snapshot(baseline={"id": 7, "image": "images/bb/b.png"}),
        with_snapshot(baseline={"id": 0, "image": "images/bb/b.png", "sha256": SHA}),
        with_snapshot(baseline={"id": 7, "image": "/etc/passwd", "sha256": SHA}),
        with_snapshot(baseline={"id": 7, "image": "images/bb/b.png", "sha256": "B" * 64}),
        {"build_id": 1, "shard_id": 2, "snapshots": [valid_data()["snapshots"][0]] * 2},
        {"build_id": 1, "shard_id": 2, "snapshots": [["a", "b", "c"]]},
    ],
)
def test_malformed_data_is_rejected_without_raising(data: Any) -> None:
    assert capture_kind.accepts(data) is False


def test_uploaded_jobs_are_accepted(engine: Engine, artifacts: Path, tmp_path: Path) -> None:
    upload(engine, artifacts, screens(tmp_path / "shots", a=BUTTON, b=BUTTON), shards=2)
    assert all(capture_kind.accepts(row["data"]) for row in rows(engine, jobs))


# prepare


def test_prepare_marks_shard_and_build_started_and_hands_over_the_project_options(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    with transaction(engine) as conn:
        change_settings(
            conn,
            "web",
            SettingsChange(metric="yiq", threshold=0.2, budget_pixels=9, flat_threshold="off"),
        )
    queued = upload(engine, artifacts, screens(tmp_path / "shots", a=BUTTON))
    (job,) = claim(engine)
    payload = prepare(engine, job, artifacts)
    assert payload["artifacts"] == str(artifacts.resolve())
    assert payload["diff_dir"] == f"diffs/{queued.build_id}"
    assert payload["options"] == {
        "metric": "yiq",
        "threshold": 0.2,
        "flat_threshold": None,
        "count_aa": False,
        "budget_pixels": 9,
    }
    assert [s["baseline"] for s in payload["snapshots"]] == [None]
    assert build_row(engine, queued.build_id)["status"] == "capturing"
    assert rows(engine, capture_shards)[0]["status"] == "running"
    assert rows(engine, capture_attempts)[0]["status"] == "running"


def test_a_new_build_compares_with_the_latest_accepted_baseline_builds(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    first = run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON))
    second = run_build(engine, artifacts, screens(tmp_path / "v2", a=MOVED))
    # A feature-branch build is never a baseline, whatever its age.
    run_build(engine, artifacts, screens(tmp_path / "f", a=()), branch="feature")
    upload(engine, artifacts, screens(tmp_path / "new", a=BUTTON, b=BUTTON, c=BUTTON))
    (job,) = claim(engine)
    baselines = {s["name"]: s["baseline"] for s in prepare(engine, job, artifacts)["snapshots"]}
    ids = {s["name"]: s["id"] for s in rows(engine, snapshots)}
    with engine.connect() as conn:
        by_build = {
            (r.build_id, r.name): (r.id, r.image_path, r.image_sha256)
            for r in conn.execute(select(snapshots))
        }
    a_id, a_image, a_sha = by_build[(second.build_id, "a")]
    b_id, b_image, b_sha = by_build[(first.build_id, "b")]
    assert baselines == {
        "a": {"id": a_id, "image": a_image, "sha256": a_sha},
        "b": {"id": b_id, "image": b_image, "sha256": b_sha},
        "c": None,
    }
    assert ids  # the builds above wrote their snapshots


def test_a_failed_snapshot_is_no_baseline(engine: Engine, artifacts: Path, tmp_path: Path) -> None:
    run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON))
    broken = tmp_path / "v2"
    broken.mkdir()
    (broken / "a.png").write_bytes(b"\x89PNG\r\n\x1a\n but not a png")  # passes the upload
    failed = run_build(engine, artifacts, broken)
    assert build_row(engine, failed.build_id)["status"] == "failed"
    upload(engine, artifacts, screens(tmp_path / "v3", a=BUTTON))
    (job,) = claim(engine)
    (entry,) = prepare(engine, job, artifacts)["snapshots"]
    first_a = rows(engine, snapshots, build_id=1)[0]
    assert entry["baseline"]["id"] == first_a["id"]


# record


def test_record_writes_snapshots_and_finalizes_the_build_once(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON, b=BUTTON, c=BUTTON))
    queued = run_build(
        engine,
        artifacts,
        screens(tmp_path / "v2", a=BUTTON, b=MOVED, d=BUTTON),
        branch="feature",
    )
    build = build_row(engine, queued.build_id)
    assert (
        build["status"],
        build["new"],
        build["unchanged"],
        build["changed"],
        build["failed"],
    ) == (
        "changed",
        1,
        1,
        1,
        0,
    )
    assert build["finished_at"] is not None
    assert build["accepted_at"] is None  # not the baseline branch
    assert Path(build["report_url"]).is_file()
    written = {s["name"]: s for s in rows(engine, snapshots, build_id=queued.build_id)}
    assert {name: s["status"] for name, s in written.items()} == {
        "a": "unchanged",
        "b": "changed",
        "d": "new",
    }
    assert (artifacts / written["b"]["diff_path"]).is_file()
    (attempt,) = rows(engine, capture_attempts, build_id=queued.build_id)
    assert attempt["status"] == "changed"
    assert attempt["finished_at"] is not None
    assert attempt["summary"] == {
        "status": "changed",
        "new": 1,
        "unchanged": 1,
        "changed": 1,
        "failed": 0,
        "shards": {"completed": 1},
    }


def test_a_baseline_branch_build_is_accepted_when_it_ends(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = run_build(engine, artifacts, screens(tmp_path / "v1", a=BUTTON))
    build = build_row(engine, queued.build_id)
    assert (build["status"], build["new"]) == ("passed", 1)
    assert build["accepted_at"] is not None


def test_the_build_ends_with_its_last_shard(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON, b=BUTTON), shards=2)
    first, second = claim(engine)
    for job in (first, second):
        settle_now(engine, job, artifacts)
        expected = "capturing" if job is first else "passed"
        assert build_row(engine, queued.build_id)["status"] == expected


def settle_now(engine: Engine, job: queue.Job, artifacts: Path) -> None:
    payload = prepare(engine, job, artifacts)
    assert settle(engine, job, capture.run(payload, lambda _: None))


def test_a_record_after_the_lease_was_lost_writes_nothing(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    (stale,) = claim(engine, host="host-a")
    result = capture.run(prepare(engine, stale, artifacts), lambda _: None)
    with transaction(engine) as conn:
        past = datetime.now(UTC) - timedelta(minutes=5)
        conn.execute(update(jobs).where(jobs.c.id == stale.id).values(lease_expires_at=past))
    (rescued,) = claim(engine, host="host-b")
    assert not settle(engine, stale, result)
    assert rows(engine, snapshots) == []
    assert build_row(engine, queued.build_id)["status"] == "capturing"
    assert settle(engine, rescued, result)
    assert len(rows(engine, snapshots)) == 1
    # A second settle of the same job is not ours any more either: results are written once.
    assert not settle(engine, rescued, result)
    assert len(rows(engine, snapshots)) == 1


@pytest.mark.parametrize(
    "result",
    [
        None,
        {},
        {"snapshots": []},
        {"snapshots": [{"name": "a", "status": "new"}]},
    ],
)
def test_a_malformed_result_is_refused_and_nothing_is_written(
    engine: Engine, artifacts: Path, tmp_path: Path, result: Any
) -> None:
    upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    (job,) = claim(engine)
    prepare(engine, job, artifacts)
    with pytest.raises(capture_kind.ResultError):
        settle(engine, job, result)
    assert rows(engine, snapshots) == []
    assert rows(engine, jobs)[0]["status"] == "running"  # the ack was rolled back with it


def test_a_result_with_a_bad_status_is_refused(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    (job,) = claim(engine)
    result = capture.run(prepare(engine, job, artifacts), lambda _: None)
    result["snapshots"][0]["status"] = "exploded"
    with pytest.raises(capture_kind.ResultError, match="malformed result for 'a'"):
        settle(engine, job, result)


def _duplicate_first(items: list[dict[str, Any]]) -> None:
    items[1] = dict(items[0])


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda items: items[0].pop("error"), "lacks or adds fields"),
        (lambda items: items[0].update(extra=1), "lacks or adds fields"),
        (lambda items: items.pop(), "do not match the job's snapshots"),
        (_duplicate_first, "do not match the job's snapshots"),
        (lambda items: items[0].update(name="z"), "do not match the job's snapshots"),
        (lambda items: items[0].update(name=["a"]), "do not match the job's snapshots"),
        (lambda items: items[0].update(width=-1), "malformed result"),
        (lambda items: items[0].update(height=True), "malformed result"),
        (lambda items: items[0].update(baseline_id=1.5), "malformed result"),
        (lambda items: items[0].update(diff_ratio="0"), "malformed result"),
        (lambda items: items[0].update(threshold=False), "malformed result"),
        (lambda items: items[0].update(metric=1), "malformed result"),
        (lambda items: items[0].update(count_aa=0), "malformed result"),
        (lambda items: items[0].update(diff_box=[0, 0, 0, 1]), "malformed result"),
        (lambda items: items[0].update(diff_box=[0, 0, 1]), "malformed result"),
        (lambda items: items[0].update(error=b"bytes"), "malformed result"),
    ],
)
def test_each_field_of_a_result_is_checked_before_anything_is_written(
    engine: Engine, artifacts: Path, tmp_path: Path, spoil: Any, reason: str
) -> None:
    upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON, b=MOVED))
    (job,) = claim(engine)
    result = capture.run(prepare(engine, job, artifacts), lambda _: None)
    spoil(result["snapshots"])
    with pytest.raises(capture_kind.ResultError, match=reason):
        settle(engine, job, result)
    assert rows(engine, snapshots) == []
    assert rows(engine, jobs)[0]["status"] == "running"


# two shards ending at the same moment


@pytest.fixture
def outcomes(monkeypatch: pytest.MonkeyPatch, engine: Engine) -> Iterator[list[str]]:
    """Every `reduce_build` outcome of `record`; on PostgreSQL both recorders meet first.

    The barrier holds each recording transaction after it closed its own shard and before it
    reduces the build, so both are in flight at once: the race the build lock is for. SQLite
    writers cannot be in flight together (BEGIN IMMEDIATE), so there they just start together.
    """
    seen: list[str] = []
    barrier = threading.Barrier(2, timeout=30)
    real = reduce.reduce_build

    def reduce_after_meeting(*args: Any, **kwargs: Any) -> reduce.ReduceOutcome:
        if engine.dialect.name == "postgresql":
            barrier.wait()
        outcome = real(*args, **kwargs)
        seen.append(outcome)
        return outcome

    monkeypatch.setattr(capture_kind, "reduce_build", reduce_after_meeting)
    yield seen


@pytest.mark.timeout(120)
def test_two_shards_ending_together_finalize_the_build_exactly_once(
    engine: Engine, artifacts: Path, tmp_path: Path, outcomes: list[str]
) -> None:
    rounds = 4
    errors: list[BaseException] = []

    def record(job: queue.Job, result: Any) -> None:
        try:
            assert settle(engine, job, result)
        except BaseException as error:
            errors.append(error)

    for round_ in range(rounds):
        shots = screens(tmp_path / f"r{round_}", a=BUTTON, b=BUTTON)
        queued = upload(engine, artifacts, shots, shards=2, branch=f"feature-{round_}")
        # The rounds before queued their builds' reports: only the captures race here.
        jobs_ = [job for job in claim(engine) if job.kind == "capture"]
        results = [capture.run(prepare(engine, job, artifacts), lambda _: None) for job in jobs_]
        threads = [
            threading.Thread(target=record, args=pair) for pair in zip(jobs_, results, strict=True)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert build_row(engine, queued.build_id)["status"] == "passed"
    assert sorted(outcomes) == ["finalized"] * rounds + ["open"] * rounds


# on_failed and on_cancelled


def fail(engine: Engine, job: queue.Job, error: str, artifacts: Path) -> None:
    with transaction(engine) as conn:
        assert queue.fail(conn, job.lease, error)
        capture_kind.on_failed(conn, job, error)


def test_on_failed_of_the_last_shard_finalizes_the_build_failed(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON, b=BUTTON), shards=2)
    done, crashed = claim(engine)
    settle_now(engine, done, artifacts)
    fail(engine, crashed, "capture kept crashing its worker: SIGSEGV x3", artifacts)
    build = build_row(engine, queued.build_id)
    assert (build["status"], build["new"], build["failed"]) == ("failed", 1, 0)
    assert build["error"] == "shard 1 failed: capture kept crashing its worker: SIGSEGV x3"
    shards = rows(engine, capture_shards, build_id=queued.build_id)
    assert [(s["status"], s["error"]) for s in shards] == [
        ("completed", None),
        ("failed", "capture kept crashing its worker: SIGSEGV x3"),
    ]
    (attempt,) = rows(engine, capture_attempts)
    assert (attempt["status"], attempt["error"]) == ("failed", build["error"])


def test_on_failed_of_a_shard_leaves_the_build_to_its_last_shard(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON, b=BUTTON), shards=2)
    crashed, last = claim(engine)
    fail(engine, crashed, "boom", artifacts)
    assert build_row(engine, queued.build_id)["status"] == "pending"
    settle_now(engine, last, artifacts)
    assert build_row(engine, queued.build_id)["status"] == "failed"


def test_a_job_failing_after_its_lease_ran_out_on_the_final_attempt_fails_its_shard(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    with transaction(engine) as conn:
        past = datetime.now(UTC) - timedelta(minutes=5)
        conn.execute(update(jobs).values(max_attempts=1))
    claim(engine)
    with transaction(engine) as conn:
        conn.execute(update(jobs).values(lease_expires_at=past))
    with transaction(engine) as conn:
        (expired,) = queue.expire_leases(conn)
        capture_kind.on_failed(conn, expired, queue.LEASE_EXHAUSTED_ERROR)
    build = build_row(engine, queued.build_id)
    assert (build["status"], build["error"]) == (
        "failed",
        "shard 0 failed: lease expired on the final attempt",
    )


def test_a_failed_job_without_a_shard_fails_its_build(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    with transaction(engine) as conn:
        conn.execute(update(jobs).values(shard_id=None))
    (job,) = claim(engine)
    fail(engine, job, "malformed job", artifacts)
    build = build_row(engine, queued.build_id)
    assert (build["status"], build["error"]) == ("failed", "malformed job")


def test_on_failed_after_the_build_ended_changes_nothing(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = run_build(engine, artifacts, screens(tmp_path / "s", a=BUTTON))
    before = build_row(engine, queued.build_id)
    (job,) = [queue.Job.from_row(row) for row in _job_rows(engine) if row.kind == "capture"]
    with transaction(engine) as conn:
        capture_kind.on_failed(conn, job, "late crash report")
    assert build_row(engine, queued.build_id) == before


def _job_rows(engine: Engine) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(jobs)))


def test_on_cancelled_of_the_last_open_shard_cancels_the_build(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    queued = upload(engine, artifacts, screens(tmp_path / "s", a=BUTTON, b=BUTTON), shards=2)
    done, running = claim(engine)
    settle_now(engine, done, artifacts)
    with transaction(engine) as conn:
        queue.request_cancel(conn, queued.build_id)
    with transaction(engine) as conn:
        assert queue.cancel(conn, running.lease)
        capture_kind.on_cancelled(conn, running)
    build = build_row(engine, queued.build_id)
    assert (build["status"], build["new"], build["accepted_at"]) == ("cancelled", 1, None)
    with engine.connect() as conn:
        statuses = conn.execute(select(func.count()).where(capture_shards.c.status == "cancelled"))
        assert statuses.scalar_one() == 1
