"""The plan job in the browser: the fixture's stories become snapshots with their parameters, and
a build whose preview cannot load is planned as an error in the browser's words."""

from __future__ import annotations

import hashlib
import itertools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from child.artifacts.access import for_job
from child.browser.launch import ChildBrowser
from child.browser.preview import PreviewError, read_stories
from child.browser.site import ServeFailed, Site
from child.browser.watchdog import BEAT_SECONDS
from child.storybook import plan
from child.storybook.stored import load
from ipc.storybook import PlanResult
from tests.browser.conftest import Stored


def run_plan(stored: Stored) -> tuple[PlanResult, list[dict[str, Any]]]:
    reports: list[dict[str, Any]] = []
    payload = {"artifacts": str(stored.artifacts), "build_id": 7, "storybook": stored.ref}
    return plan.run(payload, reports.append), reports


@pytest.fixture(scope="module")
def planned(browser: ChildBrowser, stored: Stored) -> PlanResult:
    result, reports = run_plan(stored)
    assert reports, "the plan reports progress"
    return result


def test_the_fixture_plans_without_error_and_without_docs(planned: PlanResult) -> None:
    assert planned["error"] is None
    assert planned["docs"] == 0
    names = [shot["name"] for shot in planned["snapshots"]]
    assert len(names) == len(set(names))
    assert "example-button--primary" in names


def test_opted_out_stories_are_skipped_with_their_reason(planned: PlanResult) -> None:
    skipped = {story["story_id"]: story["reason"] for story in planned["skipped"]}
    assert set(skipped) == {
        "example-optout--chromatic-disabled",
        "example-optout--snapshot-tag-removed",
    }
    planned_ids = {shot["story_id"] for shot in planned["snapshots"]}
    assert not planned_ids & set(skipped)


@pytest.mark.parametrize(
    ("story_id", "widths"),
    [
        ("example-viewports--chromatic-widths", [320, 1200]),
        ("example-viewports--lost-pixel-breakpoints", [375, 1024]),
    ],
)
def test_a_story_with_two_sizes_gives_two_named_snapshots(
    planned: PlanResult, story_id: str, widths: list[int]
) -> None:
    shots = [shot for shot in planned["snapshots"] if shot["story_id"] == story_id]
    assert sorted(shot["viewport"]["width"] for shot in shots) == widths
    assert sorted(shot["name"] for shot in shots) == sorted(f"{story_id} [{w}]" for w in widths)


def test_delay_threshold_and_animation_parameters_are_carried(planned: PlanResult) -> None:
    by_name = {shot["name"]: shot for shot in planned["snapshots"]}
    assert by_name["example-delay--chromatic-delay"]["delay_ms"] == 300
    assert by_name["example-diff--chromatic-diff-threshold"]["threshold"] == pytest.approx(0.3)
    assert by_name["example-diff--lost-pixel-threshold"]["threshold"] == pytest.approx(0.05)
    assert by_name["example-motion--animation-at-start"]["pause_animation_at_end"] is False
    assert by_name["example-motion--spinner"]["pause_animation_at_end"] is True
    assert by_name["example-button--primary"]["threshold"] is None


def _break_preview(folder: Path) -> None:
    (folder / "iframe.html").write_text(
        "<!doctype html><script>throw new Error('the preview exploded on load')</script>"
    )


def test_a_preview_that_throws_is_an_error_in_the_browsers_words(
    browser: ChildBrowser, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    result, _ = run_plan(store_variant(_break_preview))
    assert result["snapshots"] == []
    assert result["error"] is not None
    assert "the preview exploded on load" in result["error"]


def test_a_preview_the_store_cannot_give_is_the_hosts_trouble_not_the_builds(
    browser: ChildBrowser, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    """The manifest lists the preview's page but the store does not give it (a bucket down):
    the plan raises, for the job to be tried again, instead of failing the build."""
    variant = store_variant(lambda folder: None)
    stored = load(for_job(str(variant.artifacts)), variant.ref).path_of("iframe.html")
    assert stored is not None
    stored.unlink()
    with pytest.raises(ServeFailed, match=r"/iframe\.html: HTTP 500"):
        run_plan(variant)


def test_a_build_without_iframe_html_is_an_error(
    browser: ChildBrowser, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    result, _ = run_plan(store_variant(lambda folder: (folder / "iframe.html").unlink()))
    assert result["error"] is not None and "iframe.html" in result["error"]


def test_a_manifest_of_another_digest_or_version_is_refused(stored: Stored) -> None:
    wrong_digest = Stored(stored.artifacts, {**stored.ref, "sha256": "0" * 64})
    result, _ = run_plan(wrong_digest)
    assert result["error"] is not None and "SHA-256" in result["error"]

    manifest = json.loads((stored.artifacts / stored.ref["manifest"]).read_text())
    manifest["version"] = 99
    data = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(data).hexdigest()
    other = stored.artifacts / f"storybooks/{digest}/manifest.json"
    other.parent.mkdir(parents=True, exist_ok=True)
    other.write_bytes(data)
    result, _ = run_plan(
        Stored(
            stored.artifacts, {"manifest": f"storybooks/{digest}/manifest.json", "sha256": digest}
        )
    )
    assert result["error"] is not None and "version 99" in result["error"]


def _hang_preview(folder: Path) -> None:
    (folder / "iframe.html").write_text(
        "<!doctype html><script>while (performance.now() < Infinity) {}</script>"
    )


def test_a_preview_that_hangs_its_page_ends_at_the_deadline(
    browser: ChildBrowser, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    hanging = store_variant(_hang_preview)
    beats: list[float] = []
    with Site(load(for_job(str(hanging.artifacts)), hanging.ref)) as site:
        started = time.monotonic()
        with pytest.raises(PreviewError) as raised:
            read_stories(browser, site, timeout=4, beat=lambda: beats.append(time.monotonic()))
    assert str(raised.value) == "the preview did not describe its stories in 4 s"
    assert time.monotonic() - started < 8
    gaps = [later - earlier for earlier, later in itertools.pairwise([started, *beats])]
    assert len(beats) >= 3 and max(gaps) < BEAT_SECONDS + 1.5, gaps


def test_an_index_that_is_not_storybooks_is_an_error_naming_the_file(
    stored: Stored, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    result, _ = run_plan(store_variant(lambda folder: (folder / "index.json").write_text("{}")))
    assert result["error"] is not None
    assert result["error"].startswith("index.json: the index has no version")
    assert str(stored.artifacts.parent) not in result["error"]


def _preview_answering(extract: str, user_globals: str = "undefined") -> Callable[[Path], None]:
    """A build whose preview is ready at once and whose extract() answers `extract` (script)."""

    def change(folder: Path) -> None:
        (folder / "iframe.html").write_text(
            "<!doctype html><script>window.__STORYBOOK_PREVIEW__ = {"
            f" ready: async () => {{}}, extract: async () => ({extract}),"
            f" storyStoreValue: {{ userGlobals: {user_globals} }} }};</script>"
        )

    return change


DEEP = "(() => { let v = {}; for (let i = 0; i < 5000; i++) v = { v }; return { s: { parameters: v } }; })()"
#: Objects shared so that writing each out in full would multiply past any memory: 2^40 leaves.
MULTIPLYING = "(() => { let v = {}; for (let i = 0; i < 40; i++) v = { a: v, b: v }; return { s: { parameters: v } }; })()"


@pytest.mark.parametrize(
    ("extract", "user_globals", "message"),
    [
        (
            '"stories"',
            "undefined",
            "the preview's extract() answered a string, not a map of stories",
        ),
        ("[1, 2]", "undefined", "the preview's extract() answered an array, not a map of stories"),
        (
            "{}",
            "{ initialGlobals: [1], globals: {} }",
            "the preview's initial globals are an array, not a map",
        ),
        (DEEP, "undefined", "the preview's extract() answered values nested too deep to read"),
        (MULTIPLYING, "undefined", "the preview's stories hold more than 2000000 objects"),
    ],
    ids=["a string", "an array", "globals as a list", "nested 5000 deep", "shared past any size"],
)
def test_a_preview_that_answers_another_shape_fails_the_plan_in_one_line(
    browser: ChildBrowser,
    store_variant: Callable[[Callable[[Path], None]], Stored],
    extract: str,
    user_globals: str,
    message: str,
) -> None:
    result, _ = run_plan(store_variant(_preview_answering(extract, user_globals)))
    assert result["error"] == f"the Storybook preview did not load: {message}"


#: Two stories whose parameters share one table of viewports (as Storybook's parameter merge
#: leaves a preview's table), and a value that contains itself.
SHARED = """(() => {
  const viewports = { small: { name: 'Small', styles: { width: '375px', height: '812px' } } };
  const loop = { name: 'loop' };
  loop.self = loop;
  const story = (id) => ({ id, title: 'T', name: id, parameters: { viewport: { viewports }, loop } });
  return { 'a--one': story('a--one'), 'a--two': story('a--two') };
})()"""


def test_an_object_two_stories_share_reaches_both_whole_and_a_loop_is_cut(
    browser: ChildBrowser, store_variant: Callable[[Callable[[Path], None]], Stored]
) -> None:
    shared = store_variant(_preview_answering(SHARED))
    with Site(load(for_job(str(shared.artifacts)), shared.ref)) as site:
        read = read_stories(browser, site)
    small = {"name": "Small", "styles": {"width": "375px", "height": "812px"}}
    for story in ("a--one", "a--two"):
        parameters = read.stories[story]["parameters"]
        assert parameters["viewport"] == {"viewports": {"small": small}}
        assert parameters["loop"] == {"name": "loop"}
