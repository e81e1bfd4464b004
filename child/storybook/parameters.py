"""The plan of a Storybook build: which snapshots its stories ask for, read from the parameters
of the tools teams move from (Chromatic, Lost Pixel, storycap) and Storybook's own.

Pure: the child's browser side hands it the index and, per story, what the preview's `extract()`
returned (`parameters`, `tags`, `globals` / `storyGlobals`, ...), and it returns the
`PlanResult`. Docs entries are dropped and counted, MDX pages the index lists as stories among
them (`parameters.docsOnly`). Every story then either yields snapshots
(its sizes: `child.storybook.sizes`) or is skipped with a reason; nothing is left out silently.

**Opt-outs**, each a `SkippedStory` whose reason names what said so:
`chromatic.disableSnapshot` (and its older `chromatic.disable`), `lostpixel.disable`, storycap's
`screenshot.skip`, and "no snapshot tag". The tag rule: a story is skipped for lacking the
`snapshot` tag only when some story of the index carries it, i.e. when the project uses the tag
(the usual way is `tags: ['snapshot']` in preview.js, so `tags: ['!snapshot']` removes it from
one story; Storybook resolves `!` at index time, so the tag is simply absent). A Storybook whose
stories carry no `snapshot` tag at all has not opted into the tag, and all its stories are
captured, as Chromatic captures every story unless a parameter says otherwise. The `test` tag
(implicit on every story since Storybook 8.1) does not decide: `!test` takes a story out of the
interaction tests (the test-runner's and Vitest addon's default filter), which says nothing
about whether its picture matters.

**Per snapshot settings**, the first tool that gives a usable value winning, Chromatic first:

* wait: `chromatic.delay`, `lostpixel.waitBeforeScreenshot`, storycap's `screenshot.delay`
  (ms, 0 or more), at most `MAX_DELAY_MS`;
* diff threshold: `chromatic.diffThreshold`, `lostpixel.threshold` (0..1; Lost Pixel's pixel
  counts, above 1, are not a threshold this host applies and are ignored); anti-aliasing:
  `chromatic.diffIncludeAntiAliasing` -> `count_aa`; None for both leaves the project's;
* `chromatic.pauseAnimationAtEnd`, True unless it is False;
* crop: "viewport" for `chromatic.cropToViewport: true`, "page" for storycap's
  `screenshot.fullPage: true`, else "root" (the box of the story's root element, `#storybook-root`,
  as Chromatic crops). `layout: "fullscreen"` keeps "root": Chromatic crops such stories to their
  root too, and a full-width page's root spans the viewport's width anyway.

* ignore regions: `chromatic.ignoreSelectors` (a list of CSS selectors) and Lost Pixel's
  `mask` (a list of `{selector}`), besides the `.chromatic-ignore` class and the
  `data-chromatic="ignore"` attribute, which every story has;
* globals: a Chromatic mode's globals besides its viewport (`{"theme": "dark"}`, `backgrounds`,
  `locale`), under which the story is rendered for that snapshot: how teams snapshot themes;
* media: `chromatic.prefersReducedMotion` ("reduce", the default here, or "no-preference"),
  `chromatic.forcedColors` ("none" or "active"), `chromatic.media` ("screen" or "print").

**Malformed values** (a string where a number belongs, a threshold of 3) never raise and never
skip a story: that value is ignored and the setting keeps its default. A size that cannot be
honoured (an unknown viewport name, a side out of range, a mode whose name cannot name a
snapshot) is no opt-out: the story gets one snapshot at the default size whose `problem` says
why (`sizes.SizeProblem`), and its capture is `failed` with that reason, where the user looks.
A story in the index without a record from `extract()` is planned with every default: its
capture then fails or succeeds on its own, visibly.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from child.storybook.sizes import SizeProblem, story_sizes
from ipc.storybook import (
    DEFAULT_MEDIA,
    FORCED_COLORS,
    MAX_DELAY_MS,
    MAX_IGNORE_SELECTORS,
    MAX_MODE_GLOBALS,
    MAX_PROBLEM_LENGTH,
    MAX_SELECTOR_LENGTH,
    MEDIA_TYPES,
    REDUCED_MOTIONS,
    Crop,
    Media,
    PlanResult,
    SkippedStory,
    StorySnapshot,
    default_viewport,
)
from ipc.storybook_index import IndexEntry

#: The longest snapshot name: the story id (at most 180 characters) plus " [mode]".
MAX_SNAPSHOT_NAME = 200
#: The most sizes (modes, viewports, breakpoints) one story may ask for.
MAX_SIZES_PER_STORY = 50
#: The most snapshots one build may take: past it, each further story fails saying so.
MAX_BUILD_SNAPSHOTS = 20_000
#: The tag a project may use to choose the stories it snapshots.
SNAPSHOT_TAG = "snapshot"


def plan_snapshots(
    entries: Sequence[IndexEntry],
    stories: Mapping[str, Mapping[str, Any]],
    initial_globals: Mapping[str, Any],
) -> PlanResult:
    """The snapshots and skipped stories of a build, each list sorted (by name, by story id).

    `entries` is the build's index (`ipc.storybook_index`), `stories[story_id]` the preview's
    record of that story, `initial_globals` the preview's initial globals.
    """
    story_entries = [entry for entry in entries if not _is_docs(entry, stories)]
    tags_in_use = any(SNAPSHOT_TAG in _tags(entry, stories) for entry in story_entries)
    snapshots: list[StorySnapshot] = []
    skipped: list[SkippedStory] = []
    for entry in story_entries:
        record = stories.get(entry.id)
        record = record if isinstance(record, Mapping) else {}
        reason = _opt_out(entry, record, stories, tags_in_use)
        if reason is not None:
            skipped.append(
                SkippedStory(story_id=entry.id, title=entry.title, story=entry.name, reason=reason)
            )
            continue
        try:
            found = _snapshots(entry, record, initial_globals)
            if len(snapshots) + len(found) > MAX_BUILD_SNAPSHOTS:
                raise SizeProblem(f"the build would take more than {MAX_BUILD_SNAPSHOTS} snapshots")
            snapshots.extend(found)
        except SizeProblem as problem:
            snapshots.append(_unplannable(entry, str(problem)))
    snapshots = _distinct(snapshots, {entry.id: entry for entry in story_entries})
    return PlanResult(
        snapshots=sorted(snapshots, key=lambda snapshot: snapshot["name"]),
        skipped=sorted(skipped, key=lambda story: story["story_id"]),
        docs=len(entries) - len(story_entries),
        error=None,
    )


def _is_docs(entry: IndexEntry, stories: Mapping[str, Mapping[str, Any]]) -> bool:
    """A docs entry of the index, or an MDX docs page that a `stories.json` lists as a story
    without its parameters (Storybook 6.5 with the v7 store): the preview's record says
    `docsOnly`, or the preview has no story of that id from an MDX file."""
    if entry.type != "story":
        return True
    record = stories.get(entry.id)
    if not isinstance(record, Mapping):
        return entry.mdx
    parameters = record.get("parameters")
    return isinstance(parameters, Mapping) and parameters.get("docsOnly") is True


def _opt_out(
    entry: IndexEntry,
    record: Mapping[str, Any],
    stories: Mapping[str, Mapping[str, Any]],
    tags_in_use: bool,
) -> str | None:
    """Why the story opts out of snapshots, or None when it does not."""
    parameters = _mapping(record.get("parameters"))
    chromatic = _mapping(parameters.get("chromatic"))
    for reason, value in (
        ("chromatic.disableSnapshot", chromatic.get("disableSnapshot")),
        ("chromatic.disable", chromatic.get("disable")),
        ("lostpixel.disable", _mapping(parameters.get("lostpixel")).get("disable")),
        ("screenshot.skip", _mapping(parameters.get("screenshot")).get("skip")),
    ):
        if value is True:
            return reason
    if tags_in_use and SNAPSHOT_TAG not in _tags(entry, stories):
        return "no snapshot tag"
    return None


def _snapshots(
    entry: IndexEntry, record: Mapping[str, Any], initial_globals: Mapping[str, Any]
) -> list[StorySnapshot]:
    parameters = _mapping(record.get("parameters"))
    chromatic = _mapping(parameters.get("chromatic"))
    lostpixel = _mapping(parameters.get("lostpixel"))
    storycap = _mapping(parameters.get("screenshot"))
    globals_chain = [
        _mapping(record.get("storyGlobals")),
        _mapping(record.get("globals")),
        _mapping(initial_globals),
    ]
    sizes = story_sizes(parameters, globals_chain)
    if len(sizes) > MAX_SIZES_PER_STORY:
        raise SizeProblem(f"{len(sizes)} sizes asked for, at most {MAX_SIZES_PER_STORY}")
    delay = _first(
        _delay(chromatic.get("delay")),
        _delay(lostpixel.get("waitBeforeScreenshot")),
        _delay(storycap.get("delay")),
    )
    threshold = _first(_ratio(chromatic.get("diffThreshold")), _ratio(lostpixel.get("threshold")))
    count_aa = chromatic.get("diffIncludeAntiAliasing")
    ignore = _ignore_selectors(chromatic.get("ignoreSelectors"), lostpixel.get("mask"))
    media = _media(chromatic)
    crop: Crop = "root"
    if chromatic.get("cropToViewport") is True:
        crop = "viewport"
    elif storycap.get("fullPage") is True:
        crop = "page"
    modes = _enabled_modes(chromatic)
    snapshots: list[StorySnapshot] = []
    for mode, viewport in sizes:
        name = entry.id if mode is None else f"{entry.id} [{mode}]"
        chosen = next(iter(modes.values())) if len(modes) == 1 else modes.get(mode or "", {})
        if mode is not None:
            _check_mode(mode, name)
        snapshots.append(
            StorySnapshot(
                name=name,
                story_id=entry.id,
                title=entry.title,
                story=entry.name,
                mode=mode,
                viewport=viewport,
                delay_ms=0 if delay is None else min(round(delay), MAX_DELAY_MS),
                pause_animation_at_end=chromatic.get("pauseAnimationAtEnd") is not False,
                crop=crop,
                threshold=threshold,
                count_aa=count_aa if isinstance(count_aa, bool) else None,
                ignore=ignore,
                media=media,
                globals=_mode_globals(chosen),
                problem=None,
            )
        )
    return snapshots


def _enabled_modes(chromatic: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """Chromatic's modes that are taken (objects, not disabled), by name: when there are any,
    they are the story's sizes (`sizes.story_sizes`), one snapshot each."""
    return {
        str(name): mode
        for name, mode in _mapping(chromatic.get("modes")).items()
        if isinstance(mode, Mapping) and mode.get("disable") is not True
    }


def _mode_globals(mode: Mapping[str, Any]) -> dict[str, Any]:
    """The globals a Chromatic mode sets besides its viewport (`theme`, `backgrounds`,
    `locale`...): the story is rendered under them, at most `MAX_MODE_GLOBALS`."""
    found = {str(k): v for k, v in mode.items() if k not in ("viewport", "disable")}
    return dict(list(found.items())[:MAX_MODE_GLOBALS])


def _distinct(
    snapshots: list[StorySnapshot], entries: Mapping[str, IndexEntry]
) -> list[StorySnapshot]:
    """The snapshots, every name once: the stories whose snapshots would share a name (story
    `a` in mode `x` and a story whose id is `a [x]`) each fail alone, under their own ids."""
    owners: dict[str, set[str]] = {}
    for snapshot in snapshots:
        owners.setdefault(snapshot["name"], set()).add(snapshot["story_id"])
    clashing = {name: ids for name, ids in owners.items() if len(ids) > 1}
    if not clashing:
        return snapshots
    failing: dict[str, str] = {}
    for name, ids in clashing.items():
        for story_id in ids:
            others = ", ".join(sorted(ids - {story_id}))
            failing[story_id] = f"snapshot name {name!r} is also a snapshot of {others}"
    kept = [s for s in snapshots if s["story_id"] not in failing]
    return kept + [_unplannable(entries[story_id], why) for story_id, why in failing.items()]


def _unplannable(entry: IndexEntry, problem: str) -> StorySnapshot:
    """The one snapshot of a story that asks for what cannot be captured: failed with why."""
    return StorySnapshot(
        name=entry.id,
        story_id=entry.id,
        title=entry.title,
        story=entry.name,
        mode=None,
        viewport=default_viewport(),
        delay_ms=0,
        pause_animation_at_end=True,
        crop="root",
        threshold=None,
        count_aa=None,
        ignore=[],
        media=DEFAULT_MEDIA.copy(),
        globals={},
        problem=problem[:MAX_PROBLEM_LENGTH],
    )


def _ignore_selectors(chromatic: object, lostpixel: object) -> list[str]:
    """The story's own ignore selectors: Chromatic's list of selectors, then Lost Pixel's
    `[{selector}]`; malformed items left out, the first `MAX_IGNORE_SELECTORS` kept."""
    found: list[object] = list(chromatic) if isinstance(chromatic, list) else []
    if isinstance(lostpixel, list):
        found += [item.get("selector") for item in lostpixel if isinstance(item, Mapping)]
    selectors = [
        item.strip()
        for item in found
        if isinstance(item, str) and item.strip() and len(item) <= MAX_SELECTOR_LENGTH
    ]
    return list(dict.fromkeys(selectors))[:MAX_IGNORE_SELECTORS]


def _media(chromatic: Mapping[str, Any]) -> Media:
    """Chromatic's media parameters, each a value the browser emulates, else the default."""
    reduced, forced, media = (
        chromatic.get("prefersReducedMotion"),
        chromatic.get("forcedColors"),
        chromatic.get("media"),
    )
    return Media(
        reduced_motion=reduced if reduced in REDUCED_MOTIONS else DEFAULT_MEDIA["reduced_motion"],
        forced_colors=forced if forced in FORCED_COLORS else DEFAULT_MEDIA["forced_colors"],
        media=media if media in MEDIA_TYPES else DEFAULT_MEDIA["media"],
    )


def _check_mode(mode: str, name: str) -> None:
    """A mode's name goes into the snapshot's name: it must fit and stay on one line."""
    if not mode.strip() or any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in mode):
        raise SizeProblem(f"mode {mode!r}: a mode name must be printable text")
    if len(name) > MAX_SNAPSHOT_NAME:
        raise SizeProblem(
            f"mode {mode[:40]!r}: the snapshot name would be {len(name)} characters, "
            f"at most {MAX_SNAPSHOT_NAME}"
        )


def _tags(entry: IndexEntry, stories: Mapping[str, Mapping[str, Any]]) -> tuple[str, ...]:
    """The story's tags: the index's, else (a v3 index has none) the preview record's."""
    if entry.tags:
        return entry.tags
    record = stories.get(entry.id)
    tags = record.get("tags") if isinstance(record, Mapping) else None
    if isinstance(tags, list):
        return tuple(tag for tag in tags if isinstance(tag, str))
    return ()


def _delay(value: object) -> float | None:
    """A wait in ms: a finite number, 0 or more."""
    number = _number(value)
    return number if number is not None and number >= 0 else None


def _ratio(value: object) -> float | None:
    """A threshold: a number in 0..1."""
    number = _number(value)
    return float(number) if number is not None and 0 <= number <= 1 else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


def _first(*values: float | None) -> float | None:
    return next((value for value in values if value is not None), None)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
