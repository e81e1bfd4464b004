"""The promises of a review (`supervisor.review`, `python -m supervisor review`): decisions kept,
accepted snapshots become their branch's baselines, the build's review state and `build`'s exit
follow, and a review that cannot be taken is one line with nothing written. On both databases.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, insert, select

from supervisor.builds.baselines import find_frozen, freeze
from supervisor.commands.build import BuildExit
from supervisor.db.connection import transaction
from supervisor.db.tables import baselines, branch_baselines, builds, reviews, snapshots
from supervisor.host.pool import Child
from supervisor.review.decisions import review_build
from tests.capture_helpers import run_build, run_cli, run_jobs, upload, write_png
from tests.settling import SettledRunner
from tests.webhook_server import webhook_server

BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
WIDER = ((8, 8, 30, 10),)


def main_build(engine: Engine, artifacts: Path, tmp_path: Path) -> int:
    """The baseline branch's build of a, b and c: accepted when it ends."""
    for name in "abc":
        write_png(tmp_path / "v1" / f"{name}.png", marks=BUTTON)
    return run_build(engine, artifacts, tmp_path / "v1").build_id


def branch_images(tmp_path: Path) -> Path:
    """The branch's screenshots: a moved, b wider, c as it was, d new."""
    folder = tmp_path / "v2"
    write_png(folder / "a.png", marks=MOVED)
    write_png(folder / "b.png", marks=WIDER)
    write_png(folder / "c.png", marks=BUTTON)
    write_png(folder / "d.png", marks=BUTTON)
    return folder


def branch_build(engine: Engine, artifacts: Path, tmp_path: Path, branch: str = "feature") -> int:
    return run_build(engine, artifacts, branch_images(tmp_path), branch=branch).build_id


def statuses(engine: Engine, build_id: int) -> dict[str, str]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(snapshots.c.name, snapshots.c.status).where(snapshots.c.build_id == build_id)
        )
        return {name: status for name, status in rows}


def build_review(engine: Engine, build_id: int) -> str | None:
    with engine.connect() as conn:
        state: str | None = conn.execute(
            select(builds.c.review).where(builds.c.id == build_id)
        ).scalar_one()
        return state


def history(engine: Engine) -> list[tuple[str, str, str]]:
    with engine.connect() as conn:
        return [
            tuple(row)
            for row in conn.execute(
                select(snapshots.c.name, reviews.c.decision, reviews.c.by)
                .join(snapshots, snapshots.c.id == reviews.c.snapshot_id)
                .order_by(reviews.c.id)
            )
        ]


def cli(database_url: str, tmp_path: Path, *argv: str) -> int:
    return run_cli([argv[0], f"--database-url={database_url}", *argv[1:]])


def gate(database_url: str, tmp_path: Path, build_id: int, *extra: str) -> int:
    artifacts = f"--artifacts={tmp_path / 'artifacts'}"
    return run_cli(["build", f"--database-url={database_url}", artifacts, str(build_id), *extra])


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


def test_accepting_a_branch_s_changes_opens_its_gate_and_its_next_build_is_unchanged(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    first = branch_build(engine, artifacts, tmp_path)
    assert statuses(engine, first) == {"a": "changed", "b": "changed", "c": "unchanged", "d": "new"}
    assert build_review(engine, first) == "pending"
    assert gate(database_url, tmp_path, first) == BuildExit.CHANGED
    assert gate(database_url, tmp_path, first, "--exit-zero-on-changes") == BuildExit.PASSED

    review = ("review", str(first), "--accept", "--by", "ana")
    assert cli(database_url, tmp_path, *review, "--snapshot", "a") == 0
    assert build_review(engine, first) == "pending"  # b still waits
    assert gate(database_url, tmp_path, first) == BuildExit.CHANGED
    assert cli(database_url, tmp_path, *review, "--comment", "the new layout") == 0
    assert build_review(engine, first) == "accepted"
    assert gate(database_url, tmp_path, first) == BuildExit.PASSED
    assert history(engine) == [
        ("a", "accepted", "ana"),
        ("a", "accepted", "ana"),
        ("b", "accepted", "ana"),
        ("d", "accepted", "ana"),
    ]

    again = branch_build(engine, artifacts, tmp_path / "again")
    assert set(statuses(engine, again).values()) == {"unchanged"}
    assert gate(database_url, tmp_path, again) == BuildExit.PASSED
    # Another branch, and the baseline branch's baselines, are as they were.
    other = branch_build(engine, artifacts, tmp_path / "other", branch="other")
    assert statuses(engine, other) == statuses(engine, first)
    with engine.connect() as conn:
        assert set(conn.execute(select(baselines.c.build_id)).scalars()) == {1}


def test_a_rejection_fails_the_gate_takes_the_baseline_back_and_the_last_decision_wins(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    first = branch_build(engine, artifacts, tmp_path)
    assert cli(database_url, tmp_path, "review", str(first), "--accept", "--by", "ana") == 0
    assert cli(database_url, tmp_path, "review", str(first), "--reject", "--by", "bo", "--snapshot", "b") == 0  # fmt: skip
    assert build_review(engine, first) == "rejected"
    assert gate(database_url, tmp_path, first) == BuildExit.REJECTED
    assert gate(database_url, tmp_path, first, "--exit-zero-on-changes") == BuildExit.REJECTED
    with engine.connect() as conn:
        kept = set(conn.execute(select(branch_baselines.c.name)).scalars())
    assert kept == {"a", "d"}  # b's acceptance taken back: the branch compares b with main's

    assert statuses(engine, branch_build(engine, artifacts, tmp_path / "next"))["b"] == "changed"
    assert cli(database_url, tmp_path, "review", str(first), "--accept", "--by", "cy", "--snapshot", "b") == 0  # fmt: skip
    assert build_review(engine, first) == "accepted"
    assert [row for row in history(engine) if row[0] == "b"] == [
        ("b", "accepted", "ana"),
        ("b", "rejected", "bo"),
        ("b", "accepted", "cy"),
    ]


def test_a_build_s_baselines_are_those_accepted_when_it_was_queued(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    first = branch_build(engine, artifacts, tmp_path)
    queued = upload(engine, artifacts, branch_images(tmp_path / "queued"), branch="feature")
    assert cli(database_url, tmp_path, "review", str(first), "--accept", "--by", "ana") == 0
    run_jobs(engine, artifacts)
    assert statuses(engine, queued.build_id) == statuses(engine, first)


@pytest.mark.parametrize(
    ("argv", "message", "code"),
    [
        (("--snapshot", "zz"), "has no snapshot named 'zz'", 1),
        (("--snapshot", "c"), "snapshot 'c' is unchanged: there is nothing to review", 1),
        (("--snapshot", "e"), "snapshot 'e' failed: it has no image to accept or reject", 1),
        (("--by", "  "), "a review needs the reviewer's name", 1),
    ],
)
def test_a_review_that_cannot_be_taken_is_one_line_and_writes_nothing(
    engine: Engine,
    database_url: str,
    artifacts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: tuple[str, ...],
    message: str,
    code: int,
) -> None:
    main_build(engine, artifacts, tmp_path)
    folder = branch_images(tmp_path)
    (folder / "e.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"garbled" * 20)  # fails to decode
    build_id = run_build(engine, artifacts, folder, branch="feature").build_id
    by = () if "--by" in argv else ("--by", "ana")
    capsys.readouterr()
    assert cli(database_url, tmp_path, "review", str(build_id), "--accept", *by, *argv) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert history(engine) == []
    assert build_review(engine, build_id) is None  # failed: its gate is the failure
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(branch_baselines)).scalar_one() == 0


def test_a_build_still_capturing_or_missing_is_refused(
    engine: Engine,
    database_url: str,
    artifacts: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    main_build(engine, artifacts, tmp_path)
    queued = upload(engine, artifacts, branch_images(tmp_path), branch="feature")
    capsys.readouterr()
    assert cli(database_url, tmp_path, "review", str(queued.build_id), "--accept", "--by", "a") == 1
    assert "is still pending: review it once it has ended" in capsys.readouterr().err
    assert cli(database_url, tmp_path, "review", "999", "--reject", "--by", "a") == 5
    assert capsys.readouterr().err == "storyshelf review: no build with id 999\n"
    assert history(engine) == []


def test_with_auto_accept_off_the_baseline_branch_waits_for_its_review(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    assert cli(database_url, tmp_path, "project", "web", "--no-auto-accept") == 0
    second = run_build(engine, artifacts, branch_images(tmp_path)).build_id
    assert build_review(engine, second) == "pending"
    assert gate(database_url, tmp_path, second) == BuildExit.CHANGED
    with engine.connect() as conn:
        assert set(conn.execute(select(baselines.c.build_id)).scalars()) == {1}
    assert cli(database_url, tmp_path, "review", str(second), "--accept", "--by", "ana") == 0
    with engine.connect() as conn:
        moved = {n: b for n, b in conn.execute(select(baselines.c.name, baselines.c.build_id))}
    assert moved == {"a": second, "b": second, "c": 1, "d": second}
    assert gate(database_url, tmp_path, second) == BuildExit.PASSED


def test_two_reviewers_at_once_are_both_kept_and_one_decision_is_the_state(
    engine: Engine, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    build_id = branch_build(engine, artifacts, tmp_path)
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def decide(decision: Any, by: str) -> None:
        try:
            start.wait()
            with transaction(engine) as conn:
                review_build(conn, build_id, decision, ["a"], by)
        except BaseException as error:  # reported below
            errors.append(error)

    threads = [
        threading.Thread(target=decide, args=("accepted", "ana")),
        threading.Thread(target=decide, args=("rejected", "bo")),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    decided = history(engine)
    assert sorted(decided) == [("a", "accepted", "ana"), ("a", "rejected", "bo")]
    last = decided[-1][1]
    assert build_review(engine, build_id) == ("rejected" if last == "rejected" else "pending")
    with engine.connect() as conn:
        kept = set(conn.execute(select(branch_baselines.c.name)).scalars())
    assert kept == ({"a"} if last == "accepted" else set())


def test_a_review_is_posted_to_the_webhooks_as_build_reviewed_signed(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path, child: Child
) -> None:
    runner = SettledRunner(engine, database_url, artifacts, child)
    main_build(engine, artifacts, tmp_path)
    build_id = branch_build(engine, artifacts, tmp_path)
    runner.run_all()
    with webhook_server() as hook:
        assert (
            cli(
                database_url,
                tmp_path,
                "project",
                "web",
                "--webhook",
                hook.url,
                "--webhook-secret",
                "s3cret",
                "--webhook-allow-private",
            )
            == 0
        )
        review = ("review", str(build_id), "--accept", "--by", "ana", "--comment", "intended")
        assert cli(database_url, tmp_path, *review) == 0
        runner.run_all()
    (received,) = hook.received
    assert received.headers["X-Storyshelf-Event"] == "build.reviewed"
    assert received.headers["X-Storyshelf-Signature"].startswith("sha256=")
    body = json.loads(received.body)
    assert body["event"] == "build.reviewed"
    assert body["build"]["review"] == "accepted"
    assert [(d["snapshot"], d["decision"], d["by"], d["comment"]) for d in body["decisions"]] == [
        ("a", "accepted", "ana", "intended"),
        ("b", "accepted", "ana", "intended"),
        ("d", "accepted", "ana", "intended"),
    ]
    assert body["decisions_total"] == 3


def test_a_baseline_branch_build_with_changes_is_accepted_when_it_ends(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    second = run_build(engine, artifacts, branch_images(tmp_path)).build_id
    assert build_review(engine, second) == "accepted"
    assert gate(database_url, tmp_path, second) == BuildExit.PASSED


def test_a_storybook_build_freezes_its_branch_s_accepted_snapshots_before_main_s(
    engine: Engine, database_url: str, artifacts: Path, tmp_path: Path
) -> None:
    main_build(engine, artifacts, tmp_path)
    first = branch_build(engine, artifacts, tmp_path)
    assert cli(database_url, tmp_path, "review", str(first), "--accept", "--by", "ana") == 0
    with transaction(engine) as conn:
        frozen = {branch: baselines_of(conn, branch, "abcd") for branch in ("feature", "other")}
    assert frozen["feature"] == {"a": first, "b": first, "c": 1, "d": first}
    assert frozen["other"] == {"a": 1, "b": 1, "c": 1}


def baselines_of(conn: Any, branch: str, names: str) -> dict[str, int]:
    """The builds `freeze` takes each name's baseline from, for a build of `branch`."""
    build_id = conn.execute(
        insert(builds).values(project_id=1, branch=branch, status="pending").returning(builds.c.id)
    ).scalar_one()
    freeze(conn, 1, branch, build_id)
    found = find_frozen(conn, build_id, list(names))
    origin = select(snapshots.c.id, snapshots.c.build_id)
    by_id = {snapshot_id: origin_build for snapshot_id, origin_build in conn.execute(origin)}
    return {name: by_id[baseline["id"]] for name, baseline in found.items()}
