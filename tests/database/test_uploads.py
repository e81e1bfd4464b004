"""The promises of `supervisor.builds.uploads` and `enqueue-build`, on PostgreSQL and SQLite."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from supervisor.builds import uploads
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, capture_attempts, capture_shards, jobs, projects
from tests.capture_helpers import run_cli, write_png


def images_folder(folder: Path, names: list[str]) -> Path:
    for index, name in enumerate(names):
        write_png(folder / f"{name}.png", marks=((index, index, 5, 5),))
    return folder


def table(engine: Engine, name: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(select(name).order_by(name.c.id))]


def enqueue(engine: Engine, artifacts: Path, folder: Path, **options: Any) -> uploads.QueuedBuild:
    images = uploads.store_images(artifacts, folder)
    with transaction(engine) as conn:
        return uploads.enqueue_build(
            conn, project=options.pop("project", "web"), branch="main", images=images, **options
        )


def test_images_are_stored_once_under_their_sha256(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    first = write_png(tmp_path / "one/a.png", marks=((1, 1, 4, 4),))
    write_png(tmp_path / "two/b.png", marks=((1, 1, 4, 4),))
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    stored = uploads.store_images(artifacts, tmp_path / "one") + uploads.store_images(
        artifacts, tmp_path / "two"
    )
    assert {image.image for image in stored} == {f"images/{digest[:2]}/{digest}.png"}
    assert {image.sha256 for image in stored} == {digest}
    assert [p.name for p in (artifacts / "images").rglob("*") if p.is_file()] == [f"{digest}.png"]
    assert (artifacts / stored[0].image).read_bytes() == first.read_bytes()


def test_snapshot_names_are_posix_paths_under_the_folder_without_png(tmp_path: Path) -> None:
    folder = images_folder(tmp_path / "shots", ["button/primary", "card/list/empty", "z"])
    (folder / "notes.txt").write_text("not an image")
    names = [name for name, _ in uploads.find_images(folder)]
    assert names == ["button/primary", "card/list/empty", "z"]


def test_enqueue_build_creates_project_build_attempt_shards_and_jobs(
    engine: Engine, tmp_path: Path
) -> None:
    queued = enqueue(engine, tmp_path / "artifacts", images_folder(tmp_path / "s", ["a", "b"]))
    (project,) = table(engine, projects)
    (build,) = table(engine, builds)
    (attempt,) = table(engine, capture_attempts)
    (shard,) = table(engine, capture_shards)
    (job,) = table(engine, jobs)
    assert (project["name"], build["project_id"], build["status"]) == (
        "web",
        project["id"],
        "pending",
    )
    assert (attempt["build_id"], attempt["status"]) == (build["id"], "queued")
    assert (shard["build_id"], shard["index"], shard["status"]) == (build["id"], 0, "queued")
    assert (job["kind"], job["build_id"], job["shard_id"], job["status"]) == (
        "capture",
        build["id"],
        shard["id"],
        "queued",
    )
    assert job["data"]["build_id"] == build["id"]
    assert [s["name"] for s in job["data"]["snapshots"]] == ["a", "b"]
    assert queued == uploads.QueuedBuild(build["id"], (shard["id"],), (job["id"],), 2)


def test_shards_split_the_snapshots_evenly_and_deterministically(
    engine: Engine, tmp_path: Path
) -> None:
    names = [f"story-{n}" for n in range(7)]
    enqueue(engine, tmp_path / "artifacts", images_folder(tmp_path / "s", names), shards=3)
    split = [[s["name"] for s in job["data"]["snapshots"]] for job in table(engine, jobs)]
    assert split == [names[0:3], names[3:5], names[5:7]]
    assert [s["index"] for s in table(engine, capture_shards)] == [0, 1, 2]


def test_never_more_shards_than_snapshots(engine: Engine, tmp_path: Path) -> None:
    queued = enqueue(
        engine, tmp_path / "artifacts", images_folder(tmp_path / "s", ["a", "b"]), shards=5
    )
    assert len(queued.shard_ids) == 2
    assert all(len(job["data"]["snapshots"]) == 1 for job in table(engine, jobs))


def test_an_existing_project_is_reused(engine: Engine, tmp_path: Path) -> None:
    folder = images_folder(tmp_path / "s", ["a"])
    enqueue(engine, tmp_path / "artifacts", folder)
    enqueue(engine, tmp_path / "artifacts", folder)
    assert len(table(engine, projects)) == 1
    assert len(table(engine, builds)) == 2


def test_a_failing_upload_leaves_no_build_behind(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = images_folder(tmp_path / "s", ["a", "b"])
    real = queue.enqueue
    calls: list[int] = []

    def enqueue_then_fail(*args: Any, **kwargs: Any) -> int:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("database went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(queue, "enqueue", enqueue_then_fail)
    with pytest.raises(RuntimeError):
        enqueue(engine, tmp_path / "artifacts", folder, shards=2)
    for name in (projects, builds, capture_attempts, capture_shards, jobs):
        assert table(engine, name) == []


@pytest.mark.parametrize(
    ("prepare", "shards", "message"),
    [
        (lambda folder: folder / "missing", 1, "no such folder"),
        (lambda folder: folder, 1, "no PNG images in this folder"),
        (lambda folder: images_folder(folder, ["a"]), 0, "--shards must be 1 or more, not 0"),
    ],
    ids=["missing-folder", "empty-folder", "no-shards"],
)
def test_enqueue_build_rejects_with_a_clear_message(
    database_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    prepare: Any,
    shards: int,
    message: str,
) -> None:
    folder = tmp_path / "shots"
    folder.mkdir()
    (folder / "readme.txt").write_text("no images here")
    code = run_cli(
        [
            "enqueue-build",
            f"--database-url={database_url}",
            f"--artifacts={tmp_path / 'artifacts'}",
            "--project=web",
            "--branch=main",
            f"--images={prepare(folder)}",
            f"--shards={shards}",
        ]
    )
    assert code == 1
    assert message in capsys.readouterr().err


def enqueue_command(database_url: str, tmp_path: Path, *extra: str) -> int:
    return run_cli(
        [
            "enqueue-build",
            f"--database-url={database_url}",
            f"--artifacts={tmp_path / 'artifacts'}",
            "--project=web",
            "--branch=feature",
            f"--images={tmp_path / 'shots'}",
            *extra,
        ]
    )


def test_the_command_prints_the_build_id(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images_folder(tmp_path / "shots", ["a"])
    assert enqueue_command(database_url, tmp_path, "--commit=abc123") == 0
    assert capsys.readouterr().out == "1\n"


def test_the_command_prints_ids_and_count_as_json(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    images_folder(tmp_path / "shots", ["a", "b", "c"])
    assert enqueue_command(database_url, tmp_path, "--shards=2", "--json") == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"build_id": 1, "shard_ids": [1, 2], "job_ids": [1, 2], "snapshots": 3}
