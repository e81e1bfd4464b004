"""The promises of `supervisor.builds.uploads` and `enqueue-build`, on PostgreSQL and SQLite."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select

from child.capture import shard as capture
from ipc.artifacts.folder import FolderStore
from ipc.framing import MAX_FRAME_BYTES, encode
from ipc.messages import Done, Run
from supervisor.builds import uploads
from supervisor.db import queue
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, capture_attempts, capture_shards, jobs, projects
from tests.capture_helpers import claim, prepare, run_cli, settle, write_png
from tests.command_line import call
from tests.hosts import ROOT


def images_folder(folder: Path, names: list[str]) -> Path:
    for index, name in enumerate(names):
        write_png(folder / f"{name}.png", marks=((index, index, 5, 5),))
    return folder


def table(engine: Engine, name: Any) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [dict(row._mapping) for row in conn.execute(select(name).order_by(name.c.id))]


def enqueue(engine: Engine, artifacts: Path, folder: Path, **options: Any) -> uploads.QueuedBuild:
    images = uploads.store_images(FolderStore(artifacts), folder)
    with transaction(engine) as conn:
        return uploads.enqueue_build(
            conn, project=options.pop("project", "web"), branch="main", images=images, **options
        )


def test_images_are_stored_once_under_their_sha256(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    first = write_png(tmp_path / "one/a.png", marks=((1, 1, 4, 4),))
    write_png(tmp_path / "two/b.png", marks=((1, 1, 4, 4),))
    digest = hashlib.sha256(first.read_bytes()).hexdigest()
    stored = uploads.store_images(FolderStore(artifacts), tmp_path / "one") + uploads.store_images(
        FolderStore(artifacts), tmp_path / "two"
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
    ],
    ids=["missing-folder", "empty-folder"],
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
    assert printed == {
        "build_id": 1,
        "source": "images",
        "shards": 2,
        "shard_ids": [1, 2],
        "job_ids": [1, 2],
        "snapshots": 3,
    }


def enqueue_args(database_url: str, tmp_path: Path, images: Path, *extra: str) -> list[str]:
    """`enqueue-build`'s arguments for `images`, on `main` unless `extra` names a branch."""
    args = [
        "enqueue-build",
        f"--database-url={database_url}", f"--artifacts={tmp_path / 'artifacts'}",
        "--project=web", f"--images={images}", *extra,
    ]  # fmt: skip
    if not any(option.startswith("--branch") for option in extra):
        args.append("--branch=main")
    return args


def enqueue_subprocess(
    database_url: str, tmp_path: Path, images: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """The real `python -m supervisor enqueue-build`, in a process of its own."""
    return subprocess.run(
        [sys.executable, "-m", "supervisor", *enqueue_args(database_url, tmp_path, images, *extra)],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip


def outside_link(folder: Path) -> Path:
    """`secret.png` in the folder, a link to a real PNG outside it."""
    secret = write_png(folder.parent / "host/secret.png", marks=((2, 2, 9, 9),))
    (folder / "secret.png").symlink_to(secret)
    return folder


def not_a_png(folder: Path) -> Path:
    (folder / "fake.png").write_text("<html>a page saved as .png</html>")
    return folder


def named(*names: str) -> Callable[[Path], Path]:
    def prepare(folder: Path) -> Path:
        for name in names:
            write_png(folder / name, marks=((3, 3, 4, 4),))
        return folder

    return prepare


def a_file(folder: Path) -> Path:
    return folder / "a.png"


def as_is(folder: Path) -> Path:
    return folder


def a_pipe(folder: Path) -> Path:
    os.mkfifo(folder / "pipe.png")
    return folder


def a_dangling_link(folder: Path) -> Path:
    (folder / "gone.png").symlink_to("missing.png")
    return folder


#: Each refused upload: how its folder is made (beside a good `a.png`), extra options, and what
#: the one line on stderr says (`{shots}` is the folder).
REFUSED: dict[str, tuple[Callable[[Path], Path], tuple[str, ...], str]] = {
    "link-outside": (outside_link, (), "{shots}/secret.png: a link to outside the folder ("),
    "case-only": (named("a.PNG"), (), "{shots}/a.PNG and {shots}/a.png: names equal but for case"),
    "case-of-folder": (named("A/b.png", "a/b.png"), (), "{shots}/A/b.png and {shots}/a/b.png: names"),
    "dot-name": (named("..png"), (), "{shots}/..png: snapshot name '.' is empty or only dots"),
    "empty-name": (named(".png"), (), "{shots}/.png: snapshot name '' is empty or only dots"),
    "dots-folder": (named(".../x.png"), (),
                    "snapshot name '.../x' has a part that is empty or only dots"),
    "newline": (named("a\nb.png"), (), "snapshot name 'a\\nb' has a control character"),
    "escape": (named("a\x1b[31mb.png"), (), "snapshot name 'a\\x1b[31mb' has a control character"),
    "long-name": (named("n" * 201 + ".png"), (), "snapshot name of 201 characters is longer than 200"),
    "not-a-png": (not_a_png, (), "{shots}/fake.png: not a PNG image (no PNG signature)"),
    "a-pipe": (a_pipe, (), "{shots}/pipe.png: not a regular file"),
    "dangling-link": (a_dangling_link, (), "{shots}/gone.png: not a regular file"),
    "not-a-folder": (a_file, (), "{shots}/a.png: not a folder"),
    "blank-branch": (as_is, ("--branch= ",), "the branch must not be empty"),
    "blank-project": (as_is, ("--project= ",), "a project name must not be empty"),
}  # fmt: skip


def files_under(folder: Path) -> list[Path]:
    return [path for path in folder.rglob("*") if not path.is_dir()] if folder.exists() else []


@pytest.mark.parametrize("case", REFUSED, ids=list(REFUSED))
def test_a_refused_upload_says_why_in_one_line_and_stores_nothing(
    database_url: str,
    engine: Engine,
    tmp_path: Path,
    case: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_folder, options, message = REFUSED[case]
    shots = tmp_path / "shots"
    write_png(shots / "a.png", marks=((1, 1, 5, 5),))
    args = enqueue_args(database_url, tmp_path, make_folder(shots), *options)
    result = call(args, monkeypatch, capsys)
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr
    assert result.stderr.startswith("storyshelf enqueue-build: ")
    assert message.format(shots=shots) in result.stderr
    assert result.stdout == ""
    assert table(engine, builds) == []
    assert files_under(tmp_path / "artifacts") == []


def test_links_inside_the_folder_are_followed(engine: Engine, tmp_path: Path) -> None:
    folder = images_folder(tmp_path / "shots", ["a", "b"])
    (folder / "alias.png").symlink_to(folder / "a.png")
    (folder / "sub").mkdir()
    (folder / "sub/b.png").symlink_to("../b.png")
    enqueue(engine, tmp_path / "artifacts", folder)
    (job,) = table(engine, jobs)
    shots = {shot["name"]: shot["sha256"] for shot in job["data"]["snapshots"]}
    assert sorted(shots) == ["a", "alias", "b", "sub/b"]
    assert shots["alias"] == shots["a"] and shots["sub/b"] == shots["b"]


def fake_images(count: int) -> list[uploads.StoredImage]:
    return [uploads.StoredImage(f"s{n:06d}", "images/00/x.png", "0" * 64) for n in range(count)]


@pytest.mark.parametrize(
    ("snapshots", "shards"), [(1, 1), (500, 1), (501, 2), (1000, 2), (10_000, 20), (10_001, 21)]
)
def test_an_upload_naming_no_number_of_shards_gets_one_per_500_snapshots(
    engine: Engine, snapshots: int, shards: int
) -> None:
    with transaction(engine) as conn:
        queued = uploads.enqueue_build(
            conn, project="web", branch="main", images=fake_images(snapshots)
        )
    assert len(queued.shard_ids) == shards
    sizes = [len(job["data"]["snapshots"]) for job in table(engine, jobs)]
    assert sum(sizes) == snapshots and max(sizes) - min(sizes) <= 1


def test_more_shards_than_asked_when_a_shard_would_hold_too_many() -> None:
    runs = uploads.split_evenly(fake_images(10), 2, max_per_shard=3)
    assert [len(run) for run in runs] == [3, 3, 2, 2]
    assert [image.name for run in runs for image in run] == [f"s{n:06d}" for n in range(10)]
    assert [len(run) for run in uploads.split_evenly(fake_images(6), 2, max_per_shard=3)] == [3, 3]


def test_an_upload_too_big_for_one_shard_is_split_whatever_shards_says(
    database_url: str, engine: Engine, tmp_path: Path
) -> None:
    count = uploads.MAX_SNAPSHOTS_PER_SHARD + 1
    png = write_png(tmp_path / "one.png", size=(1, 1)).read_bytes()
    shots = tmp_path / "shots"
    shots.mkdir()
    for n in range(count):
        (shots / f"s{n:05d}.png").write_bytes(png)
    result = enqueue_subprocess(database_url, tmp_path, shots, "--shards=1", "--json")
    assert result.returncode == 0, result.stderr
    printed = json.loads(result.stdout)
    assert (printed["shards"], printed["snapshots"]) == (2, count)
    sizes = [len(job["data"]["snapshots"]) for job in table(engine, jobs)]
    assert sum(sizes) == count
    assert len(sizes) == 2
    assert max(sizes) <= uploads.MAX_SNAPSHOTS_PER_SHARD


def test_a_full_shard_of_the_longest_names_fits_in_a_frame_both_ways(
    engine: Engine, tmp_path: Path
) -> None:
    """The bound holds for the real run message, baselines included, and for its result."""
    artifacts = tmp_path / "artifacts"
    (stored,) = uploads.store_images(FolderStore(artifacts), images_folder(tmp_path / "one", ["x"]))
    # Four UTF-8 bytes a character: the longest names in bytes that an upload lets through.
    names = [f"{n:04d}" + "\U0001d538" * (uploads.MAX_NAME_CHARS - 4) for n in range(4080)]
    assert len(names) == uploads.MAX_SNAPSHOTS_PER_SHARD
    images = [uploads.StoredImage(name, stored.image, stored.sha256) for name in names]
    for branch in ("main", "feature"):
        with transaction(engine) as conn:
            uploads.enqueue_build(conn, project="web", branch=branch, images=images, shards=1)
        (job,) = [job for job in claim(engine) if job.kind == "capture"]
        payload = prepare(engine, job, artifacts)
        run = encode(Run(job.id, job.kind, job.attempt, payload))
        result = capture.run(payload, lambda _progress: None)
        done = encode(Done(job.id, result))
        assert settle(engine, job, result)
    assert all(shot["baseline"] for shot in payload["snapshots"])
    assert {shot["status"] for shot in result["snapshots"]} == {"unchanged"}
    assert len(run) < MAX_FRAME_BYTES and len(done) < MAX_FRAME_BYTES
    # So does the build's report (`test_report.py` has one too large to list whole).
    (publish,) = [job for job in claim(engine) if job.kind == "publish"]
    listing = prepare(engine, publish, artifacts)
    assert len(encode(Run(publish.id, publish.kind, publish.attempt, listing))) < MAX_FRAME_BYTES
    assert len(listing["snapshots"]) + listing["unlisted"] == len(names)
