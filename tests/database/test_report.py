"""The promises of a build's report (`child.report`, published by `supervisor.builds.publish`):
a self-contained folder whose page opens from disk, made for review (what changed first, its
changed area enlarged), and a view made by a job of its own after the build's end commits,
whose failure never fails the build or its job.

What the page does in a browser (filter, keys, overlay, zoom) is tested on a real build in
`tests/browser/test_report_page.py`.
"""

from __future__ import annotations

import os
import stat
import subprocess
import tomllib
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from child.capture import shard as capture
from child.report import publish as publish_child
from child.report.crop import MAX_ZOOM, crop_of
from child.report.render import asset, render_report
from ipc.artifacts.folder import FolderStore
from ipc.build_view import BuildView, SnapshotView
from ipc.messages import Done, Failed
from supervisor.builds import publish
from supervisor.builds import view as view_module
from supervisor.builds.view import load_build
from supervisor.db import queue
from supervisor.db.tables import builds, jobs
from supervisor.host.pool import Child
from tests.capture_helpers import run_build, run_cli, run_jobs, upload, write_png
from tests.chromium import require_chromium
from tests.settling import host_settler

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
        "report_url": None,
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
        "images/cd/old.png",
        "images/ab/new.png",
        "diffs/4/ef.png",
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
    assert sides == ["images/cd/old.png", "images/ab/new.png", "diffs/4/ef.png"]
    assert [i["src"] for i in tags.having("img", class_="under")] == ["images/cd/old.png"]
    assert [i["src"] for i in tags.having("img", class_="over")] == ["images/ab/new.png"]
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
    assert 'baseline from <a href="../3/index.html">build 3</a>' in page
    assert "baseline (build 3)" in page
    assert "metric oklab, threshold 0.1, flat-area pass off, anti-aliasing ignored" in page
    assert "metric yiq, threshold 0.05, flat-area threshold 0.02, anti-aliasing counted" in page
    assert "Example/Button: Primary [320]" in page
    assert "story <code>example-button--primary</code>" in page
    assert "snapshot <code>example-button--primary [320]</code>" in page


def test_unchanged_images_are_listed_but_not_loaded_until_asked() -> None:
    tags = Tags(render_report(view(snapshot("u1", "unchanged"), snapshot("u2", "unchanged"))))
    images = [attrs for name, attrs in tags.tags if name == "img" and "data-src" in attrs]
    assert [i["data-src"] for i in images] == ["images/ab/new.png"] * 2
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


def test_the_header_shows_the_queue_wait_apart_from_how_long_the_work_took() -> None:
    started = datetime(2026, 1, 2, 3, 4, 35, tzinfo=UTC)
    text = Tags(render_report(view(changed(), started_at=started))).words()
    assert "started 2026-01-02 03:04:35 UTC (waited 30.0 s in the queue)" in text
    assert "finished 2026-01-02 03:05:05 UTC (took 30.0 s)" in text
    never = Tags(render_report(view(status="cancelled", started_at=None))).words()
    assert "finished 2026-01-02 03:05:05 UTC baselines" in never
    assert "started" not in never and "took" not in never


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
    files = settings["tool"]["setuptools"]["package-data"]["child.report"]
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


def report_url(engine: Engine, build_id: int) -> str | None:
    with engine.connect() as conn:
        url: str | None = conn.execute(
            select(builds.c.report_url).where(builds.c.id == build_id)
        ).scalar_one()
    return url


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_the_published_report_is_a_folder_that_stands_on_its_own(
    engine: Engine, tmp_path: Path
) -> None:
    """Every picture the page shows is copied into its folder and linked there; the one link
    out of it is to the baseline build's report beside it, in the project's reports."""
    artifacts = tmp_path / "artifacts"
    for name, marks in (("a", BUTTON), ("b", BUTTON)):
        write_png(tmp_path / "v1" / f"{name}.png", marks=marks)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    write_png(tmp_path / "v2/b.png", marks=BUTTON)
    (tmp_path / "v2/c.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")  # passes the upload
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    url = report_url(engine, queued.build_id)
    report = artifacts / f"reports/web/{queued.build_id}/index.html"
    assert url == str(report)
    links = Links()
    links.feed(report.read_text())
    assert links.external_tags == []
    assert links.urls
    baseline_report = f"../{queued.build_id - 1}/index.html"
    for url in links.urls:
        assert not url.startswith(("http:", "https:", "/", "file:", "data:"))
        target = (report.parent / url).resolve()
        assert target.is_file(), url
        inside = report.parent if url != baseline_report else report.parent.parent
        assert target.is_relative_to(inside.resolve()), url
    assert baseline_report in links.urls
    assert links.statuses == ["changed", "failed", "unchanged"]
    # Readable by whatever serves the folder, as the images are (a new file's mode: 0666 less
    # the umask), not only by the host's user.
    image = next(report.parent / url for url in links.urls if url.endswith(".png"))
    modes = {stat.S_IMODE(path.stat().st_mode) for path in (report, image)}
    assert modes == {0o666 & ~current_umask()}, modes
    # The branch's newest report is pointed at, and the folder can be moved whole.
    pointer = (artifacts / "reports/web/latest/feature.html").read_text()
    assert f'url=../{queued.build_id}/index.html"' in pointer
    moved = tmp_path / "elsewhere"
    report.parent.rename(moved)
    assert all((moved / url).resolve().is_file() for url in links.urls if url != baseline_report)


def test_the_latest_page_of_a_branch_points_at_its_newest_build_whatever_the_order(
    engine: Engine, tmp_path: Path
) -> None:
    """Two builds of a branch may publish in either order; a branch with `/` keeps it as
    folders, and the pointer climbs out of them."""
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    first = upload(engine, artifacts, tmp_path / "v1", branch="team/login")
    second = upload(engine, artifacts, tmp_path / "v1", branch="team/login")
    run_jobs_in_order(engine, artifacts, [second.build_id, first.build_id])
    pointer = (artifacts / "reports/web/latest/team/login.html").read_text()
    assert f'content="{second.build_id}"' in pointer
    target = artifacts / "reports/web/latest/team" / f"../../{second.build_id}/index.html"
    assert f"url=../../{second.build_id}/index.html" in pointer and target.resolve().is_file()


def run_jobs_in_order(engine: Engine, artifacts: Path, publish_order: list[int]) -> None:
    """Run every capture, then the builds' publish jobs in `publish_order`."""
    run_jobs(engine, artifacts, kinds=("capture",))
    with engine.connect() as conn:
        publishing = dict(
            conn.execute(select(jobs.c.build_id, jobs.c.id).where(jobs.c.kind == "publish")).all()
        )
    for build_id in publish_order:
        with engine.begin() as conn:
            conn.execute(
                jobs.update()
                .where(jobs.c.kind == "publish", jobs.c.id != publishing[build_id])
                .values(run_at=datetime(2100, 1, 1, tzinfo=UTC))
            )
            conn.execute(
                jobs.update()
                .where(jobs.c.id == publishing[build_id])
                .values(run_at=datetime(2000, 1, 1, tzinfo=UTC))
            )
        run_jobs(engine, artifacts)


def test_the_published_page_is_the_page_of_the_whole_build_read_at_once(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parent reads the snapshots a few rows at a time; the child's page is the page
    `render_report` makes of the build read whole."""
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
    assert whole is not None and whole.report_url is not None
    assert Path(whole.report_url).read_text() == render_report(whole)
    assert [whole.counts[s] for s in ("changed", "failed", "new", "unchanged")] == [2, 1, 1, 4]


def test_no_report_is_prepared_for_an_unknown_or_unfinished_build(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    for build_id, why in ((99, "no build with id 99"), (queued.build_id, "has not ended")):
        with engine.begin() as conn:
            job_id = queue.enqueue(conn, "publish", {"build_id": build_id})
            job = next(j for j in queue.claim(conn, "h", 10, 60) if j.id == job_id)
            with pytest.raises(LookupError, match=why):
                publish.prepare(conn, job, FolderStore(artifacts))
    assert not (artifacts / "reports").exists()


def test_a_build_too_large_to_list_whole_lists_what_needs_a_look_and_counts_the_rest(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The listing is bounded (`ipc.publish.LISTING_BYTES`, here made small): the changed
    snapshot is listed, the unchanged ones at the end of the order are counted."""
    monkeypatch.setattr(publish, "LISTING_BYTES", 1500)
    artifacts = tmp_path / "artifacts"
    for name in "abcdefgh":
        write_png(tmp_path / "v1" / f"{name}.png", marks=BUTTON)
        write_png(tmp_path / "v2" / f"{name}.png", marks=MOVED if name == "h" else BUTTON)
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    tags = Tags(Path(report_url(engine, queued.build_id) or "").read_text())
    listed = [s["data-status"] for s in tags.having("section", class_="snapshot")]
    assert listed[0] == "changed" and set(listed[1:]) == {"unchanged"}
    assert 1 < len(listed) < 8
    assert f"{8 - len(listed)} more snapshots not listed" in tags.words()


def test_a_picture_no_longer_stored_is_left_out_not_the_report(
    engine: Engine, tmp_path: Path
) -> None:
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    run_build(engine, artifacts, tmp_path / "v1")
    queued = upload(engine, artifacts, tmp_path / "v2", branch="feature")
    run_jobs(engine, artifacts, kinds=("capture",))
    with engine.connect() as conn:
        view_ = load_build(conn, queued.build_id)
    assert view_ is not None
    gone = next(s.baseline_image for s in view_.snapshots if s.baseline_image)
    assert gone is not None
    (artifacts / gone).unlink()
    with engine.begin() as conn:
        (job,) = [j for j in queue.claim(conn, "h", 10, 60) if j.kind == "publish"]
        payload = publish.prepare(conn, job, FolderStore(artifacts))
    result = publish_child.run(payload, lambda _: None)
    assert result["missing"] == [gone]
    assert Path(result["url"]).is_file()
    assert result["copied"] == 2  # the new image and the diff


def test_a_report_that_cannot_be_published_lets_the_build_end_and_build_id_queues_it_again(
    engine: Engine,
    database_url: str,
    tmp_path: Path,
    child: Child,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reports folder is a file (which stops root too, unlike a mode): the capture job and
    the build end as they would have, the publish job fails, and `build ID` queues it again
    once the obstacle is gone."""
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    queued = upload(engine, artifacts, tmp_path / "v1")
    (artifacts / "reports").write_text("in the way")
    settler = host_settler(engine, database_url, artifacts)
    (running,) = settler.complete_and_claim([child])
    settler.ended(running, Done(running.job.id, capture.run(running.payload, lambda _: None)))
    settler.complete_and_claim([])  # records the capture: the build ends, its publish is queued
    with engine.begin() as conn:  # one try, so that its failure is final at once
        conn.execute(jobs.update().where(jobs.c.kind == "publish").values(max_attempts=1))
    (running,) = settler.complete_and_claim([child])
    assert running.job.kind == "publish"
    with pytest.raises(OSError) as raised:
        publish_child.run(running.payload, lambda _: None)
    settler.ended(running, Failed(running.job.id, str(raised.value)))
    with engine.connect() as conn:
        ended = dict(conn.execute(select(jobs.c.kind, jobs.c.status)).all())
        build = conn.execute(select(builds).where(builds.c.id == queued.build_id)).one()
    assert ended == {"capture": "completed", "publish": "failed"}
    assert (build.status, build.report_url) == ("passed", None)

    (artifacts / "reports").unlink()
    capsys.readouterr()
    command = ["build", str(queued.build_id), f"--database-url={database_url}"]
    assert run_cli([*command, f"--artifacts={artifacts}"]) == 0
    assert "report    being published (job" in capsys.readouterr().out
    run_jobs(engine, artifacts)
    assert run_cli([*command, f"--artifacts={artifacts}"]) == 0
    report = artifacts / f"reports/web/{queued.build_id}/index.html"
    shown = capsys.readouterr().out.split("\nreport", 1)[1].split()[0]  # wrapped or not
    assert Path(shown).resolve() == report.resolve()
    assert "Build" in report.read_text()
    assert report_url(engine, queued.build_id) == str(report)


def test_a_browser_renders_the_report_from_disk(engine: Engine, tmp_path: Path) -> None:
    browser = require_chromium()
    artifacts = tmp_path / "artifacts"
    write_png(tmp_path / "v1/a.png", marks=BUTTON)
    write_png(tmp_path / "v2/a.png", marks=MOVED)
    run_build(engine, artifacts, tmp_path / "v1")
    queued = run_build(engine, artifacts, tmp_path / "v2", branch="feature")
    with engine.connect() as conn:
        view_ = load_build(conn, queued.build_id)
    assert view_ is not None and view_.report_url is not None
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            Path(view_.report_url).resolve().as_uri(),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert shot.stat().st_size > 5_000
