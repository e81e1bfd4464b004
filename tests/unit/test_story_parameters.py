"""The plan of a Storybook build from its index and its stories' parameters: opt-outs, sizes,
waits, diff settings, crop; one line per case."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from child.storybook.parameters import plan_snapshots
from child.storybook.sizes import MINIMAL_VIEWPORTS
from ipc.storybook import MAX_DELAY_MS, PlanResult
from ipc.storybook_index import IndexEntry, read_index_file

FIXTURE = Path(__file__).parents[1] / "fixtures" / "storybook"
ID = "ui-thing--default"

# Storybook 7/8's viewport table as the addon's INITIAL_VIEWPORTS spells an entry.
IPHONE6 = {"name": "iPhone 6", "styles": {"width": "375px", "height": "667px"}, "type": "mobile"}
KIOSK = {"name": "Kiosk", "styles": {"width": "1080px", "height": "1920px"}, "type": "other"}


def plan_one(
    parameters: dict[str, Any] | None = None,
    *,
    tags: tuple[str, ...] = (),
    story_globals: dict[str, Any] | None = None,
    initial_globals: dict[str, Any] | None = None,
) -> PlanResult:
    record = {"id": ID, "parameters": parameters or {}, "storyGlobals": story_globals or {}}
    entry = IndexEntry(ID, "UI/Thing", "Default", "story", tags)
    return plan_snapshots([entry], {ID: record}, initial_globals or {})


def sizes(parameters: dict[str, Any], **context: Any) -> list[tuple[str | None, int, int]] | str:
    """The story's (mode, width, height) per snapshot, or the problem its one snapshot fails
    with (never a skip: only an opt-out skips a story)."""
    result = plan_one(parameters, **context)
    assert result["skipped"] == []
    problems = [s["problem"] for s in result["snapshots"] if s["problem"] is not None]
    if problems:
        (snapshot,) = result["snapshots"]
        assert (snapshot["name"], snapshot["mode"]) == (ID, None)
        return problems[0]
    for snapshot in result["snapshots"]:
        expected = ID if snapshot["mode"] is None else f"{ID} [{snapshot['mode']}]"
        assert snapshot["name"] == expected
    return [
        (s["mode"], s["viewport"]["width"], s["viewport"]["height"]) for s in result["snapshots"]
    ]


def setting(parameters: dict[str, Any], field: str) -> Any:
    (snapshot,) = plan_one(parameters)["snapshots"]
    return snapshot[field]  # type: ignore[literal-required]


def sb9(value: str | None, rotated: bool = False) -> dict[str, Any]:
    return {"viewport": {"value": value, "isRotated": rotated}}


KNOWN = ", ".join(MINIMAL_VIEWPORTS)

# fmt: off
SIZES: list[tuple[str, dict[str, Any], dict[str, Any], Any]] = [
    # (case, parameters, story_globals / initial_globals, expected sizes or skip reason)
    ("nothing given", {}, {}, [(None, 1200, 900)]),
    ("chromatic widths", {"chromatic": {"viewports": [320, 1200]}}, {}, [("1200", 1200, 900), ("320", 320, 900)]),
    ("one width is one size", {"chromatic": {"viewports": [320]}}, {}, [(None, 320, 900)]),
    ("a width twice", {"chromatic": {"viewports": [320, 320.0]}}, {}, [(None, 320, 900)]),
    ("widths not a list: ignored", {"chromatic": {"viewports": "320"}}, {}, [(None, 1200, 900)]),
    ("bad widths ignored, css px read", {"chromatic": {"viewports": [True, "375px", 500.4, None]}}, {}, [("375", 375, 900), ("500", 500, 900)]),
    ("width 0", {"chromatic": {"viewports": [0]}}, {}, "chromatic.viewports: width 0 px is outside 1..4096 px"),
    ("width absurd", {"chromatic": {"viewports": [320, 5000]}}, {}, "chromatic.viewports: width 5000 px is outside 1..4096 px"),
    ("width negative css", {"chromatic": {"viewports": ["-1px"]}}, {}, "chromatic.viewports: width -1 px is outside 1..4096 px"),
    ("chromatic modes by width", {"chromatic": {"modes": {"mobile": {"viewport": 320}, "desktop": {"viewport": 1280}}}}, {}, [("desktop", 1280, 900), ("mobile", 320, 900)]),
    ("mode by built-in name", {"chromatic": {"modes": {"s": {"viewport": "mobile1"}, "t": {"viewport": "tablet"}}}}, {}, [("s", 320, 568), ("t", 834, 1112)]),
    ("mode by object", {"chromatic": {"modes": {"a": {"viewport": {"width": 400, "height": 300}}, "b": {"viewport": {"width": 800}}}}}, {}, [("a", 400, 300), ("b", 800, 900)]),
    ("mode by global form, rotated", {"chromatic": {"modes": {"a": {"viewport": {"value": "tablet", "isRotated": True}}, "b": {"viewport": 320}}}}, {}, [("a", 1112, 834), ("b", 320, 900)]),
    ("mode by the story's table", {"viewport": {"viewports": {"iphone6": IPHONE6}}, "chromatic": {"modes": {"a": {"viewport": "iphone6"}, "b": {"viewport": 1024}}}}, {}, [("a", 375, 667), ("b", 1024, 900)]),
    ("disabled mode left out", {"chromatic": {"modes": {"a": {"viewport": 320}, "b": {"viewport": 640, "disable": True}}}}, {}, [(None, 320, 900)]),
    ("every mode disabled: next source", {"chromatic": {"modes": {"b": {"viewport": 640, "disable": True}}, "viewports": [480]}}, {}, [(None, 480, 900)]),
    ("modes beat viewports", {"chromatic": {"modes": {"a": {"viewport": 320}, "b": {"viewport": 640}}, "viewports": [480, 960]}}, {}, [("a", 320, 900), ("b", 640, 900)]),
    ("modes without viewport: default size", {"chromatic": {"modes": {"light": {"theme": "light"}, "dark": {"theme": "dark"}}}}, {}, [("dark", 1200, 900), ("light", 1200, 900)]),
    ("modes without viewport: addon default", {"chromatic": {"modes": {"light": {}, "dark": {}}}}, {"story_globals": sb9("mobile2")}, [("dark", 414, 896), ("light", 414, 896)]),
    ("mode not an object: ignored", {"chromatic": {"modes": {"a": "mobile1", "b": {"viewport": 320}}}}, {}, [(None, 320, 900)]),
    ("mode viewport of no shape: default", {"chromatic": {"modes": {"a": {"viewport": [320]}, "b": {"viewport": 320}}}}, {}, [("a", 1200, 900), ("b", 320, 900)]),
    ("mode unknown viewport", {"chromatic": {"modes": {"a": {"viewport": "phone"}}}}, {}, f"chromatic.modes.a.viewport: no viewport named 'phone' (known: {KNOWN})"),
    ("mode absurd height", {"chromatic": {"modes": {"a": {"viewport": {"width": 300, "height": 10000}}}}}, {}, "chromatic.modes.a.viewport: height 10000 px is outside 1..4096 px"),
    ("lost pixel breakpoints", {"lostpixel": {"breakpoints": [375, 1024]}}, {}, [("1024", 1024, 900), ("375", 375, 900)]),
    ("chromatic beats lost pixel", {"chromatic": {"viewports": [320, 640]}, "lostpixel": {"breakpoints": [375, 1024]}}, {}, [("320", 320, 900), ("640", 640, 900)]),
    ("lost pixel beats storycap", {"lostpixel": {"breakpoints": [375]}, "screenshot": {"viewport": "mobile1"}}, {}, [(None, 375, 900)]),
    ("storycap device by display name", {"viewport": {"viewports": {"iphone6": IPHONE6}}, "screenshot": {"viewport": "iPhone 6"}}, {}, [(None, 375, 667)]),
    ("storycap object", {"screenshot": {"viewport": {"width": 1024, "height": 768, "isMobile": False}}}, {}, [(None, 1024, 768)]),
    ("storycap width only", {"screenshot": {"viewport": {"width": 1024}}}, {}, [(None, 1024, 900)]),
    ("storycap viewport of no shape: ignored", {"screenshot": {"viewport": 1024}}, {}, [(None, 1200, 900)]),
    ("storycap unknown device", {"screenshot": {"viewport": "iPhone X"}}, {}, f"screenshot.viewport: no viewport named 'iPhone X' (known: {KNOWN})"),
    ("storycap viewports list", {"screenshot": {"viewports": ["mobile1", "tablet", "mobile1"]}}, {}, [("mobile1", 320, 568), ("tablet", 834, 1112)]),
    ("storycap viewports map", {"screenshot": {"viewports": {"small": {"width": 320, "height": 480}, "large": "desktop"}}}, {}, [("large", 1280, 1024), ("small", 320, 480)]),
    ("storycap viewports beat viewport", {"screenshot": {"viewports": ["mobile1", "mobile2"], "viewport": "tablet"}}, {}, [("mobile1", 320, 568), ("mobile2", 414, 896)]),
    ("sb7 default viewport", {"viewport": {"viewports": {"iphone6": IPHONE6}, "defaultViewport": "iphone6"}}, {}, [(None, 375, 667)]),
    ("sb7 landscape", {"viewport": {"viewports": {"iphone6": IPHONE6}, "defaultViewport": "iphone6", "defaultOrientation": "landscape"}}, {}, [(None, 667, 375)]),
    ("sb7 built-in default", {"viewport": {"defaultViewport": "mobile2"}}, {}, [(None, 414, 896)]),
    ("sb7 responsive", {"viewport": {"defaultViewport": "responsive"}}, {}, [(None, 1200, 900)]),
    ("sb7 reset default", {"viewport": {"defaultViewport": "reset"}}, {}, [(None, 1200, 900)]),
    ("sb8 reset global: the addon's default", {"viewport": {"viewports": {"iphone6": IPHONE6}}}, {"initial_globals": {"viewport": "reset"}}, [(None, 1200, 900)]),
    ("sb8 reset global, story default", {"viewport": {"viewports": {"iphone6": IPHONE6}, "defaultViewport": "iphone6"}}, {"initial_globals": {"viewport": "reset"}}, [(None, 375, 667)]),
    ("sb8 empty global", {}, {"initial_globals": {"viewport": ""}}, [(None, 1200, 900)]),
    ("sb9 reset value", {}, {"initial_globals": sb9("reset")}, [(None, 1200, 900)]),
    ("sb9 undefined value", {}, {"initial_globals": {"viewport": {"isRotated": False}}}, [(None, 1200, 900)]),
    ("sb9 undefined value, rotated", {}, {"story_globals": {"viewport": {"isRotated": True}}, "initial_globals": sb9("mobile1")}, [(None, 320, 568)]),
    ("sb7 unknown default", {"viewport": {"viewports": {"iphone6": IPHONE6}, "defaultViewport": "ipad"}}, {}, "viewport.defaultViewport: no viewport named 'ipad' (known: iphone6)"),
    ("sb9 story globals", {}, {"story_globals": sb9("mobile1")}, [(None, 320, 568)]),
    ("sb9 initial globals rotated", {}, {"initial_globals": sb9("tablet", rotated=True)}, [(None, 1112, 834)]),
    ("sb9 story beats initial", {}, {"story_globals": sb9("mobile1"), "initial_globals": sb9("tablet")}, [(None, 320, 568)]),
    ("sb9 null value: initial", {}, {"story_globals": sb9(None), "initial_globals": sb9("tablet")}, [(None, 834, 1112)]),
    ("sb9 own options", {"viewport": {"options": {"kiosk": KIOSK}}}, {"initial_globals": sb9("kiosk")}, [(None, 1080, 1920)]),
    ("sb9 own options hide built-ins", {"viewport": {"options": {"kiosk": KIOSK}}}, {"initial_globals": sb9("mobile1")}, "globals.viewport: no viewport named 'mobile1' (known: kiosk)"),
    ("sb9 responsive", {}, {"initial_globals": sb9("responsive")}, [(None, 1200, 900)]),
    ("sb9 custom value", {}, {"story_globals": sb9("375-667")}, [(None, 375, 667)]),
    ("sb9 custom px value rotated", {}, {"story_globals": sb9("375px-667px", rotated=True)}, [(None, 667, 375)]),
    ("sb8 bare name global", {}, {"story_globals": {"viewport": "mobile2"}}, [(None, 414, 896)]),
    ("sb9 globals beat sb7 default", {"viewport": {"defaultViewport": "tablet"}}, {"story_globals": sb9("mobile1")}, [(None, 320, 568)]),
    ("option without px size", {"viewport": {"options": {"full": {"name": "Full", "styles": {"width": "100%", "height": "100%"}}}}}, {"initial_globals": sb9("full")}, "globals.viewport: viewport 'full' has no size in px (width '100%', height '100%')"),
    ("tool sizes beat addon default", {"lostpixel": {"breakpoints": [375]}}, {"story_globals": sb9("tablet")}, [(None, 375, 900)]),
    ("a later tool's bad size is never read", {"chromatic": {"viewports": [320, 640]}, "lostpixel": {"breakpoints": [0]}}, {}, [("320", 320, 900), ("640", 640, 900)]),
    ("an earlier tool's bad size skips", {"chromatic": {"viewports": [0]}, "lostpixel": {"breakpoints": [375]}}, {}, "chromatic.viewports: width 0 px is outside 1..4096 px"),
    ("viewport parameter not an object", {"viewport": "mobile1"}, {}, [(None, 1200, 900)]),
]
# fmt: on


@pytest.mark.parametrize(
    ("parameters", "context", "expected"),
    [case[1:] for case in SIZES],
    ids=[case[0] for case in SIZES],
)
def test_a_story_is_taken_at_the_sizes_it_asks_for(
    parameters: dict[str, Any], context: dict[str, Any], expected: Any
) -> None:
    assert sizes(parameters, **context) == expected


# fmt: off
SETTINGS: list[tuple[str, dict[str, Any], str, Any]] = [
    # (case, parameters, StorySnapshot field, expected value)
    ("no delay", {}, "delay_ms", 0),
    ("chromatic delay", {"chromatic": {"delay": 300}}, "delay_ms", 300),
    ("lost pixel wait", {"lostpixel": {"waitBeforeScreenshot": 200}}, "delay_ms", 200),
    ("storycap delay", {"screenshot": {"delay": 100}}, "delay_ms", 100),
    ("chromatic delay first", {"chromatic": {"delay": 300}, "lostpixel": {"waitBeforeScreenshot": 200}, "screenshot": {"delay": 100}}, "delay_ms", 300),
    ("lost pixel before storycap", {"lostpixel": {"waitBeforeScreenshot": 200}, "screenshot": {"delay": 100}}, "delay_ms", 200),
    ("delay clamped", {"chromatic": {"delay": 600_000}}, "delay_ms", MAX_DELAY_MS),
    ("delay rounded", {"chromatic": {"delay": 12.6}}, "delay_ms", 13),
    ("delay a string: ignored", {"chromatic": {"delay": "300"}}, "delay_ms", 0),
    ("delay negative: ignored", {"chromatic": {"delay": -5}}, "delay_ms", 0),
    ("bad chromatic delay: next tool", {"chromatic": {"delay": True}, "lostpixel": {"waitBeforeScreenshot": 200}}, "delay_ms", 200),
    ("delay infinite: ignored", {"chromatic": {"delay": float("inf")}}, "delay_ms", 0),
    ("no threshold", {}, "threshold", None),
    ("chromatic threshold", {"chromatic": {"diffThreshold": 0.3}}, "threshold", 0.3),
    ("lost pixel threshold", {"lostpixel": {"threshold": 0.05}}, "threshold", 0.05),
    ("chromatic threshold first", {"chromatic": {"diffThreshold": 0.3}, "lostpixel": {"threshold": 0.05}}, "threshold", 0.3),
    ("threshold zero", {"chromatic": {"diffThreshold": 0}}, "threshold", 0.0),
    ("threshold above 1: ignored", {"chromatic": {"diffThreshold": 1.5}}, "threshold", None),
    ("lost pixel pixel count: ignored", {"lostpixel": {"threshold": 5}}, "threshold", None),
    ("threshold a string: ignored", {"chromatic": {"diffThreshold": "0.2"}}, "threshold", None),
    ("no anti-aliasing setting", {}, "count_aa", None),
    ("anti-aliasing counted", {"chromatic": {"diffIncludeAntiAliasing": True}}, "count_aa", True),
    ("anti-aliasing not counted", {"chromatic": {"diffIncludeAntiAliasing": False}}, "count_aa", False),
    ("anti-aliasing a string: ignored", {"chromatic": {"diffIncludeAntiAliasing": "yes"}}, "count_aa", None),
    ("animations paused at end", {}, "pause_animation_at_end", True),
    ("animations at their start", {"chromatic": {"pauseAnimationAtEnd": False}}, "pause_animation_at_end", False),
    ("pause a string: ignored", {"chromatic": {"pauseAnimationAtEnd": "false"}}, "pause_animation_at_end", True),
    ("crop to root", {}, "crop", "root"),
    ("crop to viewport", {"chromatic": {"cropToViewport": True}}, "crop", "viewport"),
    ("storycap full page", {"screenshot": {"fullPage": True}}, "crop", "page"),
    ("chromatic crop first", {"chromatic": {"cropToViewport": True}, "screenshot": {"fullPage": True}}, "crop", "viewport"),
    ("fullscreen layout keeps root", {"layout": "fullscreen"}, "crop", "root"),
    ("crop a string: ignored", {"chromatic": {"cropToViewport": "true"}}, "crop", "root"),
    ("chromatic not an object", {"chromatic": "yes"}, "delay_ms", 0),
    ("title from the index", {}, "title", "UI/Thing"),
    ("story name from the index", {}, "story", "Default"),
]
# fmt: on


@pytest.mark.parametrize(
    ("parameters", "field", "expected"),
    [case[1:] for case in SETTINGS],
    ids=[case[0] for case in SETTINGS],
)
def test_a_snapshot_carries_its_story_s_settings(
    parameters: dict[str, Any], field: str, expected: Any
) -> None:
    assert setting(parameters, field) == expected


def test_every_snapshot_of_a_story_carries_its_settings() -> None:
    result = plan_one({"chromatic": {"viewports": [320, 640], "delay": 50, "diffThreshold": 0.2}})
    assert [(s["name"], s["delay_ms"], s["threshold"]) for s in result["snapshots"]] == [
        (f"{ID} [320]", 50, 0.2),
        (f"{ID} [640]", 50, 0.2),
    ]


# fmt: off
OPT_OUTS: list[tuple[str, dict[str, Any], tuple[str, ...], str | None]] = [
    # (case, parameters, the story's tags (another story carries "snapshot"), skip reason)
    ("chromatic opt-out", {"chromatic": {"disableSnapshot": True}}, ("snapshot",), "chromatic.disableSnapshot"),
    ("chromatic opt-out off", {"chromatic": {"disableSnapshot": False}}, ("snapshot",), None),
    ("chromatic opt-out a string: ignored", {"chromatic": {"disableSnapshot": "true"}}, ("snapshot",), None),
    ("chromatic older opt-out", {"chromatic": {"disable": True}}, ("snapshot",), "chromatic.disable"),
    ("lost pixel opt-out", {"lostpixel": {"disable": True}}, ("snapshot",), "lostpixel.disable"),
    ("storycap opt-out", {"screenshot": {"skip": True}}, ("snapshot",), "screenshot.skip"),
    ("tag removed", {}, ("dev", "test"), "no snapshot tag"),
    ("parameter named before tag", {"lostpixel": {"disable": True}}, ("dev",), "lostpixel.disable"),
    ("tag kept", {}, ("dev", "test", "snapshot"), None),
    ("!test keeps the picture", {}, ("dev", "snapshot"), None),
]
# fmt: on


@pytest.mark.parametrize(
    ("parameters", "tags", "reason"),
    [case[1:] for case in OPT_OUTS],
    ids=[case[0] for case in OPT_OUTS],
)
def test_a_story_opts_out_with_a_reason(
    parameters: dict[str, Any], tags: tuple[str, ...], reason: str | None
) -> None:
    entries = [
        IndexEntry("ui-other--default", "UI/Other", "Default", "story", ("dev", "snapshot")),
        IndexEntry(ID, "UI/Thing", "Default", "story", tags),
    ]
    result = plan_snapshots(entries, {ID: {"parameters": parameters}}, {})
    skipped = [(s["story_id"], s["title"], s["story"], s["reason"]) for s in result["skipped"]]
    names = [s["name"] for s in result["snapshots"]]
    if reason is None:
        assert (skipped, names) == ([], ["ui-other--default", ID])
    else:
        assert (skipped, names) == ([(ID, "UI/Thing", "Default", reason)], ["ui-other--default"])


def test_a_storybook_that_never_uses_the_snapshot_tag_has_every_story_taken() -> None:
    entries = [
        IndexEntry("a--one", "A", "One", "story", ("dev", "test")),
        IndexEntry("a--two", "A", "Two", "story", ("dev",)),
    ]
    result = plan_snapshots(entries, {}, {})
    assert [s["name"] for s in result["snapshots"]] == ["a--one", "a--two"]
    assert result["skipped"] == []


def test_a_v3_index_without_tags_reads_the_tags_from_the_preview() -> None:
    entries = [
        IndexEntry("a--one", "A", "One", "story", ()),
        IndexEntry("a--two", "A", "Two", "story", ()),
    ]
    stories = {"a--one": {"tags": ["story", "snapshot"]}, "a--two": {"tags": ["story"]}}
    result = plan_snapshots(entries, stories, {})
    assert [s["name"] for s in result["snapshots"]] == ["a--one"]
    assert [(s["story_id"], s["reason"]) for s in result["skipped"]] == [
        ("a--two", "no snapshot tag")
    ]


def test_docs_entries_are_dropped_and_counted() -> None:
    entries = [
        IndexEntry("a--docs", "A", "Docs", "docs", ("autodocs",)),
        IndexEntry("a--one", "A", "One", "story", ()),
        IndexEntry("intro--page", "Intro", "Page", "docs", ()),
    ]
    result = plan_snapshots(entries, {}, {})
    assert (result["docs"], [s["name"] for s in result["snapshots"]]) == (2, ["a--one"])
    assert result["error"] is None


def test_a_story_the_preview_gave_no_record_for_is_taken_with_the_defaults() -> None:
    result = plan_snapshots([IndexEntry("a--one", "A", "One", "story", ())], {"a--one": "?"}, {})  # type: ignore[dict-item]
    assert result["snapshots"] == [
        {
            "name": "a--one",
            "story_id": "a--one",
            "title": "A",
            "story": "One",
            "mode": None,
            "viewport": {"width": 1200, "height": 900},
            "delay_ms": 0,
            "pause_animation_at_end": True,
            "crop": "root",
            "threshold": None,
            "count_aa": None,
            "ignore": [],
            "media": {"reduced_motion": "reduce", "forced_colors": "none", "media": "screen"},
            "globals": {},
            "problem": None,
        }
    ]


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (
            "x" * 200,
            "mode 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx': the snapshot name would be 220 characters, at most 200",
        ),
        ("dark\nmode", "mode 'dark\\nmode': a mode name must be printable text"),
        (" ", "mode ' ': a mode name must be printable text"),
    ],
)
def test_a_mode_name_that_cannot_name_a_snapshot_fails_the_story(mode: str, reason: str) -> None:
    """Not an opt-out: the story's one snapshot fails with the reason, where users look."""
    result = plan_one({"chromatic": {"modes": {mode: {"viewport": 320}, "b": {"viewport": 640}}}})
    assert result["skipped"] == []
    assert [(s["name"], s["problem"]) for s in result["snapshots"]] == [(ID, reason)]


# fmt: off
REGIONS_AND_MEDIA: list[tuple[str, dict[str, Any], str, Any]] = [
    ("no ignore regions of its own", {}, "ignore", []),
    ("chromatic ignoreSelectors", {"chromatic": {"ignoreSelectors": [".clock", "#ad"]}}, "ignore", [".clock", "#ad"]),
    ("lost pixel mask", {"lostpixel": {"mask": [{"selector": ".live"}, {"x": 1}]}}, "ignore", [".live"]),
    ("both, deduplicated", {"chromatic": {"ignoreSelectors": [".a"]}, "lostpixel": {"mask": [{"selector": ".a"}, {"selector": ".b"}]}}, "ignore", [".a", ".b"]),
    ("malformed selectors left out", {"chromatic": {"ignoreSelectors": [".a", 3, "", " ", None, "x" * 501]}}, "ignore", [".a"]),
    ("selectors not a list: ignored", {"chromatic": {"ignoreSelectors": ".a"}}, "ignore", []),
    ("at most 50 selectors", {"chromatic": {"ignoreSelectors": [f".s{i}" for i in range(80)]}}, "ignore", [f".s{i}" for i in range(50)]),
    ("default media", {}, "media", {"reduced_motion": "reduce", "forced_colors": "none", "media": "screen"}),
    ("motion allowed", {"chromatic": {"prefersReducedMotion": "no-preference"}}, "media", {"reduced_motion": "no-preference", "forced_colors": "none", "media": "screen"}),
    ("forced colours and print", {"chromatic": {"forcedColors": "active", "media": "print"}}, "media", {"reduced_motion": "reduce", "forced_colors": "active", "media": "print"}),
    ("unknown media values ignored", {"chromatic": {"forcedColors": "on", "media": "tv", "prefersReducedMotion": True}}, "media", {"reduced_motion": "reduce", "forced_colors": "none", "media": "screen"}),
]
# fmt: on


@pytest.mark.parametrize(
    ("parameters", "field", "expected"),
    [case[1:] for case in REGIONS_AND_MEDIA],
    ids=[case[0] for case in REGIONS_AND_MEDIA],
)
def test_a_snapshot_carries_its_ignore_regions_and_media(
    parameters: dict[str, Any], field: str, expected: Any
) -> None:
    assert setting(parameters, field) == expected


def test_snapshots_are_sorted_by_name_and_skipped_stories_by_id() -> None:
    entries = [
        IndexEntry("b--two", "B", "Two", "story", ()),
        IndexEntry("z--off", "Z", "Off", "story", ()),
        IndexEntry("a--one", "A", "One", "story", ()),
        IndexEntry("c--off", "C", "Off", "story", ()),
    ]
    off = {"parameters": {"chromatic": {"disableSnapshot": True}}}
    stories = {
        "b--two": {"parameters": {"lostpixel": {"breakpoints": [800, 1000]}}},
        "z--off": off,
        "c--off": off,
    }
    result = plan_snapshots(entries, stories, {})
    assert [s["name"] for s in result["snapshots"]] == ["a--one", "b--two [1000]", "b--two [800]"]
    assert [s["story_id"] for s in result["skipped"]] == ["c--off", "z--off"]


def test_the_fixture_storybook_is_planned_from_its_real_preview_records() -> None:
    """tests/fixtures/storybook/extract.json is what the fixture build's preview returned
    (scripts/record_storybook_extract.py); its README's table says what each story asks."""
    recorded = json.loads((FIXTURE / "extract.json").read_text())
    entries = read_index_file(FIXTURE / "storybook-static")
    result = plan_snapshots(entries, recorded["stories"], recorded["initialGlobals"])
    assert result["docs"] == 0
    assert [(s["story_id"], s["reason"]) for s in result["skipped"]] == [
        ("example-optout--chromatic-disabled", "chromatic.disableSnapshot"),
        ("example-optout--snapshot-tag-removed", "no snapshot tag"),
    ]
    by_name = {s["name"]: s for s in result["snapshots"]}
    assert len(by_name) == 29 - 2 - 3 + 6
    assert {name: s["viewport"]["width"] for name, s in by_name.items() if s["mode"]} == {
        "example-viewports--chromatic-widths [1200]": 1200,
        "example-viewports--chromatic-widths [320]": 320,
        "example-viewports--lost-pixel-breakpoints [1024]": 1024,
        "example-viewports--lost-pixel-breakpoints [375]": 375,
        "example-themes--light-and-dark [dark]": 1200,
        "example-themes--light-and-dark [light]": 1200,
    }
    assert by_name["example-button--primary"]["viewport"] == {"width": 1200, "height": 900}
    assert by_name["example-delay--chromatic-delay"]["delay_ms"] == 300
    assert by_name["example-diff--chromatic-diff-threshold"]["threshold"] == 0.3
    assert by_name["example-diff--lost-pixel-threshold"]["threshold"] == 0.05
    assert not by_name["example-motion--animation-at-start"]["pause_animation_at_end"]
    assert {s["crop"] for s in result["snapshots"]} == {"root"}
    assert [s["name"] for s in result["snapshots"] if s["delay_ms"]] == [
        "example-delay--chromatic-delay"
    ]
    assert [s["name"] for s in result["snapshots"] if s["threshold"] is not None] == [
        "example-diff--chromatic-diff-threshold",
        "example-diff--lost-pixel-threshold",
    ]


def test_stories_whose_snapshots_would_share_a_name_fail_alone() -> None:
    entries = [
        IndexEntry("a", "A", "One", "story", ()),
        IndexEntry("a [x]", "A", "Odd", "story", ()),
        IndexEntry("b", "B", "Two", "story", ()),
    ]
    modes = {"chromatic": {"modes": {"x": {"viewport": 320}, "y": {"viewport": 640}}}}
    stories = {"a": {"parameters": modes}, "a [x]": {}, "b": {}}
    result = plan_snapshots(entries, stories, {})
    assert [(s["name"], s["problem"]) for s in result["snapshots"]] == [
        ("a", "snapshot name 'a [x]' is also a snapshot of a [x]"),
        ("a [x]", "snapshot name 'a [x]' is also a snapshot of a"),
        ("b", None),
    ]


def test_a_story_asking_for_too_many_sizes_fails_naming_them() -> None:
    widths = {"chromatic": {"viewports": list(range(300, 351))}}
    assert sizes(widths) == "51 sizes asked for, at most 50"


def test_stories_past_a_builds_snapshot_cap_fail_each_saying_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("child.storybook.parameters.MAX_BUILD_SNAPSHOTS", 2)
    entries = [IndexEntry(f"s--{n}", "S", str(n), "story", ()) for n in range(4)]
    result = plan_snapshots(entries, {}, {})
    assert [(s["name"], s["problem"]) for s in result["snapshots"]] == [
        ("s--0", None),
        ("s--1", None),
        ("s--2", "the build would take more than 2 snapshots"),
        ("s--3", "the build would take more than 2 snapshots"),
    ]


# fmt: off
MODE_GLOBALS: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    ("no modes", {}, {ID: {}}),
    ("modes by theme", {"chromatic": {"modes": {"light": {"theme": "light"}, "dark": {"theme": "dark", "viewport": 320}}}}, {f"{ID} [dark]": {"theme": "dark"}, f"{ID} [light]": {"theme": "light"}}),
    ("one mode keeps its globals", {"chromatic": {"modes": {"dark": {"theme": "dark", "backgrounds": {"value": "#000"}}}}}, {ID: {"theme": "dark", "backgrounds": {"value": "#000"}}}),
    ("a disabled mode's globals go with it", {"chromatic": {"modes": {"dark": {"theme": "dark", "disable": True}, "a": {"viewport": 320}}}}, {ID: {}}),
    ("widths have no globals", {"chromatic": {"viewports": [320, 640]}}, {f"{ID} [320]": {}, f"{ID} [640]": {}}),
]
# fmt: on


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [case[1:] for case in MODE_GLOBALS],
    ids=[case[0] for case in MODE_GLOBALS],
)
def test_a_chromatic_modes_globals_go_with_its_snapshot(
    parameters: dict[str, Any], expected: dict[str, Any]
) -> None:
    assert {s["name"]: s["globals"] for s in plan_one(parameters)["snapshots"]} == expected


def test_an_mdx_page_a_stories_json_lists_as_a_story_is_docs() -> None:
    """Storybook 6.5 with the v7 store writes an MDX page into stories.json with no parameters;
    the preview's record says docsOnly."""
    entries = [
        IndexEntry("intro--page", "Intro", "Page", "story", ()),
        IndexEntry("a--one", "A", "One", "story", ()),
    ]
    stories = {"intro--page": {"parameters": {"docsOnly": True}}, "a--one": {"parameters": {}}}
    result = plan_snapshots(entries, stories, {})
    assert ([s["name"] for s in result["snapshots"]], result["docs"]) == (["a--one"], 1)


def test_an_mdx_page_the_preview_has_no_story_for_is_docs() -> None:
    """Storybook 6.5's v7 store lists an MDX docs page in stories.json, and extract() leaves it
    out: docs, not a story planned with the defaults."""
    entries = [
        IndexEntry("intro--page", "Intro", "Page", "story", (), mdx=True),
        IndexEntry("a--one", "A", "One", "story", (), mdx=True),
        IndexEntry("b--lost", "B", "Lost", "story", ()),
    ]
    result = plan_snapshots(entries, {"a--one": {"parameters": {}}}, {})
    assert ([s["name"] for s in result["snapshots"]], result["docs"]) == (["a--one", "b--lost"], 1)
