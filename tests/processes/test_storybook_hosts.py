"""Storybook builds through real hosts: `enqueue-build --storybook`, a `plan` job and capture
jobs in forked children, each with its own Chromium; on PostgreSQL and SQLite.

The fixture Storybook (`tests/fixtures/storybook/`) has a story for every promise: opt-outs, two
sizes, a story that throws and one that hangs its page, a frozen clock, motion, a web font, an
image from the internet. A second build of the same Storybook, captured by another host (other
children, other browsers), must give byte-identical images, so every story settles by hash.
"""

from __future__ import annotations

import json
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from sqlalchemy import Engine, select

from ipc.artifacts.folder import FolderStore
from ipc.artifacts.store import ArtifactStore
from supervisor.builds.storybooks import enqueue_storybook, store_storybook
from supervisor.builds.view import load_build
from supervisor.db.connection import transaction
from supervisor.db.tables import jobs, snapshots
from tests.chromium import require_chromium
from tests.hosts import HostProcess, StartHost, build_row, hosts, wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "storybook" / "storybook-static"
#: The hang story takes its 15 s cap: the stall must leave it room (the child reports progress
#: after every story, not inside one).
STORY_HOST = (
    "--concurrency", "2", "--lease-seconds", "45", "--stall-seconds", "30",
    "--backoff-base-seconds", "0.1", "--poll-seconds", "0.3", "--drain-seconds", "10",
)  # fmt: skip
#: The story the second build's branch deletes.
REMOVED = "example-card--with-text"
#: The stories that draw a new number in their ignore regions on every render.
LIVE = "example-ignore--"
#: The story that hangs its page: its 15 s cap is waited out once, in the first build.
HANG = "example-hang--main-thread-hang"
#: The fixture's snapshots: 29 stories, two opted out, three with two modes each.
EXPECTED = {
    "example-broken--throws-in-render": "failed",
    "example-clock--animation-frame": "new",
    "example-clock--animation-frame-at-start": "new",
    "example-clock--interval-and-timeout": "new",
    "example-clock--smil": "new",
    "example-clock--web-animation": "new",
    "example-ignore--chromatic-ignore": "new",
    "example-ignore--ignore-selectors": "new",
    "example-ignore--lost-pixel-mask": "new",
    "example-themes--light-and-dark [dark]": "new",
    "example-themes--light-and-dark [light]": "new",
    "example-button--primary": "new",
    "example-button--secondary": "new",
    "example-card--with-text": "new",
    "example-delay--chromatic-delay": "new",
    "example-diff--chromatic-diff-threshold": "new",
    "example-diff--lost-pixel-threshold": "new",
    "example-font--web-font": "new",
    "example-hang--main-thread-hang": "failed",
    "example-images--external-image": "new",
    "example-images--local-image": "new",
    "example-interactive--play-reveals": "new",
    "example-motion--animation-at-start": "new",
    "example-motion--fade-in": "new",
    "example-motion--spinner": "new",
    "example-nondeterministic--date-and-random": "new",
    "example-viewports--chromatic-widths [1200]": "new",
    "example-viewports--chromatic-widths [320]": "new",
    "example-viewports--lost-pixel-breakpoints [1024]": "new",
    "example-viewports--lost-pixel-breakpoints [375]": "new",
}


@pytest.fixture(autouse=True)
def chromium_is_required() -> None:
    """Every test here renders in Chromium (missing: a failure under CI=true, else a skip)."""
    require_chromium()


@pytest.fixture
def artifacts(tmp_path: Path) -> Path:
    return tmp_path / "artifacts"


@pytest.fixture
def start_host(database_url: str, artifacts: Path) -> Iterator[StartHost]:
    yield from hosts(database_url, artifacts)


@pytest.fixture
def bucket_hosts(database_url: str, store: ArtifactStore, tmp_path: Path) -> Iterator[StartHost]:
    """Hosts on the `store` bucket, each with a working folder and cache of its own."""
    yield from hosts(database_url, store.location, tmp_path)


def queue_storybook(
    engine: Engine, artifacts: Path | ArtifactStore, folder: Path, branch: str
) -> int:
    store = FolderStore(artifacts) if isinstance(artifacts, Path) else artifacts
    stored = store_storybook(store, folder)
    with transaction(engine) as conn:
        return enqueue_storybook(conn, project="web", branch=branch, storybook=stored).build_id


def results(engine: Engine, build_id: int) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(select(snapshots).where(snapshots.c.build_id == build_id))
        return {row.name: dict(row._mapping) for row in rows}


def chromium_of(temporary: Path) -> list[psutil.Process]:
    """Chromium processes still alive whose profile is in `temporary` (a host's `TMPDIR`): its
    children's browsers, and no other test's or program's."""
    found = []
    for process in psutil.process_iter(["name", "cmdline", "status"]):
        info = process.info
        if (
            (info["name"] or "").startswith("chrom")
            and any(str(temporary) in part for part in info["cmdline"] or ())
            and info["status"] != psutil.STATUS_ZOMBIE
        ):
            found.append(process)
    return found


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
def test_every_story_is_captured_and_a_second_host_gives_the_same_bytes(
    engine: Engine, artifacts: Path, start_host: StartHost, tmp_path: Path
) -> None:
    """On the embedded default, SQLite and a folder; PostgreSQL with a bucket below (a minute
    each: what differs by database is settling, which `tests/database` runs on both)."""
    captured_twice(engine, FolderStore(artifacts), start_host, tmp_path)


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
@pytest.mark.parametrize("store", ["s3"], indirect=True)
def test_hosts_that_share_only_a_bucket_capture_every_story_and_agree_byte_for_byte(
    engine: Engine, store: ArtifactStore, bucket_hosts: StartHost, tmp_path: Path
) -> None:
    """The same build twice through two hosts, each with its own working folder and cache, that
    share nothing but PostgreSQL and the bucket: the Storybook's files reach each child's
    browser through its host's cache, captures go to the bucket."""
    captured_twice(engine, store, bucket_hosts, tmp_path)
    caches = sorted(tmp_path.glob("cache-*"))
    assert len(caches) == 2
    assert all(any(path.is_file() for path in cache.rglob("*")) for cache in caches)


def captured_twice(
    engine: Engine, store: ArtifactStore, start_host: StartHost, tmp_path: Path
) -> None:
    """The fixture captured by one host, then a branch without one story by another: every
    story's result as the fixture promises, and the second build's images the first's."""
    main = queue_storybook(engine, store, FIXTURE, "main")
    host = start_host(*STORY_HOST, "--drain")
    assert host.wait(180) == 0
    # The child that did not plan started its browser and loaded the build's preview while the
    # plan ran (outside any job), not at its first capture; a child's lines say which child,
    # job, kind and build.
    warmed = [event["child_pid"] for event in host.events("warming child")]
    assert len(warmed) == 1
    assert host.events("browser launched", child_pid=warmed[0], job_id=None)
    assert host.events("preview loaded ahead of its stories", child_pid=warmed[0], job_id=None)
    timings = host.events("story timings")
    assert timings and all(
        (event["kind"], event["build_id"]) == ("capture", main) and event["job_id"]
        for event in timings
    )
    first = results(engine, main)
    assert {name: row["status"] for name, row in first.items()} == EXPECTED
    build = build_row(engine, main)
    assert (build["status"], build["failed"], build["new"]) == ("failed", 2, 28)
    skipped = {item["story_id"]: item["reason"] for item in build["plan"]["skipped"]}
    assert set(skipped) == {
        "example-optout--chromatic-disabled",
        "example-optout--snapshot-tag-removed",
    }
    hang = first[HANG]
    assert hang["error"] == "did not finish rendering in 15 s"
    assert hang["image_path"] is None and hang["image_sha256"] is None
    thrown = first["example-broken--throws-in-render"]["error"]
    assert thrown and "Traceback" not in thrown
    widths = first["example-viewports--chromatic-widths [320]"]
    assert (widths["story_id"], widths["mode"]) == ("example-viewports--chromatic-widths", "320")
    assert widths["title"] and widths["story"]
    assert first["example-diff--chromatic-diff-threshold"]["threshold"] == 0.3
    captured = [row for row in first.values() if row["status"] != "failed"]
    assert all(row["settled"] is True for row in captured)
    images = {row["image_path"] for row in captured}
    assert set(store.written(images)) == images

    # The branch deletes one story: the same build less one index entry (and less the story
    # that hangs, whose cap the first build waited out).
    branch = shutil.copytree(FIXTURE, tmp_path / "branch")
    index = json.loads((branch / "index.json").read_text())
    del index["entries"][REMOVED], index["entries"][HANG]
    (branch / "index.json").write_text(json.dumps(index))
    feature = queue_storybook(engine, store, branch, "feature")
    assert start_host(*STORY_HOST, "--drain").wait(180) == 0
    second = results(engine, feature)
    assert set(second) == set(EXPECTED) - {REMOVED, HANG}
    with engine.connect() as conn:
        view = load_build(conn, feature)
    assert view is not None and view.removed == (REMOVED,)
    for name, row in second.items():
        if EXPECTED[name] == "failed":
            assert row["status"] == "failed", name
            continue
        assert row["status"] == "unchanged", (name, row["diff_pixels"])
        if name.startswith(LIVE):  # a new number in its ignore regions on every render
            assert row["ignore_boxes"] == first[name]["ignore_boxes"] != [], name
            continue
        assert row["image_sha256"] == first[name]["image_sha256"], name
    assert build_row(engine, feature)["status"] == "failed"  # the story that throws, again


def test_a_killed_child_and_a_killed_host_leave_no_chromium_behind(
    engine: Engine, artifacts: Path, start_host: StartHost, tmp_path: Path
) -> None:
    # Short: Chromium's singleton socket lives there, and a Unix socket's path is 107 bytes.
    temporary = Path(tempfile.mkdtemp(prefix="host-tmp-"))
    queue_storybook(engine, artifacts, FIXTURE, "main")
    host = start_host(*STORY_HOST, environment={"TMPDIR": str(temporary)})
    child = wait_for(lambda: _child_rendering(engine, host), timeout=60)
    browsers = wait_for(lambda: _browser_of(child), timeout=30)
    psutil.Process(child).send_signal(signal.SIGKILL)
    wait_for(lambda: not any(_alive(p) for p in browsers), timeout=10)
    wait_for(lambda: _child_rendering(engine, host, other_than=child), timeout=60)
    host.signal(signal.SIGKILL)
    host.wait(10)
    wait_for(lambda: not chromium_of(temporary), timeout=15)
    shutil.rmtree(temporary, ignore_errors=True)


def _child_rendering(
    engine: Engine, host: HostProcess, other_than: int | None = None
) -> int | None:
    """The pid of a child of `host` running a capture job (not `other_than`)."""
    with engine.connect() as conn:
        pids = conn.execute(
            select(jobs.c.child_pid).where(jobs.c.kind == "capture", jobs.c.status == "running")
        ).scalars()
        return next((pid for pid in pids if pid and pid != other_than), None)


def _alive(process: psutil.Process) -> bool:
    """Running and not a zombie; a process that goes between the two questions is gone."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _browser_of(child: int) -> list[psutil.Process] | None:
    try:
        found = [
            p
            for p in psutil.Process(child).children(recursive=True)
            if p.name().startswith("chrom")
        ]
    except psutil.Error:
        return None
    return found or None


def test_a_storybook_whose_preview_cannot_load_fails_the_build_with_the_browser_message(
    engine: Engine, artifacts: Path, start_host: StartHost, tmp_path: Path
) -> None:
    broken = shutil.copytree(FIXTURE, tmp_path / "broken")
    (broken / "iframe.html").write_text(
        "<!doctype html><html><body><div id='storybook-root'></div>"
        "<script>throw new Error('the preview bundle is missing')</script></body></html>"
    )
    build_id = queue_storybook(engine, artifacts, broken, "main")
    assert start_host(*STORY_HOST, "--drain").wait(120) == 0
    build = build_row(engine, build_id)
    assert build["status"] == "failed"
    assert build["error"].startswith("the Storybook cannot be planned: ")
    assert "the preview bundle is missing" in build["error"]
    assert results(engine, build_id) == {}
