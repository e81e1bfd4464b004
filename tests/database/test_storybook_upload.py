"""`enqueue-build --storybook`: a static build stored once by content, refused whole when it is
not one, and queued as one `plan` job with the baselines of its creation; on both databases."""

from __future__ import annotations

import hashlib
import json
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, select, update

from ipc.artifacts.folder import FolderStore
from ipc.storybook import file_key
from supervisor.builds import baselines
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.db.connection import transaction
from supervisor.db.tables import builds, jobs, snapshots
from tests.capture_helpers import run_build, run_cli, screens

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "storybook" / "storybook-static"


def enqueue(
    capsys: pytest.CaptureFixture[str],
    database_url: str,
    artifacts: Path,
    folder: Path,
    *extra: str,
) -> tuple[int, dict[str, Any] | None, str]:
    """Run `enqueue-build --storybook` in-process: (exit status, its JSON or None, stderr)."""
    code = run_cli(
        [
            "enqueue-build",
            f"--database-url={database_url}",
            f"--artifacts={artifacts}",
            "--project=web",
            "--branch=main",
            f"--storybook={folder}",
            "--json",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if code == 0 else None, captured.err


def stored_files(artifacts: Path) -> set[Path]:
    return {path for path in (artifacts / "storybooks").rglob("*") if path.is_file()}


def test_a_static_build_becomes_one_plan_job_and_its_files_are_stored_by_content(
    database_url: str, engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifacts = tmp_path / "artifacts"
    code, printed, _ = enqueue(capsys, database_url, artifacts, FIXTURE, "--commit=abc123")
    assert code == 0 and printed is not None
    assert (printed["source"], printed["stories"], printed["snapshots"]) == ("storybook", 29, None)
    with engine.connect() as conn:
        build = conn.execute(select(builds)).one()._mapping
        plan = conn.execute(select(jobs)).one()._mapping
    assert (build["status"], build["source"], build["commit"]) == ("pending", "storybook", "abc123")
    assert (plan["kind"], plan["build_id"], plan["shard_id"]) == ("plan", build["id"], None)
    assert plan["data"] == {
        "build_id": build["id"],
        "storybook": build["storybook"],
        "shards": None,
    }
    manifest = json.loads((artifacts / build["storybook"]["manifest"]).read_bytes())
    raw = (artifacts / build["storybook"]["manifest"]).read_bytes()
    assert hashlib.sha256(raw).hexdigest() == build["storybook"]["sha256"]
    every_file = {p.relative_to(FIXTURE).as_posix() for p in FIXTURE.rglob("*") if p.is_file()}
    assert set(manifest["files"]) == every_file
    for path, digest in manifest["files"].items():
        assert (artifacts / file_key(path, digest)).read_bytes() == (FIXTURE / path).read_bytes()


def test_an_unchanged_file_is_stored_once_across_builds(tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    first = store_storybook(FolderStore(artifacts), FIXTURE)
    before = stored_files(artifacts)
    changed = shutil.copytree(FIXTURE, tmp_path / "changed")
    (changed / "iframe.html").write_text((changed / "iframe.html").read_text() + "\n<!-- v2 -->")
    second = store_storybook(FolderStore(artifacts), changed)
    again = store_storybook(FolderStore(artifacts), FIXTURE)
    # Every file but the manifest (files of equal bytes and name are one).
    assert first.written == len(before) - 1
    assert second.written == 1  # the changed page; the other files are the first build's
    assert again.written == 0 and again.ref == first.ref
    assert len(stored_files(artifacts)) == len(before) + 2


def test_the_baselines_of_its_creation_are_frozen_for_the_plan(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    first = {"example-button--primary": ((1, 1, 4, 4),), "other": ((2, 2, 2, 2),)}
    run_build(engine, artifacts, screens(tmp_path / "one", **first))
    with transaction(engine) as conn:
        queued = enqueue_storybook(
            conn,
            project="web",
            branch="feature",
            storybook=store_storybook(FolderStore(artifacts), FIXTURE),
        )
        # The plan waits (its run_at ahead) while a newer baseline is accepted.
        conn.execute(update(jobs).values(run_at=datetime(2100, 1, 1, tzinfo=UTC)))
    second = {"example-button--primary": ((9, 9, 3, 3),)}
    run_build(engine, artifacts, screens(tmp_path / "two", **second))
    with engine.connect() as conn:
        frozen = baselines.find_frozen(conn, queued.build_id, ["example-button--primary", "nope"])
        newest = baselines.find(conn, 1, "main", ["example-button--primary"])
        first_ids = set(
            conn.execute(select(snapshots.c.id).where(snapshots.c.build_id == 1)).scalars()
        )
    assert set(frozen) == {"example-button--primary"}
    assert frozen["example-button--primary"]["id"] in first_ids
    assert newest["example-button--primary"]["id"] not in first_ids


def _garbage_index(folder: Path) -> Path:
    shutil.copytree(FIXTURE, folder)
    (folder / "index.json").write_text('{"v": 5, "entries": ')
    return folder


def _no_index(folder: Path) -> Path:
    folder.mkdir()
    (folder / "iframe.html").write_text("<html></html>")
    return folder


def _other_version(folder: Path) -> Path:
    shutil.copytree(FIXTURE, folder)
    (folder / "index.json").write_text('{"v": 9, "entries": {}}')
    return folder


def _link_out(folder: Path) -> Path:
    shutil.copytree(FIXTURE, folder)
    secret = folder.parent / "secret.txt"
    secret.write_text("not the build's")
    (folder / "leak.txt").symlink_to(secret)
    return folder


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda folder: folder, "no such folder"),
        (_no_index, "no index.json or stories.json: not a Storybook static build"),
        (_garbage_index, "index.json"),
        (_other_version, "index.json"),
        (_link_out, "a link to outside the folder"),
    ],
    ids=["missing", "no-index", "garbage-index", "other-version", "link-out"],
)
def test_what_is_not_a_static_build_is_refused_in_one_line_and_stores_nothing(
    database_url: str,
    engine: Engine,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    make: Any,
    message: str,
) -> None:
    artifacts = tmp_path / "artifacts"
    code, _, err = enqueue(capsys, database_url, artifacts, make(tmp_path / "build"))
    assert code == 1
    assert err.startswith("storyshelf enqueue-build: ") and message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (artifacts / "storybooks").exists()
    with engine.connect() as conn:
        assert conn.execute(select(builds)).all() == []
