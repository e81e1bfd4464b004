"""The promises of `supervisor.builds.report`: a self-contained page that opens from disk, made
for review (what changed first, its changed area enlarged), and a view made after the build's
end commits, whose failure never fails the build or its job.

What the page does in a browser (filter, keys, overlay, zoom) is tested on a real build in
`tests/browser/test_report_page.py`.
"""

from __future__ import annotations

import subprocess
import time
import tomllib
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
import structlog
from sqlalchemy import Engine, select
from structlog.testing import capture_logs

from child.capture import shard as capture
from ipc.artifacts.folder import FolderStore
from ipc.messages import Done
from supervisor.builds import view as view_module
from supervisor.builds.registry import registered_kinds
from supervisor.builds.report import publish_report, render_report
from supervisor.builds.report.crop import MAX_ZOOM, crop_of
from supervisor.builds.report.render import asset
from supervisor.builds.view import BuildView, SnapshotView, load_build
from supervisor.db.tables import builds, jobs
from supervisor.host.pool import Child
from supervisor.host.settings import HostSettings
from supervisor.host.settle import Settler
from tests.capture_helpers import run_build, run_cli, upload, write_png
from tests.chromium import require_chromium

ROOT = Path(__file__).resolve().parents[2]
BUTTON = ((8, 8, 20, 10),)
MOVED = ((12, 8, 20, 10),)
EVIL = "<script>alert(1)</script><img src=x onerror=alert(2)>"


class Links(HTMLParser):
    """Every URL the page would load or link to, and the sections by status."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.statuses: list[str] = []
        self.external_tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        self.urls += [v for k, v in attrs if k in ("src", "href") and v is not None]
        if tag == "section" and values.get("data-status"):
            self.statuses.append(str(values["data-status"]))
        if tag == "link" or (tag == "script" and "src" in values):
            self.external_tags.append(tag)


class Tags(HTMLParser):
    """Every start tag with its attributes, in document order, and the page's text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag in ("div", "p", "dt", "dd", "li", "h1", "h2", "h3", "summary", "span"):
            self.text.append(" ")

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def words(self) -> str:
        """The page's text as a reader sees it, one space between words."""
        return " ".join("".join(self.text).split())

    def having(self, tag: str, **wanted: str) -> list[dict[str, str | None]]:
        """The attributes of each `tag` whose attributes include `wanted` (class: one of its
        classes)."""
        found = []
        for name, attrs in self.tags:
            classes = (attrs.get("class") or "").split()
            if name == tag and all(
                value in classes if key == "class_" else attrs.get(key) == value
                for key, value in wanted.items()
            ):
                found.append(attrs)
        return found


def snapshot(name: str, status: str, **facts: object) -> SnapshotView:
    base: dict[str, object] = {
        "id": 1,
        "name": name,
        "status": status,
        "image_path": "images/ab/new.png",
        "image_sha256": "ab" * 32,
        "width": 800,
        "height": 600,
        "baseline_id": None,
        "baseline_image": None,
        "baseline_build_id": None,
        "metric": None,
        "threshold": None,
        "flat_threshold": None,
        "count_aa": None,
        "diff_pixels": None,
        "diff_ratio": None,
        "diff_path": None,
        "diff_box": None,
        "error": None,
    }
    return SnapshotView(**(base | facts))  # type: ignore[arg-type]


def changed(name: str = "c-changed", **facts: object) -> SnapshotView:
    """A changed snapshot compared with build 3's baseline, one pixel at (100, 50) counted."""
    compared: dict[str, object] = {
        "baseline_id": 1,
        "baseline_image": "images/cd/old.png",
        "baseline_build_id": 3,
        "diff_path": "diffs/4/ef.png",
        "diff_pixels": 120,
        "diff_ratio": 0.01,
        "diff_box": (100, 50, 1, 1),
        "metric": "oklab",
        "threshold": 0.1,
        "flat_threshold": None,
        "count_aa": False,
    }
    return snapshot(name, "changed", **(compared | facts))


def view(*snapshots: SnapshotView, error: str | None = None, **fields: object) -> BuildView:
    counts = {
        s: sum(1 for x in snapshots if x.status == s)
        for s in ("new", "unchanged", "changed", "failed")
    }
    build: dict[str, object] = {
        "id": 4,
        "project": "web",
        "branch": "feature/<b>",
        "commit": None,
        "status": "failed" if error else "changed",
        "counts": counts,
        "created_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "finished_at": datetime(2026, 1, 2, 3, 5, 5, tzinfo=UTC),
        "report_path": None,
        "error": error,
        "snapshots": snapshots,
    }
    return BuildView(**(build | fields))  # type: ignore[arg-type]


def test_no_name_title_or_message_can_inject_markup_or_script() -> None:
    page = render_report(
        view(
            snapshot(EVIL, "new"),
            snapshot('a"b&c', "failed", error=EVIL),
            changed(
                "story--evil [m]",
                story_id=EVIL,
                title=EVIL,
                story=EVIL,
                mode=EVIL,
                metric=EVIL,
                baseline_image=f"images/{EVIL}.png",
            ),
            snapshot("u", "unchanged", image_path=f'images/"{EVIL}.png'),
            error=EVIL,
            project=EVIL,
            commit=EVIL,
            skipped=({"story_id": EVIL, "reason": EVIL},),
            removed=(EVIL,),
        )
    )
    tags = Tags(page)
    assert [name for name, _ in tags.tags].count("script") == 1  # the page's own
    assert "img" not in [name for name, attrs in tags.tags if attrs.get("src") == "x"]
    handlers = [key for _, attrs in tags.tags for key in attrs if key.startswith("on")]
    assert handlers == []
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "a&quot;b&amp;c" in page
    assert "feature/&lt;b&gt;" in page
    for _, attrs in tags.tags:
        for key in ("src", "href", "data-src"):
            url = attrs.get(key)
            assert url is None or ("<" not in url and '"' not in url), url


def test_snapshots_come_changed_failed_new_then_unchanged() -> None:
    page = render_report(
        view(
            snapshot("a-new", "new"),
            snapshot("b-unchanged", "unchanged"),
            snapshot("c-failed", "failed", error="broken PNG"),
            changed("d-changed"),
            changed("a-changed"),
        )
    )
    links = Links()
    links.feed(page)
    assert links.statuses == ["changed", "changed", "failed", "new", "unchanged"]
    tags = Tags(page)
    assert [a["data-group"] for a in tags.having("div", class_="group")] == [
        "changed",
        "failed",
        "new",
        "unchanged",
    ]
    assert page.index("a-changed") < page.index("d-changed")
    assert "broken PNG" in page


def test_a_changed_snapshot_opens_with_its_changed_area_enlarged() -> None:
    """One pixel at (100, 50): 16 px around it, at 8:1, before any full image."""
    tags = Tags(render_report(view(changed())))
    (crops,) = tags.having("div", class_="crops")
    assert (crops["data-box"], crops["data-scale"]) == ("100,50,1,1", "8")
    frames = tags.having("button", class_="crop-frame")
    assert [f["data-side"] for f in frames] == ["baseline", "new", "diff"]
    assert {f["style"] for f in frames} == {"width:264px;height:264px"}
    assert all("pixelated" in str(f["class"]) for f in frames)
    images = [attrs for name, attrs in tags.tags if name == "img" and attrs.get("src")]
    assert [i["src"] for i in images[:3]] == [
        "../images/cd/old.png",
        "../images/ab/new.png",
        "../diffs/4/ef.png",
    ]
    assert {i["style"] for i in images[:3]} == {"transform:scale(8) translate(-84px,-34px)"}
    marks = tags.having("span", class_="mark")
    assert [m["style"] for m in marks] == ["left:128px;top:128px;width:8px;height:8px"] * 2


def test_a_changed_snapshot_shows_its_full_images_and_an_overlay_to_slide_or_blink() -> None:
    tags = Tags(render_report(view(changed())))
    sides = [
        attrs["src"]
        for name, attrs in tags.tags
        if name == "img" and attrs.get("src") and "style" not in attrs and "class" not in attrs
    ]
    assert sides == ["../images/cd/old.png", "../images/ab/new.png", "../diffs/4/ef.png"]
    assert [i["src"] for i in tags.having("img", class_="under")] == ["../images/cd/old.png"]
    assert [i["src"] for i in tags.having("img", class_="over")] == ["../images/ab/new.png"]
    (slider,) = tags.having("input", type="range")
    assert (slider["min"], slider["max"], slider["value"]) == ("0", "100", "50")
    assert tags.having("button", class_="blink")
    assert [b["data-mode"] for b in tags.having("button", type="button") if "data-mode" in b] == [
        "sides",
        "overlay",
    ]
    for _, attrs in tags.tags:
        if attrs.get("src") or attrs.get("data-src"):
            assert attrs.get("alt"), attrs


def test_a_snapshot_says_what_it_was_compared_with_and_against_which_build() -> None:
    page = render_report(
        view(
            changed(),
            changed(
                "example-button--primary [320]",
                story_id="example-button--primary",
                title="Example/Button",
                story="Primary",
                mode="320",
                metric="yiq",
                threshold=0.05,
                flat_threshold=0.02,
                count_aa=True,
                diff_pixels=1,
                diff_ratio=1 / 480_000,
            ),
        )
    )
    assert "120 pixels changed (1.00 %)" in page
    assert "1 pixel changed (0.0002 %)" in page
    assert 'baseline from <a href="build-3.html">build 3</a>' in page
    assert "baseline (build 3)" in page
    assert "metric oklab, threshold 0.1, flat-area pass off, anti-aliasing ignored" in page
    assert "metric yiq, threshold 0.05, flat-area threshold 0.02, anti-aliasing counted" in page
    assert "Example/Button: Primary [320]" in page
    assert "story <code>example-button--primary</code>" in page
    assert "snapshot <code>example-button--primary [320]</code>" in page


def test_unchanged_images_are_listed_but_not_loaded_until_asked() -> None:
    tags = Tags(render_report(view(snapshot("u1", "unchanged"), snapshot("u2", "unchanged"))))
    images = [attrs for name, attrs in tags.tags if name == "img" and "data-src" in attrs]
    assert [i["data-src"] for i in images] == ["../images/ab/new.png"] * 2
    assert all("src" not in i and i["loading"] == "lazy" for i in images)
    assert [a for name, a in tags.tags if name == "img" and a.get("src")] == []
    assert len(tags.having("button", class_="show")) == 2
    assert len(tags.having("button", class_="show-all")) == 1
    assert all(f.get("hidden") is None and "hidden" in f for f in tags.having("figure"))


def test_the_filter_offers_each_status_with_its_count() -> None:
    page = render_report(view(snapshot("a", "new"), snapshot("b", "new")))
    for label in ("all (2)", "changed (0)", "failed (0)", "new (2)", "unchanged (0)"):
        assert label in page
    assert 'data-show="all" aria-pressed="true"' in page


def test_the_header_says_what_the_build_is_and_how_it_ended() -> None:
    page = render_report(
        view(
            changed(),
            snapshot("n", "new"),
            error="a shard failed",
            commit="abc123",
            source="storybook",
            skipped=({"story_id": "docs-intro--page", "reason": "chromatic.disableSnapshot"},),
            removed=("old-story--gone",),
        )
    )
    text = Tags(page).words()
    for fact in (
        "failed Build 4: web @ feature/<b>",
        "commit abc123",
        "source storybook",
        "snapshots 2 (1 changed, 0 failed, 1 new, 0 unchanged)",
        "created 2026-01-02 03:04:05 UTC",
        "finished 2026-01-02 03:05:05 UTC (took 1 min 0 s)",
        "baselines from build 3",
        "a shard failed",
        "1 removed since the baselines",
        "old-story--gone",
        "1 story left out",
        "docs-intro--page: chromatic.disableSnapshot",
        "Keys: j or → next snapshot, k or ← previous",
    ):
        assert fact in text, fact


def test_the_page_carries_its_own_style_and_script() -> None:
    page = render_report(view(changed()))
    links = Links()
    links.feed(page)
    assert links.external_tags == []
    assert asset("report.css") in page
    assert asset("report.js") in page
    assert "</script" not in asset("report.js")


def test_an_installed_package_has_the_page_s_style_and_script() -> None:
    """A wheel holds a package's non-Python files only when package-data names them."""
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())
    files = settings["tool"]["setuptools"]["package-data"]["supervisor.builds.report"]
    assert set(files) >= {"report.css", "report.js"}


@pytest.mark.parametrize(
    ("box", "size", "expected"),
    [
        # one pixel: padded 16 px each side, the largest whole zoom to fit, at most MAX_ZOOM
        ((100, 50, 1, 1), (800, 600), ((84, 34, 33, 33), MAX_ZOOM, "side")),
        # in a corner: the padding stops at the image's edges
        ((0, 0, 2, 2), (800, 600), ((0, 0, 18, 18), MAX_ZOOM, "side")),
        ((790, 590, 10, 10), (800, 600), ((774, 574, 26, 26), MAX_ZOOM, "side")),
        # larger: padded by a quarter of its size on each axis, a smaller whole zoom
        ((100, 100, 80, 40), (800, 600), ((80, 84, 120, 72), 3, "side")),
        # a line of text stays a strip, a row each, twice as large or more than side by side
        ((40, 100, 700, 20), (800, 600), ((0, 84, 800, 52), 1, "rows")),
        ((40, 100, 300, 12), (800, 600), ((0, 84, 415, 44), 2, "rows")),
        # everything changed: the crop is the image, shrunk side by side
        ((0, 0, 800, 600), (800, 600), ((0, 0, 800, 600), 0.48, "side")),
        # a baseline taller than the new image: the box reaches past the new one's size
        ((0, 600, 800, 100), (800, 600), ((0, 575, 800, 125), 1, "rows")),
    ],
)
def test_the_crop_pads_the_changed_box_and_scales_it_to_be_seen(
    box: tuple[int, int, int, int],
    size: tuple[int, int],
    expected: tuple[tuple[int, int, int, int], float, str],
) -> None:
    crop = crop_of(box, size)
    assert ((crop.left, crop.top, crop.width, crop.height), crop.scale, crop.layout) == expected
    assert crop.box == box
    left, top, width, height = box
    assert crop.left <= left and crop.top <= top
    assert crop.left + crop.width >= left + width and crop.top + crop.height >= top + height


def test_the_written_report_links_only_to_files_beside_it(engine: Engine, tmp_path: Path) -> None:
    artifacts = tmp_path / "artifacts"
    for name, marks in (("a", BUTTON), ("b", BUTTON)):
        write_png(tmp_path / "v1" / f"{name}.png", marks=marks)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    write_png(tmp_path / "v2/b.png", marks=BUTTON)
    (tmp_path / "v2/c.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")  # passes the upload
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    with engine.connect() as conn:
        stored = conn.execute(
            select(builds.c.report_path).where(builds.c.id == queued.build_id)
        ).scalar_one()
    assert stored == f"reports/build-{queued.build_id}.html"
    report = artifacts / stored
    links = Links()
    links.feed(report.read_text())
    assert links.external_tags == []
    assert links.urls
    for url in links.urls:
        assert not url.startswith(("http:", "https:", "/", "file:", "data:"))
        target = (report.parent / url).resolve()
        assert target.is_file(), url
        assert target.is_relative_to(artifacts.resolve()), url
    assert f"build-{queued.build_id - 1}.html" in links.urls  # the baseline build's report
    assert links.statuses == ["changed", "failed", "unchanged"]


def test_the_written_report_is_the_page_of_the_whole_build_read_at_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The host writes the page as the snapshots stream from the database, a few rows at a
    time; it is the page `render_report` makes of the build read whole."""
    monkeypatch.setattr(view_module, "STREAM_ROWS", 2)
    artifacts = tmp_path / "artifacts"
    for name in "abcdefg":
        write_png(tmp_path / "v1" / f"{name}.png", marks=BUTTON)
    for name in "abcdefgh":
        write_png(tmp_path / "v2" / f"{name}.png", marks=MOVED if name in "bf" else BUTTON)
    (tmp_path / "v2/c.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature", shards=3)
    with engine.connect() as conn:
        whole = load_build(conn, queued.build_id)
    assert whole is not None and whole.report_path is not None
    assert (artifacts / whole.report_path).read_text() == render_report(whole)
    assert [whole.counts[s] for s in ("changed", "failed", "new", "unchanged")] == [2, 1, 1, 4]


def test_no_report_is_written_for_an_unknown_or_unfinished_build(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    assert publish_report(engine, 99, FolderStore(artifacts)) is None
    assert publish_report(engine, queued.build_id, FolderStore(artifacts)) is None
    assert not (artifacts / "reports").exists()


def test_a_report_that_cannot_be_written_lets_the_build_end_and_build_id_writes_it_later(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    child: Child,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reports folder is a file (which stops root too, unlike a mode): the settler records
    the job and the build, logs that the report cannot be written, and `build ID` writes it
    once the obstacle is gone."""
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    (artifacts / "reports").write_text("in the way")
    settings = HostSettings(database_url=database_url, artifacts=str(artifacts), host_id="h")
    settler = Settler(
        engine,
        settings,
        FolderStore(artifacts),
        registered_kinds(),
        structlog.get_logger().bind(),
        time.monotonic,
    )
    (running,) = settler.complete_and_claim([child])
    settler.ended(running, Done(running.job.id, capture.run(running.payload, lambda _: None)))
    with capture_logs() as logged:
        settler.complete_and_claim([])
    with engine.connect() as conn:
        job_status = conn.execute(select(jobs.c.status)).scalar_one()
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert (job_status, build.status, build.report_path) == ("completed", "passed", None)
    failures = [event for event in logged if event["event"] == "cannot write the report"]
    assert [(e["build_id"], e["log_level"]) for e in failures] == [(queued.build_id, "error")]
    assert [e["outcome"] for e in logged if e["event"] == "job finished"] == ["completed"]

    (artifacts / "reports").unlink()
    capsys.readouterr()
    command = ["build", str(queued.build_id), f"--database-url={database_url}"]
    assert run_cli([*command, f"--artifacts={artifacts}"]) == 0
    report = artifacts / f"reports/build-{queued.build_id}.html"
    assert f"report    {report}" in capsys.readouterr().out
    assert "Build" in report.read_text()
    with engine.connect() as conn:
        stored = conn.execute(
            select(builds.c.report_path).where(builds.c.id == queued.build_id)
        ).scalar_one()
    assert stored == f"reports/build-{queued.build_id}.html"


def test_a_browser_renders_the_report_from_disk(engine: Engine, tmp_path: Path) -> None:
    browser = require_chromium()
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    with engine.connect() as conn:
        view_ = load_build(conn, queued.build_id)
    assert view_ is not None and view_.report_path is not None
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            (artifacts / view_.report_path).resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert shot.stat().st_size > 5_000
